"""The runnable examples of the design documents, run as scripts.

Each example is written to a file with ``pregelkit`` imports in place of
``langgraph`` ones and run in a fresh interpreter; what it prints is compared,
line for line, with the output the document shows. Task ids and interrupt ids
differ from run to run (they derive from checkpoint ids), so each distinct id
is replaced by a numbered placeholder in order of appearance, in both texts:
the comparison still checks which writes belong to the same task. The NULL
task id of the global resume value is a constant and must appear literally.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"

_TASK_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_INTERRUPT_ID = re.compile(r"(?<![0-9a-f-])[0-9a-f]{32}(?![0-9a-f-])")


def normalize_ids(text: str) -> str:
    """Replace each distinct task id and interrupt id by a placeholder numbered
    in order of first appearance; the NULL task id is kept as it is."""
    tasks: dict[str, str] = {}
    interrupts: dict[str, str] = {}

    def task(m: re.Match[str]) -> str:
        if m.group(0) == NULL_TASK_ID:
            return NULL_TASK_ID
        return tasks.setdefault(m.group(0), f"<task-{len(tasks) + 1}>")

    def intr(m: re.Match[str]) -> str:
        return interrupts.setdefault(m.group(0), f"<interrupt-{len(interrupts) + 1}>")

    return _INTERRUPT_ID.sub(intr, _TASK_ID.sub(task, text))


def run_script(tmp_path: Path, source: str) -> str:
    script = tmp_path / "example.py"
    script.write_text(textwrap.dedent(source))
    # the package of this checkout, whatever is installed in the interpreter
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, f"example failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_normalize_ids_numbers_ids_in_order_and_keeps_null() -> None:
    text = (
        "('8d407c25-02f6-9101-d1b8-5a99c247edde', 'x', "
        "Interrupt(id='5603cdf275d8b8ba0633d272fa176fd3'))"
        " ('22507855-e257-1b5b-eb1a-3c3fb0a071e9', 'y') "
        f"('{NULL_TASK_ID}', 'z') ('8d407c25-02f6-9101-d1b8-5a99c247edde', 'w')"
    )
    assert normalize_ids(text) == (
        "('<task-1>', 'x', Interrupt(id='<interrupt-1>')) ('<task-2>', 'y') "
        f"('{NULL_TASK_ID}', 'z') ('<task-1>', 'w')"
    )


# seed 000: the first Pregel example

SEED_000_EXAMPLE = """
from pregelkit.channels import LastValue, EphemeralValue, Topic
from pregelkit.pregel import Pregel, NodeBuilder

node1 = (
    NodeBuilder().subscribe_only("a")
    .do(lambda x: x + x)
    .write_to("b")
)

node2 = (
    NodeBuilder().subscribe_to("b")
    .do(lambda x: x["b"] + x["b"])
    .write_to("c")
)


app = Pregel(
    nodes={"node1": node1, "node2": node2},
    channels={
        "a": EphemeralValue(str),
        "b": LastValue(str),
        "c": EphemeralValue(str),
    },
    input_channels=["a"],
    output_channels=["b", "c"],
)

print(app.invoke({"a": "foo"}))
"""


def test_seed_000_first_example(tmp_path: Path) -> None:
    out = run_script(tmp_path, SEED_000_EXAMPLE)
    assert out.splitlines() == ["{'b': 'foofoo', 'c': 'foofoofoofoo'}"]


# seed 002: special pending writes

SEED_002_ERROR_EXAMPLE = """
from pregelkit.pregel import Pregel, NodeBuilder
from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from typing import Any

def handle(args: dict[str, Any])->None:
    raise Exception("manllually raised exception")

node = NodeBuilder().subscribe_to("start").do(handle)
app = Pregel(
    nodes={"body": node},
    channels={"start": LastValue(str)},
    checkpointer=InMemorySaver(),
    input_channels=["start"],
    output_channels=[],
)
config = {"configurable": {"thread_id": "123"}}
try:
    result = app.invoke({"start": "begin"}, config=config)
except Exception as ex:
    print(f"Caught exception:{ex}" )

(_, _, _, _, pending_writes) = app.checkpointer.get_tuple(config)
print(pending_writes)
"""

SEED_002_ERROR_OUTPUT = """\
Caught exception:manllually raised exception
[('f9ff1e88-4d82-f417-ad11-8fd870bfe647', '__error__', "Exception('manllually raised exception')")]
"""


def test_seed_002_error_is_a_pending_write(tmp_path: Path) -> None:
    out = run_script(tmp_path, SEED_002_ERROR_EXAMPLE)
    assert normalize_ids(out).splitlines() == normalize_ids(SEED_002_ERROR_OUTPUT).splitlines()


SEED_002_INTERRUPT_EXAMPLE = """
from pregelkit.pregel import Pregel, NodeBuilder
from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from typing import Any
from pregelkit.types import Command, interrupt

