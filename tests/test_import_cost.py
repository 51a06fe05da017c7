"""``import pregelkit.func`` loads only what every workflow needs.

The import-time goal (< 50 ms, measured in ``benchmarks/``) is kept by
loading optional extras and rarely used machinery (the run queue, the
stdlib's ``uuid``/``socket``/``asyncio``/``inspect``/``dataclasses``...) on
first use. A timing test would be flaky; which modules a fresh interpreter
holds is not. The second half checks that what loads lazily still works,
and that the public dataclasses defined without ``@dataclass`` behave as the
``@dataclass`` twins of their declarations do.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import operator
import os
import pickle
import subprocess
import sys
from collections import deque
from datetime import timedelta
from typing import Any

import pytest
import typing_extensions
import wrapt

from pregelkit._internal import _dataclass, _ids
from pregelkit._internal._dataclass import replace
from pregelkit.channels.binop import BinaryOperatorAggregate
from pregelkit.checkpoint._faults import StorageRetry
from pregelkit.checkpoint.attempts import AttemptRecord, RunTimeline, Timeline
from pregelkit.errors import NodeError
from pregelkit.func import entrypoint, task
from pregelkit.runtime import ExecutionInfo, Runtime, ServerInfo
from pregelkit.types import (
    CachePolicy,
    Command,
    GraphOutput,
    Interrupt,
    Overwrite,
    PregelExecutableTask,
    Send,
    TimeoutPolicy,
)

DURABLE = (
    # pregelkit.durable (issue 28): a workflow that waits for nothing pays nothing
    "pregelkit.durable",
    "pregelkit.testing",
    "pregelkit.pregel._api.waits",
    "pregelkit.pregel._api.children",
    "pregelkit.checkpoint.waits",
    "pregelkit.checkpoint._waits",
)
LAZY = (
    # optional extras: never imported by `import pregelkit`
    "psycopg",
    "cryptography",
    "dask",
    "distributed",
    "opentelemetry",
    "rich",
    "playwright",
    # loaded on first use
    "pregelkit.checkpoint._runqueue",
    "pregelkit.checkpoint.runs",
    "pregelkit.worker",
    "asyncio",
    "concurrent.futures",
    "sqlite3",
    "uuid",
    "socket",
    "platform",
    "logging",
    "json",
    # the costly half of the old import: loaded when a function is
    # decorated, a signature read, a timestamp taken, a saver retries...
    "inspect",
    "dataclasses",
    "ast",
    "tokenize",
    "wrapt",
    "typing_extensions",
    "random",
    "datetime",
    "pregelkit.observe.otel",
    "pregelkit.checkpoint._faults",
    "pregelkit.checkpoint.attempts",
    "pregelkit.channels.binop",
    "pregelkit.channels.delta",
    "pregelkit.channels.any_value",
    "pregelkit.channels.named_barrier_value",
    "pregelkit.channels.untracked_value",
    *DURABLE,
)


def _fresh(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_import_func_loads_no_optional_or_rarely_used_module() -> None:
    code = (
        "import sys, pregelkit, pregelkit.func\n"
        f"print(sorted(m for m in {LAZY!r} if m in sys.modules))\n"
    )
    assert _fresh(code) == "[]"


def test_runs_that_wait_for_nothing_load_none_of_pregelkit_durable() -> None:
    """Sync and async runs of an entrypoint with a task, on a saver with a
    run queue (whose waits machinery is the heaviest), load no module of
    ``pregelkit.durable``'s."""
    code = (
        "import asyncio, sqlite3, sys\n"
        "from pregelkit.checkpoint.sqlite import SqliteSaver\n"
        "from pregelkit.func import entrypoint, task\n"
        "saver = SqliteSaver(sqlite3.connect(':memory:', check_same_thread=False))\n"
        "@task\n"
        "def add(x): return x + 1\n"
        "@entrypoint(checkpointer=saver)\n"
        "def wf(x): return add(x).result()\n"
        "assert wf.invoke(1, {'configurable': {'thread_id': 'a'}}) == 2\n"
        "assert asyncio.run(wf.ainvoke(1, {'configurable': {'thread_id': 'b'}})) == 2\n"
        f"print(sorted(m for m in {DURABLE!r} if m in sys.modules))\n"
    )
    assert _fresh(code) == "[]"


