"""The determinism lint's rules (pregelkit.lint), one source per case: each
line ending in ``# expect: PKnnn`` must be found, and nothing else."""

from __future__ import annotations

import textwrap

import pytest

from pregelkit.lint import lint_source

from lint_expect import expected

HEAD = """\
from pregelkit.func import entrypoint, task
from pregelkit.types import interrupt
"""


def check(body: str) -> None:
    source = HEAD + textwrap.dedent(body)
    found = {(f.line, f.code) for f in lint_source(source, "case.py")}
    assert found == expected(source), source


CLOCK = [
    """
    import time

    @entrypoint()
    def wf(x: int) -> float:
        a = time.time()  # expect: PK001
        b = time.monotonic_ns()  # expect: PK001
        c = time.perf_counter()  # expect: PK001
        d = time.localtime()  # expect: PK001
        e = time.localtime(x)  # a given time: fine
        time.sleep(0.1)
        return a + b + c + d.tm_sec + e.tm_sec
    """,
    """
    from datetime import date, datetime
    import datetime as dt
    from time import time as now

    @entrypoint()
    def wf(x: int) -> str:
        stamp = now()  # expect: PK001
        today = date.today()  # expect: PK001
        when = datetime.now()  # expect: PK001
        utc = dt.datetime.utcnow()  # expect: PK001
        given = datetime.fromtimestamp(x)
        return f"{stamp} {today} {when} {utc} {given}"
    """,
    """
    import time

    started = time.time()  # module level: runs at import, not on replay

    @task
    def stamp() -> float:
        return time.time()

    def unrelated() -> float:
        return time.time()

    @entrypoint()
    def wf(x: int) -> float:
        return stamp().result() + x
    """,
]

RANDOM = [
    """
    import os
    import random
    import secrets
    import uuid
    from random import choice as pick
    from uuid import uuid4 as new_id
    import numpy as np

    @entrypoint()
    def wf(items: list[str]) -> list[object]:
        return [
            random.random(),  # expect: PK002
            random.randint(1, 6),  # expect: PK002
            pick(items),  # expect: PK002
            uuid.uuid4(),  # expect: PK002
            uuid.uuid1(),  # expect: PK002
            new_id(),  # expect: PK002
            secrets.token_hex(8),  # expect: PK002
            os.urandom(4),  # expect: PK002
            np.random.rand(3),  # expect: PK002
            random.Random(),  # expect: PK002
        ]
    """,
    """
    import random
    import uuid
    import numpy as np

    @entrypoint()
    def wf(name: str) -> list[object]:
        return [
            uuid.uuid5(uuid.NAMESPACE_URL, name),
            uuid.uuid3(uuid.NAMESPACE_DNS, name),
            random.Random(42).random(),
            np.random.default_rng(7).random(),
        ]
    """,
]

IO = [
    """
    import os
    import shutil
    import socket
    import subprocess
    import urllib.request
    from pathlib import Path

    import httpx
    import requests

    @entrypoint()
    def wf(folder: Path) -> object:
        with open("notes.txt") as f:  # expect: PK003
            notes = f.read()
        text = Path("a.txt").read_text()  # expect: PK003
        out = Path(str(folder)) / "out.txt"
        out.write_text(notes + text)  # expect: PK003
        here = folder.exists()  # expect: PK003
        page = requests.get("https://example.com")  # expect: PK003
        client = httpx.Client()  # expect: PK003
        subprocess.run(["true"])  # expect: PK003
        os.system("true")  # expect: PK003
        sock = socket.create_connection(("localhost", 80))  # expect: PK003
        body = urllib.request.urlopen("https://example.com")  # expect: PK003
        shutil.copy("a", "b")  # expect: PK003
        return here, page, client, sock, body
    """,
    """
    import json
    import secrets
    import subprocess
    from pathlib import Path

    import httpx

    def open(door: str) -> str:
        return door

    @task
    def load(path: str) -> str:
        return Path(path).read_text()

    @entrypoint()
    def wf(name: str) -> str:
        target = Path("out") / name  # a path is only a name
        door = open("front")  # the module's own open
        window = Window()
        window.open()  # not a Path
        if not door:
            raise subprocess.CalledProcessError(1, "door")  # an error is built, not I/O
        request = httpx.Request("GET", "https://example.com")  # not sent
        same = secrets.compare_digest(door, "front")
        print(json.dumps({"door": door, "request": str(request), "same": same}))
        return load(str(target)).result()

    class Window:
        def open(self) -> None:
            pass
    """,
]