def foo(args: dict[str, Any]) -> list[str]:
    resume1 = interrupt("1st interrupt")
    assert resume1 == "1st resume"

    resume2 = interrupt("2nd interrupt")
    assert resume2 == "2nd resume"

    resume3 = interrupt("3rd interrupt")
    assert resume3 == "3rd resume"

    return [resume1, resume2, resume3]

def bar(args: dict[str, Any]) -> None:
    # foo and bar run at once and each one's writes are saved as it finishes;
    # the seed printed foo's first, so bar finishes last here (not in the seed)
    import time; time.sleep(0.2)

app = Pregel(
    nodes={
        "foo": NodeBuilder().subscribe_only("start").do(foo).write_to("output"),
        "bar": NodeBuilder().subscribe_only("start").do(bar),
    },
    channels={
        "start": LastValue(str),
        "output": LastValue(list[str]),
    },
    input_channels=["start"],
    output_channels=["output"],
    checkpointer=InMemorySaver(),
)

config = {"configurable": {"thread_id": "123"}}
result = app.invoke(input={"start": "begin"}, config=config, stream_mode="tasks")
(_, _, _, _, pending_writes) = app.checkpointer.get_tuple(config)
print(f"After invoke:\\n{pending_writes}")

app.invoke(input=Command(resume="1st resume"), config=config)
(_, _, _, _, pending_writes) = app.checkpointer.get_tuple(config)
print(f"\\nAfter resume 1:\\n{pending_writes}")

app.invoke(input=Command(resume="2nd resume"), config=config)
(_, _, _, _, pending_writes) = app.checkpointer.get_tuple(config)
print(f"\\nAfter resume 2:\\n{pending_writes}")

result = app.invoke(input=Command(resume="3rd resume"), config=config)
assert result == {"output": ["1st resume", "2nd resume", "3rd resume"]}
(_, _, _, _, pending_writes) = app.checkpointer.get_tuple(config)
print(f"\\nAfter resume 3:\\n{pending_writes}")
"""

# The seed printed interrupts before LangGraph 1.2 added response_schema to their repr,
# and when every interrupt() call of a task shared the task's id. LangGraph 1.2.22 gives
# each call its own (issue 25: an answer re-sent to the first question must not answer
# the second), so the 2nd and 3rd interrupts here carry their own ids.
SEED_002_INTERRUPT_OUTPUT = """\
After invoke:
[('8d407c25-02f6-9101-d1b8-5a99c247edde', '__interrupt__', [Interrupt(value='1st interrupt', id='5603cdf275d8b8ba0633d272fa176fd3', response_schema=None)]), ('22507855-e257-1b5b-eb1a-3c3fb0a071e9', '__no_writes__', None)]

After resume 1:
[('8d407c25-02f6-9101-d1b8-5a99c247edde', '__interrupt__', [Interrupt(value='2nd interrupt', id='fc2d7e1d7264963d5b37637fd0ee9fa4', response_schema=None)]), ('22507855-e257-1b5b-eb1a-3c3fb0a071e9', '__no_writes__', None), ('00000000-0000-0000-0000-000000000000', '__resume__', '1st resume'), ('8d407c25-02f6-9101-d1b8-5a99c247edde', '__resume__', ['1st resume'])]

After resume 2:
[('8d407c25-02f6-9101-d1b8-5a99c247edde', '__interrupt__', [Interrupt(value='3rd interrupt', id='bfffc45530b90048a50748f5745d2d3c', response_schema=None)]), ('22507855-e257-1b5b-eb1a-3c3fb0a071e9', '__no_writes__', None), ('00000000-0000-0000-0000-000000000000', '__resume__', '2nd resume'), ('8d407c25-02f6-9101-d1b8-5a99c247edde', '__resume__', ['1st resume', '2nd resume'])]

After resume 3:
[]
"""  # noqa: E501


def test_seed_002_interrupts_and_resumes_as_pending_writes(tmp_path: Path) -> None:
    out = run_script(tmp_path, SEED_002_INTERRUPT_EXAMPLE)
    got = normalize_ids(out).splitlines()
    want = normalize_ids(SEED_002_INTERRUPT_OUTPUT).splitlines()
    assert got == want
    # the global resume value keeps the NULL task id, literally
    assert sum(NULL_TASK_ID in line for line in got) == 2
    # one task id for foo (interrupt + resume writes), another for bar; each of
    # foo's three interrupt() calls has its own interrupt id
    assert "<task-1>" in got[1] and "<task-2>" in got[1] and "<interrupt-1>" in got[1]
    assert "<interrupt-2>" in got[4] and "<interrupt-3>" in got[7]
    assert "<task-3>" not in "\n".join(got) and "<interrupt-4>" not in "\n".join(got)