def test_import_func_compiles_nothing() -> None:
    """The first ``compile()`` in a process builds the AST type table (a
    tenth of the import): a string annotation in a NamedTuple, a TypedDict or
    a ``Generic[...]`` subscript on the import path would bring it back."""
    code = (
        "import builtins\n"
        "seen = []\n"
        "real = builtins.compile\n"
        "def spy(source, *args, **kwargs):\n"
        "    if not isinstance(source, bytes):  # bytes: a module without a current .pyc\n"
        "        seen.append(source)\n"
        "    return real(source, *args, **kwargs)\n"
        "builtins.compile = spy\n"
        "import pregelkit.func\n"
        "print(seen)\n"
    )
    assert _fresh(code) == "[]"


def test_a_plain_first_run_loads_no_thread_pool() -> None:
    """A chain of nodes with no saver runs every task in the driver: its first
    ``invoke`` loads the engine, not the thread pool, ``concurrent.futures``
    and its ``logging``, nor ``random`` (a retry's jitter), nor what ships
    bodies to a remote executor; built with no store, it loads no store
    (whose filters bring ``json`` and ``dataclasses``); its nodes being
    plain functions, it reads them without ``inspect``."""
    code = (
        "import sys\n"
        "from pregelkit.channels import LastValue\n"
        "from pregelkit.pregel import NodeBuilder, Pregel\n"
        "nodes = {f'n{i}': NodeBuilder().subscribe_only(f'c{i}').do(lambda x: x + 1)"
        ".write_to(f'c{i + 1}') for i in range(3)}\n"
        "app = Pregel(nodes=nodes, channels={f'c{i}': LastValue(int) for i in range(4)}, "
        "input_channels='c0', output_channels='c3')\n"
        "assert app.invoke(0) == 3\n"
        "lazy = ('concurrent.futures', 'logging', 'queue', 'random', "
        "'pregelkit.pregel._exec.executor', 'pregelkit.pregel._exec.remote', "
        "'pregelkit.store.base', 'json', 'dataclasses', 'inspect')\n"
        "print(sorted(m for m in lazy if m in sys.modules))\n"
    )
    assert _fresh(code) == "[]"


def test_submit_still_finds_the_run_queue(tmp_path) -> None:
    """The lazy import is the submit path's: queueing a run works."""
    from pregelkit.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:

        @entrypoint(checkpointer=saver)
        def flow(x: int) -> int:
            return x

        handle = flow.submit(1, {"configurable": {"thread_id": "t"}})
        assert handle.thread_id == "t"
        assert handle.status() == "queued"


def test_lazily_loaded_names_are_still_importable() -> None:
    code = (
        "import pregelkit.channels as ch, pregelkit.checkpoint as cp\n"
        "from pregelkit.channels import *\n"
        "names = [getattr(ch, n).__name__ for n in ch.__all__]\n"
        "print(names == list(ch.__all__), cp.StorageRetry().attempts)\n"
    )
    assert _fresh(code) == "True 6"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        import pregelkit.channels

        pregelkit.channels.Nope  # noqa: B018


def test_a_task_is_still_a_wrapt_function_wrapper() -> None:
    """wrapt loads with the first task; the task class is made once."""

    @task
    def one(x: int) -> int:
        return x

    @task
    def two(x: int) -> int:
        return x

    assert isinstance(one, wrapt.FunctionWrapper)
    assert type(one) is type(two)
    assert type(one).__name__ == "_TaskFunction"
    assert one.__wrapped__.__name__ == "one"