UNORDERED = [
    """
    import glob
    import os

    @task
    def handle(x: object) -> object:
        return x

    @entrypoint()
    def wf(items: list[str]) -> list[object]:
        out = []
        for x in {"a", "b"}:  # expect: PK004
            out.append(handle(x))
        out += [handle(x) for x in set(items)]  # expect: PK004
        tags = frozenset(items)
        for tag in tags:  # expect: PK004
            out.append(handle(tag).result())
        both = set(items) | {"c"}
        futures = {t: handle(t) for t in both}  # expect: PK004
        for name in os.listdir("."):  # expect: PK003 PK004
            handle(name)
        for name in glob.glob("*.txt"):  # expect: PK003 PK004
            handle(name)
        counts = dict.fromkeys(set(items), 0)
        for key, value in counts.items():  # expect: PK004
            handle((key, value))
        return out + list(futures)
    """,
    """
    @task
    def handle(x: object) -> object:
        return x

    @entrypoint()
    def wf(data: dict[str, int]) -> list[object]:
        out = [handle(x) for x in sorted(set(data))]
        seen = set(data)
        for x in seen:  # no task call: the order does not matter
            print(x)
        for key, value in data.items():  # the input's own order is recorded
            out.append(handle((key, value)))
        unique = len({1, 2}) + sum({3, 4})
        return [*out, unique]
    """,
    # recorded calls the module does not define: an imported task (its future's
    # .result()), a child workflow's .submit(), pregelkit.durable calls
    """
    from pregelkit import durable
    from other_module import child, summarize

    @entrypoint()
    def wf(names: list[str]) -> list[object]:
        out = [summarize(n).result() for n in set(names)]  # expect: PK004
        for n in set(names):  # expect: PK004
            out.append(child.submit(n))
        for n in set(names):  # expect: PK004
            durable.send(n, "hello")
        for n in set(names):  # nothing recorded: the order does not matter
            out.append(n.upper())
        return out
    """,
]

MUTATION = [
    """
    @entrypoint()
    def wf(inputs: dict[str, list[str]]) -> int:
        inputs["seen"] = []  # expect: PK005
        inputs["messages"].append("hi")  # expect: PK005
        inputs.update(more=[])  # expect: PK005
        inputs.result = 1  # expect: PK005
        del inputs["seen"]  # expect: PK005
        same = inputs
        same.pop("more")  # expect: PK005
        return len(inputs)
    """,
    """
    @entrypoint()
    async def wf(items: list[int]) -> int:
        items += [4]  # expect: PK005
        items.sort()  # expect: PK005
        return len(items)
    """,
    """
    @entrypoint()
    def wf(count: int) -> int:
        count += 1  # an int rebinds
        return count

    @entrypoint()
    def copies(items: list[int]) -> list[int]:
        mine = list(items)
        mine.append(4)
        items = sorted(items)
        items.append(5)  # the sorted copy
        return mine + items

    @task
    def in_task(items: list[int]) -> list[int]:
        items.append(1)
        return items
    """,
]

INTERRUPT_LOOP = [
    """
    import os
    import random
    import time

    @entrypoint()
    def wf(deadline: float) -> list[object]:
        answers = []
        while time.time() < deadline:  # expect: PK001
            answers.append(interrupt("more?"))  # expect: PK006
        for name in os.listdir("."):  # expect: PK003
            answers.append(interrupt(name))  # expect: PK006
        for _ in range(random.randint(1, 3)):  # expect: PK002
            answers.append(interrupt("again?"))  # expect: PK006
        n = len(os.listdir("inbox"))  # expect: PK003
        for i in range(n):
            answers.append(interrupt(i))  # expect: PK006
        while True:
            answers.append(interrupt("still there?"))  # expect: PK006
            if time.monotonic() > deadline:  # expect: PK001
                break
        return answers
    """,
    """
    @task
    def questions(topic: str) -> list[str]:
        return [topic]

    @entrypoint()
    def wf(items: list[str]) -> list[object]:
        answers = [interrupt(item) for item in items]
        for q in questions("x").result():
            answers.append(interrupt(q))
        while True:
            answer = interrupt("ok?")
            if answer == "yes":
                break
        return answers
    """,
]

