"""The process the crash checker runs: the workflow on a saver that logs
every save it commits and, told to, kills this process with SIGKILL right
before or right after its k-th save.

``python -m pregelkit.testing._crash_child SPEC serve`` imports the workflow
and runs the jobs it reads from stdin (see ``serve`` and ``job``); SPEC is
the pickle ``_crash`` wrote.

A save is its own commit here: the saver's ``grouped()`` blocks (several
queued saves in one transaction, an optimization) are turned off, so the
save a kill follows is committed and the one it precedes is not.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import pickle
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import Any

from pregelkit.checkpoint.base import BaseCheckpointSaver
from pregelkit.pregel._exec.hooks import add_hooks_factory
from pregelkit.testing._crashlog import CrashLog, open_log

WARM = (
    "pregelkit.checkpoint.serde.jsonplus",
    "pregelkit.pregel._core.perform",
    "pregelkit.pregel._core.loop",
    "pregelkit.pregel._exec.executor",
    "pregelkit.pregel._exec.run_executor",
    "pregelkit.pregel._exec.runner",
    "pregelkit.pregel._plan.replay",
)
"""Modules a first run imports, imported once by the server instead of by
every fork (about 0.2 s each). Only a matter of speed."""

MAIN = "__pregelkit_crash_main__"
"""The module name a workflow defined in a script's ``__main__`` is loaded under
(its ``if __name__ == "__main__":`` block does not run)."""


class _Counter:
    """Numbers the saves of this process in the order they commit; a save
    that fails is not one (its number goes to the next)."""

    def __init__(self, kill: tuple[str, int] | None) -> None:
        self.kill = kill
        self.saves = 0
        self.lock = threading.Lock()
        self.alock: asyncio.Lock | None = None
        """The async twins' lock, made on the job's one event loop."""
        self.log: CrashLog | None = None

    def before(self) -> int:
        n = self.saves + 1
        if self.kill == ("before", n):
            _die()
        return n

    def after(self, n: int, event: dict[str, Any]) -> None:
        assert self.log is not None
        self.saves = n
        self.log.write({"save": n, **event})
        if self.kill == ("after", n):
            _die()

    def async_lock(self) -> asyncio.Lock:
        if self.alock is None:
            self.alock = asyncio.Lock()
        return self.alock


class _Starts:
    """Run hooks (``pregel._exec.hooks``) logging each task attempt as its body
    starts: how the checker sees a task run again, rather than its writes
    saved again (a run that ends under ``durability="exit"`` saves the writes
    it took from the checkpoint too)."""

    def __init__(self, counter: _Counter) -> None:
        self.counter = counter

    def attempt_started(self, task: Any, step: int, attempt: int) -> None:
        assert self.counter.log is not None
        self.counter.log.write({"start": task.id, "name": task.name, "step": step})

    def attempt_ended(self, token: Any, outcome: Any, exc: Any, retrying: bool) -> None:
        pass

    def attempt_skipped(self, task: Any, step: int, outcome: Any) -> None:
        pass

    def run_started(self, run_id: str) -> None:
        pass

    def interrupted(self, interrupts: Any) -> None:
        pass

    def run_ended(self, exc: BaseException | None) -> None:
        pass


def _die() -> None:
    # no cleanup, no finally, no atexit: as a machine losing power would
    os.kill(os.getpid(), signal.SIGKILL)


def _checkpoint_event(metadata: Any) -> dict[str, Any]:
    return {"kind": "checkpoint", "step": metadata.get("step"), "source": metadata.get("source")}


def _writes_event(writes: Any, task_id: str, task_path: str) -> dict[str, Any]:
    call = next((v for c, v in writes if c == "__call__" and isinstance(v, str)), None)
    return {
        "kind": "writes",
        "task": task_id,
        "path": task_path,
        "channels": [c for c, _ in writes],
        "call": call,
    }


def counting(base: type[BaseCheckpointSaver[Any]], counter: _Counter) -> type[Any]:
    """``base`` with its saves numbered, logged and perhaps fatal. The async
    twins are hooked only where ``base`` implements them itself (the
    inherited ones call the sync methods, hooked already)."""

    def put(self: Any, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        with counter.lock:
            n = counter.before()
            out = base.put(self, config, checkpoint, metadata, versions)
            counter.after(n, _checkpoint_event(metadata))
        return out

    def put_writes(self: Any, config: Any, writes: Any, task_id: str, *a: Any, **kw: Any) -> None:
        with counter.lock:
            n = counter.before()
            base.put_writes(self, config, writes, task_id, *a, **kw)
            counter.after(n, _writes_event(writes, task_id, a[0] if a else kw.get("task_path", "")))

    async def aput(self: Any, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        async with counter.async_lock():
            n = counter.before()
            out = await base.aput(self, config, checkpoint, metadata, versions)
            counter.after(n, _checkpoint_event(metadata))
        return out

    async def aput_writes(
        self: Any, config: Any, writes: Any, task_id: str, *a: Any, **kw: Any
    ) -> None:
        async with counter.async_lock():
            n = counter.before()
            await base.aput_writes(self, config, writes, task_id, *a, **kw)
            path = a[0] if a else kw.get("task_path", "")
            counter.after(n, _writes_event(writes, task_id, path))

    @contextmanager
    def grouped(self: Any) -> Iterator[None]:
        yield

    @asynccontextmanager
    async def agrouped(self: Any) -> AsyncIterator[None]:
        yield

    ns: dict[str, Any] = {"put": put, "put_writes": put_writes}
    ns.update(grouped=grouped, agrouped=agrouped)
    if base.aput is not BaseCheckpointSaver.aput:
        ns["aput"] = aput
    if base.aput_writes is not BaseCheckpointSaver.aput_writes:
        ns["aput_writes"] = aput_writes
    return type(f"Counting{base.__name__}", (base,), ns)


def _load(spec: dict[str, Any]) -> Any:
    sys.path[:0] = [p for p in spec["sys_path"] if p not in sys.path]
    if "path" in spec:
        found = importlib.util.spec_from_file_location(MAIN, spec["path"])
        assert found is not None and found.loader is not None
        module = importlib.util.module_from_spec(found)
        sys.modules[MAIN] = module
        found.loader.exec_module(module)
    else:
        module = importlib.import_module(spec["module"])
    return getattr(module, spec["name"])


def _saver(spec: dict[str, Any], counter: _Counter, aio: bool) -> Any:
    """The context manager opening the counting saver on the spec's database."""
    target = spec["saver"]
    if target.startswith(("postgres://", "postgresql://")):
        if aio:
            from pregelkit.checkpoint.postgres.aio import AsyncPostgresSaver as base
        else:
            from pregelkit.checkpoint.postgres import PostgresSaver as base  # type: ignore[assignment]
    elif aio:
        from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver as base  # type: ignore[assignment]
    else:
        from pregelkit.checkpoint.sqlite import SqliteSaver as base  # type: ignore[assignment]
    return counting(base, counter).from_conn_string(target)