def test_otel_module_loads_only_once_opentelemetry_is_imported() -> None:
    """The hooks factory is registered at import; it imports its module on
    the first run after ``opentelemetry.trace`` appears (a stand-in here,
    with no provider set, so the run gets no hooks)."""
    code = (
        "import sys, types\n"
        "from pregelkit.func import entrypoint\n"
        "from pregelkit.pregel._exec.hooks import run_hooks\n"
        "before = 'pregelkit.observe.otel' in sys.modules, run_hooks('t', False)\n"
        "trace = types.ModuleType('opentelemetry.trace')\n"
        "class ProxyTracerProvider: pass\n"
        "class NoOpTracerProvider: pass\n"
        "trace.ProxyTracerProvider = ProxyTracerProvider\n"
        "trace.NoOpTracerProvider = NoOpTracerProvider\n"
        "trace.get_tracer_provider = ProxyTracerProvider\n"
        "sys.modules['opentelemetry.trace'] = trace\n"
        "after = run_hooks('t', False), 'pregelkit.observe.otel' in sys.modules\n"
        "print(before, after)\n"
    )
    assert _fresh(code) == "(False, None) (None, True)"


def test_binop_still_looks_through_read_only() -> None:
    """``ReadOnly`` is found without importing typing_extensions (it is
    loaded here, by this test's imports)."""
    channel = BinaryOperatorAggregate(typing_extensions.ReadOnly[list[int]], operator.add)
    assert channel.get() == []


def test_timeout_policy_still_takes_a_timedelta() -> None:
    assert TimeoutPolicy(run_timeout=timedelta(seconds=2)).run_timeout == 2.0
    assert TimeoutPolicy.coerce(timedelta(milliseconds=500)) == TimeoutPolicy(run_timeout=0.5)
    with pytest.raises(TypeError, match="timedelta"):
        TimeoutPolicy(run_timeout="2s")


def test_checkpoint_ids_differ_in_a_forked_child() -> None:
    """``uuid6`` draws from its own generator: a forked child reseeds it, as
    ``random`` does its own, so two workers never share random bits."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, str(_ids._random.getrandbits(64)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = int(os.read(read, 64))
    os.close(read)
    os.close(write)
    assert child != _ids._random.getrandbits(64)


# Each lazy dataclass, two different instances (args), and whether its
# __init__ is its own (not the one @dataclass would generate).
CASES: list[tuple[type, tuple[Any, ...], tuple[Any, ...], bool]] = [
    (Interrupt, ("v", "i1"), ("v", "i2"), True),
    (GraphOutput, (1, ()), (2, ()), False),
    (Command, (None, {"a": 1}, "yes", Send("n", 1)), (None, None, "no"), False),
    (Overwrite, ([1],), ([2],), False),
    (TimeoutPolicy, (1.0,), (2.0,), True),
    (CachePolicy, (), (lambda *_: "k", 5), False),
    (ExecutionInfo, ("c", "", "t"), ("c", "", "t", "th", "r", 2), False),
    (ServerInfo, ("a", "g"), ("a", "g", "u"), False),
    (Runtime, ("ctx1",), ("ctx2",), False),
    (
        AttemptRecord,
        ("t", "", "r", 1, "i", "n", 1, 1.0, None, None),
        ("t", "", "r", 2, "i", "n", 1, 1.0, 2.0, "ok"),
        False,
    ),
    (RunTimeline, ("r", 1.0, None, ()), ("r", 2.0, None, ()), False),
    (Timeline, ("t", ()), ("u", ()), False),
    (StorageRetry, (), (3,), False),
    (NodeError, ("n", KeyError("x")), ("m", KeyError("x")), False),
    (entrypoint.final, (1, 2), (1, 3), False),
    (
        PregelExecutableTask,
        ("n", 1, None, deque(), {}, ["a"], [], None, "id", ("p",)),
        ("m", 1, None, deque(), {}, ["a"], [], None, "id", ("p",), (), (), None, "p"),
        False,
    ),
]


def _twin(cls: type) -> Any:
    """The class ``@dataclass`` makes of ``cls``'s declaration."""
    return _dataclass._DECLARATIONS[cls].twin()