SCOPES = [
    # nodes given to add_node, by name, as the only argument, as a lambda
    """
    import random
    import time

    def stamp(state: dict[str, float]) -> dict[str, float]:
        state["t"] = 1.0  # expect: PK005
        return {"t": time.time()}  # expect: PK001

    def roll(state: dict[str, float]) -> dict[str, float]:
        return {"r": random.random()}  # expect: PK002

    def build(builder: object) -> None:
        builder.add_node("stamp", stamp)
        builder.add_node(roll)
        builder.add_node("late", lambda s: {"t": time.time()})  # expect: PK001
    """,
    # NodeBuilder(...).do(...) nodes
    """
    import uuid
    from pregelkit.pregel import NodeBuilder

    def tag(x: str) -> str:
        return f"{x}-{uuid.uuid4()}"  # expect: PK002

    node = NodeBuilder().subscribe_only("a").do(tag).write_to("b")
    other = NodeBuilder().subscribe_only("a").do(lambda x: uuid.uuid4())  # expect: PK002
    """,
    # functions an entrypoint calls, nested functions, nested tasks, task(f), entrypoint()(f)
    """
    import time

    def helper() -> float:
        return deeper()

    def deeper() -> float:
        return time.time()  # expect: PK001

    def only_in_tasks() -> float:
        return time.time()

    def slow() -> float:
        return time.time()

    slow_task = task(slow)

    @task
    def t() -> float:
        return only_in_tasks()

    @entrypoint()
    def wf(x: int) -> float:
        def nested() -> float:
            return time.time()  # expect: PK001

        @task
        def inner() -> float:
            return time.time()

        return helper() + nested() + inner().result() + t().result() + slow_task().result()

    def plain(x: int) -> float:
        return time.perf_counter()  # expect: PK001

    wrapped = entrypoint()(plain)
    """,
    # async entrypoints
    """
    import asyncio
    import time

    import httpx

    @task
    async def handle(x: str) -> str:
        return x

    @entrypoint()
    async def wf(items: list[str]) -> list[str]:
        await asyncio.sleep(0)
        async with httpx.AsyncClient() as client:  # expect: PK003
            await client.get("https://example.com")
        results = await asyncio.gather(*[handle(x) for x in set(items)])  # expect: PK004
        return [*results, str(time.time())]  # expect: PK001
    """,
]

ALIASES = [
    # LangGraph's names, aliased decorators, a module alias
    """
    import time
    from langgraph.func import entrypoint as workflow
    import pregelkit.func as pf

    @workflow()
    def a(x: int) -> float:
        return time.time()  # expect: PK001

    @pf.entrypoint()
    def b(x: int) -> float:
        return time.time()  # expect: PK001

    @pf.task
    def c(x: int) -> float:
        return time.time()
    """,
    # `entrypoint` from another library is not a workflow
    """
    import time
    from otherlib import entrypoint as ep

    @ep()
    def d(x: int) -> float:
        return time.time()
    """,
]

NOQA = [
    """
    import random
    import time

    @entrypoint()
    def wf(x: int) -> float:
        a = time.time()  # noqa
        b = time.time()  # noqa: PK001
        c = time.time()  # noqa: PK002  # expect: PK001
        d = time.time() + random.random()  # NOQA:PK001,PK002
        e = time.time() + random.random()  # noqa: PK002  # expect: PK001
        return a + b + c + d + e
    """,
]


@pytest.mark.parametrize("body", CLOCK, ids=lambda _: "clock")
def test_clock(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", RANDOM, ids=lambda _: "random")
def test_randomness(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", IO, ids=lambda _: "io")
def test_io(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", UNORDERED, ids=lambda _: "unordered")
def test_unordered_iteration_feeding_tasks(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", MUTATION, ids=lambda _: "mutation")
def test_input_mutation(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", INTERRUPT_LOOP, ids=lambda _: "interrupt")
def test_interrupt_in_loops_of_unrecorded_length(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", SCOPES, ids=lambda _: "scope")
def test_scopes(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", ALIASES, ids=lambda _: "alias")
def test_aliases(body: str) -> None:
    check(body)


@pytest.mark.parametrize("body", NOQA, ids=lambda _: "noqa")
def test_noqa(body: str) -> None:
    check(body)


def test_a_finding_says_where_what_and_how_to_fix() -> None:
    source = (
        HEAD + "import time\n\n@entrypoint()\ndef wf(x: int) -> float:\n    return time.time()\n"
    )
    [finding] = lint_source(source, "flows.py")
    assert (finding.path, finding.line, finding.col, finding.code) == ("flows.py", 7, 12, "PK001")
    assert "time.time() reads the wall clock in entrypoint 'wf'" in finding.message
    assert "move it into a @task" in finding.message
    assert str(finding).startswith("flows.py:7:12: PK001 time.time() reads the wall clock")


def test_a_source_that_does_not_parse_raises_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        lint_source("@entrypoint()\ndef wf(:\n", "broken.py")