def _config(spec: dict[str, Any], thread: str) -> dict[str, Any]:
    config = dict(spec["config"] or {})
    config["configurable"] = {**config.get("configurable", {}), "thread_id": thread}
    return config


def _error(log: CrashLog, exc: BaseException) -> None:
    log.write({"error": f"{type(exc).__name__}: {exc}"})


def _out(log: CrashLog, out: Any) -> None:
    try:
        log.write({"out": pickle.dumps(out).hex(), "repr": repr(out)})
    except Exception:  # compared by its repr then
        log.write({"out": None, "repr": repr(out)})


def job(spec: dict[str, Any], wf: Any, args: list[str]) -> None:
    """One run: ``run DURABILITY THREAD LOG [before|after K]`` (the workflow on
    its input, perhaps killed), or ``resume DURABILITY THREAD LOG`` (the thread
    resumed, or run on its input again if nothing of it was saved)."""
    mode, durability, thread, path = args[:4]
    counter = _Counter((args[4], int(args[5])) if len(args) == 6 else None)
    counter.log = log = open_log(path)
    starts = _Starts(counter)
    add_hooks_factory(lambda thread_id, nested: starts)
    config = _config(spec, thread)
    if any(node.is_async for node in wf.nodes.values()):

        async def arun() -> None:
            async with _saver(spec, counter, True) as saver:
                saved = mode == "resume" and await saver.aget_tuple(config) is not None
                app = wf.copy(checkpointer=saver)
                try:
                    out = await app.ainvoke(
                        None if saved else spec["input"], config, durability=durability
                    )
                except Exception as exc:
                    _error(log, exc)
                else:
                    _out(log, out)

        asyncio.run(arun())
        return
    cm: AbstractContextManager[Any] = _saver(spec, counter, False)
    with cm as saver:
        saved = mode == "resume" and saver.get_tuple(config) is not None
        app = wf.copy(checkpointer=saver)
        try:
            out = app.invoke(None if saved else spec["input"], config, durability=durability)
        except Exception as exc:
            _error(log, exc)
        else:
            _out(log, out)


def serve(spec_path: str) -> None:
    """Read jobs from stdin, one a line; run each in a process of its own
    and answer its exit code (negative: the signal that ended it), one a line.

    The workflow is imported once, here; each job is a fork of this process
    (no interpreter to start, no import to redo), whose stderr goes to
    ``LOG.err``. A process that has started threads cannot fork safely: then
    each job is a fresh interpreter (``python -m ... SPEC job ARGS``)."""
    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    wf = _load(spec)
    for name in WARM:
        importlib.import_module(name)
    for line in sys.stdin:
        args = line.split()
        if threading.active_count() > 1:
            cmd = [sys.executable, "-m", __spec__.name, spec_path, "job", *args]
            with open(args[3] + ".err", "w") as err:
                code = subprocess.run(cmd, stdout=err, stderr=err, check=False).returncode
        else:
            code = _forked(spec, wf, args)
        print(code, flush=True)


def _forked(spec: dict[str, Any], wf: Any, args: list[str]) -> int:
    pid = os.fork()
    if pid:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    code = 1
    try:
        err = os.open(args[3] + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 1)  # stdout is the answers' pipe: the workflow's prints go here
        os.dup2(err, 2)
        job(spec, wf, args)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the fork's copy of this process's state is not to be cleaned up


def main(argv: list[str]) -> None:
    if argv[1] == "serve":
        serve(argv[0])
        return
    with open(argv[0], "rb") as f:
        spec = pickle.load(f)
    job(spec, _load(spec), argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