def _build(cls: type, args: tuple[Any, ...]) -> Any:
    if cls is TimeoutPolicy:
        return cls(run_timeout=args[0])
    return cls(*args)


@pytest.mark.parametrize(
    ("cls", "a", "b", "own_init"), CASES, ids=[c[0].__qualname__ for c in CASES]
)
def test_lazy_dataclass_behaves_as_its_dataclass_twin(
    cls: type, a: tuple[Any, ...], b: tuple[Any, ...], own_init: bool
) -> None:
    twin = _twin(cls)
    params = twin.__dataclass_params__
    x, y = _build(cls, a), _build(cls, b)
    # metadata: the real dataclasses machinery sees the same fields
    assert dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(x)
    assert [(f.name, f.type, f.default, f.kw_only, f.repr) for f in dataclasses.fields(x)] == [
        (f.name, f.type, f.default, f.kw_only, f.repr) for f in dataclasses.fields(twin)
    ]
    assert repr(cls.__dataclass_params__) == repr(params)
    assert cls.__match_args__ == twin.__match_args__
    if not own_init:
        assert inspect.signature(cls) == inspect.signature(twin)
        twin_x = twin(*a)
        assert repr(x) == repr(twin_x)
        assert copy.copy(x).__reduce_ex__(5)[2] == twin_x.__reduce_ex__(5)[2]
    # equality and hashing as @dataclass defines them
    if params.eq:
        assert x == copy.copy(x) and x != y
        assert x.__eq__(object()) is NotImplemented
        if params.frozen:
            assert hash(x) == hash(copy.copy(x))
        else:
            assert cls.__hash__ is None
    # frozen: every assignment is refused with dataclasses' own error
    if params.frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            x.__setattr__(dataclasses.fields(x)[0].name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(x, dataclasses.fields(x)[0].name)
    # replace/asdict/pickle
    first = dataclasses.fields(x)[-1].name
    value = getattr(y, first)
    assert getattr(dataclasses.replace(x, **{first: value}), first) == value
    assert getattr(replace(x, **{first: value}), first) == value
    if cls is not PregelExecutableTask:  # holds a config and a deque: pickles, never compared
        assert repr(pickle.loads(pickle.dumps(x))) == repr(x)


def test_replace_refuses_unknown_fields_like_dataclasses() -> None:
    info = ExecutionInfo("c", "", "t")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        info.patch(nope=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Runtime().override(nope=1)
    assert Runtime().override(context=3).context == 3


def test_pickles_are_the_bytes_dataclass_wrote() -> None:
    """Checkpoints hold pickles of these types: the payload must not change
    (field order in ``__slots__`` and frozen slot state as a list)."""
    golden = [
        (
            Command(resume="yes"),
            "80059554000000000000008c0f70726567656c6b69742e7479706573948c07436f"
            "6d6d616e649493942981944e7d94288c056772617068944e8c06757064617465944e8c06726573756d6594"
            "8c03796573948c04676f746f9429758694622e",
        ),
        (
            TimeoutPolicy(run_timeout=2),
            "8005953e000000000000008c0f70726567656c6b69742e747970657394"
            "8c0d54696d656f7574506f6c6963799493942981945d94284740000000000000004e8c046175746f946562"
            "2e",
        ),
        (
            Interrupt("v", "i"),
            "80059530000000000000008c0f70726567656c6b69742e7479706573948c0949"
            "6e746572727570749493942981948c0176948c0169944e8794622e",
        ),
    ]
    for value, hex_bytes in golden:
        assert pickle.dumps(value, 5) == bytes.fromhex(hex_bytes), value
