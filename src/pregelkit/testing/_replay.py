"""The replay check, a deploy gate: would this code resume the threads in flight?

Each in-flight thread (its latest checkpoint has tasks left to run:
interrupted, failed, crashed, sleeping, waiting) is copied, its latest
checkpoint and pending writes only, into an ``InMemorySaver`` and continued
there with the code given, in the replay check's run mode
(``pregel/_core/replay_check.py``): recorded results are served as on a
real resume, so every recorded call's identity is checked, and the run
stops at the first call it would have to run, or at a wait. Nothing is
written to the checked database and no lock is taken there: the check may
run next to workers.

A thread whose latest checkpoint has nothing left to run is skipped: its
next ``invoke`` starts from the top, with no record to match.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from pregelkit._internal._constants import CONF, CONFIG_KEY_REPLAY_CHECK, INTERRUPT, PREVIOUS
from pregelkit.errors import NondeterminismError
from pregelkit.pregel._plan.replay import ReplayProbe

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
    from pregelkit.pregel.main import Pregel

__all__ = ["ReplayReport", "ThreadCheck", "replay_check"]

Status = Literal["ok", "mismatch", "error"]


@dataclass(frozen=True)
class ThreadCheck:
    """How one thread would resume under the code checked."""

    thread_id: str
    status: Status
    """``ok``: it resumes; ``mismatch``: a resume raises ``NondeterminismError``;
    ``error``: a resume raises something else (the new code fails on a
    recorded result)."""
    stopped_at: str
    """Where the check stopped: the frontier of the recorded run (the first
    call it would run, or a wait), ``interrupt``, ``end`` (the workflow
    returned), or the failure."""
    position: int | None = None
    parent: str | None = None
    recorded: str | None = None
    """The recorded call at ``position`` (a mismatch)."""
    new: str | None = None
    """The call the code makes there now (a mismatch)."""
    patched_fixes: bool | None = None
    """A mismatch: True if guarding the new code with ``if patched("..."):``
    keeps this thread on the old path; False if the recorded call is a
    ``patched()`` marker the code no longer checks (a patch removed while
    this thread still needs it: put it back, or use ``deprecate_patch``)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class ReplayReport:
    """The result of ``replay_check``: one ``ThreadCheck`` per thread in flight."""

    threads: list[ThreadCheck] = field(default_factory=list)
    skipped: int = 0
    """Threads with nothing left to run (finished), or older than ``since``."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every thread in flight would resume."""
        return all(t.ok for t in self.threads)

    @property
    def failures(self) -> list[ThreadCheck]:
        return [t for t in self.threads if not t.ok]


def replay_check(
    workflow: Pregel,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    *,
    threads: Iterable[str] | None = None,
    since: float | timedelta | None = None,
) -> ReplayReport:
    """Replay the threads of ``checkpointer`` (default: the workflow's own)
    in flight against ``workflow`` as it is now, without running task bodies
    or writing anything; see the "Replay check" section of the testing guide.

    ``threads``: only these (default: every thread the saver lists);
    ``since``: only threads saved within this many seconds (or timedelta).
    The entrypoint's body does run (it is what is checked): side effects it
    has outside tasks (what ``pregelkit lint`` flags) happen here too."""
    if getattr(workflow, "__wrapped__", None) is None or PREVIOUS not in workflow.channels:
        raise TypeError(
            f"replay_check checks @entrypoint workflows, not {type(workflow).__name__} "
            f"{workflow.name!r}: a graph's pending nodes are task bodies, which a check must "
            "not run"
        )
    saver = checkpointer if checkpointer is not None else workflow.checkpointer
    if saver is None or saver is True or saver is False:
        raise ValueError(
            "replay_check needs the saver holding the recorded threads: "
            "replay_check(workflow, saver)"
        )
    started = time.perf_counter()
    report = ReplayReport()
    tuples = _latest(saver, threads, _cutoff(since), report)
    if _is_async(workflow):
        asyncio.run(_acheck_all(workflow, saver, tuples, report))
    else:
        for tup in tuples:
            copy = _Copy(workflow, saver, tup)
            if not copy.in_flight(tup):
                report.skipped += 1
                continue
            try:
                output = copy.graph.invoke(None, copy.config)
            except BaseException as exc:
                report.threads.append(copy.judge_failure(exc))
            else:
                report.threads.append(copy.judge_output(output))
    report.seconds = time.perf_counter() - started
    return report


async def _acheck_all(
    workflow: Pregel,
    saver: BaseCheckpointSaver[Any],
    tuples: Iterator[CheckpointTuple],
    report: ReplayReport,
) -> None:
    """The async driver: every thread on one event loop."""
    for tup in tuples:
        copy = _Copy(workflow, saver, tup)
        if not copy.in_flight(tup):
            report.skipped += 1
            continue
        try:
            output = await copy.graph.ainvoke(None, copy.config)
        except BaseException as exc:
            report.threads.append(copy.judge_failure(exc))
        else:
            report.threads.append(copy.judge_output(output))


def _is_async(workflow: Pregel) -> bool:
    return any(node.is_async for node in workflow.nodes.values())


def _cutoff(since: float | timedelta | None) -> str | None:
    """The oldest checkpoint timestamp (ISO, as checkpoints store it) kept."""
    if since is None:
        return None
    from datetime import UTC, datetime

    seconds = since.total_seconds() if isinstance(since, timedelta) else float(since)
    if not seconds > 0:
        raise ValueError(f"since= takes a duration > 0, got {since!r}")
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


def _latest(
    saver: BaseCheckpointSaver[Any],
    threads: Iterable[str] | None,
    cutoff: str | None,
    report: ReplayReport,
) -> Iterator[CheckpointTuple]:
    """The latest checkpoint of each thread asked for (every thread the saver
    lists by default), saved after ``cutoff``."""
    if threads is None:
        seen: dict[str, CheckpointTuple | None] = {}
        for listed in saver.list(None):
            conf = listed.config[CONF]
            if conf.get("checkpoint_ns", ""):
                continue
            tid = str(conf["thread_id"])
            best = seen.get(tid)
            if best is None or conf["checkpoint_id"] > best.config[CONF]["checkpoint_id"]:
                seen[tid] = listed
        found: Iterable[CheckpointTuple | None] = seen.values()
    else:
        found = (saver.get_tuple({CONF: {"thread_id": t, "checkpoint_ns": ""}}) for t in threads)
    for tup in found:
        if tup is None or (cutoff is not None and tup.checkpoint["ts"] < cutoff):
            report.skipped += 1
            continue
        yield tup


class _Copy:
    """One thread, copied into memory: its latest checkpoint and pending
    writes, and the workflow bound to the copy in the check's run mode."""

    __slots__ = ("config", "graph", "probe", "thread_id")

    def __init__(self, workflow: Pregel, saver: BaseCheckpointSaver[Any], tup: CheckpointTuple):
        from pregelkit.checkpoint.memory import InMemorySaver

        conf = tup.config[CONF]
        self.thread_id = str(conf["thread_id"])
        mem = InMemorySaver(serde=saver.serde)
        checkpoint = tup.checkpoint
        parent = {CONF: {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        at = mem.put(parent, checkpoint, tup.metadata, dict(checkpoint["channel_versions"]))
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            mem.put_writes(at, writes, task_id)
        self.graph = workflow.copy(checkpointer=mem, cache=None)
        self.probe = ReplayProbe()
        self.config: dict[str, Any] = {
            CONF: {"thread_id": self.thread_id, CONFIG_KEY_REPLAY_CHECK: self.probe},
            "durability": "exit",
        }

    def in_flight(self, tup: CheckpointTuple) -> bool:
        """Its latest checkpoint has tasks left to run. A thread with pending
        writes has (an interrupt, a failure, a saved call, a wake time are
        writes of a step not over); one without is asked (it finished, or
        crashed before its step saved anything)."""
        if tup.pending_writes:
            return True
        return bool(self.graph.get_state({CONF: {"thread_id": self.thread_id}}).next)

    def judge_output(self, output: Any) -> ThreadCheck:
        """The run returned: at an interrupt, or at the frontier (code that
        caught the frontier went on), or the workflow ended."""
        if self.probe.frontier is not None:
            return ThreadCheck(self.thread_id, "ok", self.probe.frontier)
        stopped = "interrupt" if isinstance(output, dict) and INTERRUPT in output else "end"
        return ThreadCheck(self.thread_id, "ok", stopped)

    def judge_failure(self, exc: BaseException) -> ThreadCheck:
        if isinstance(exc, NondeterminismError):
            return ThreadCheck(
                self.thread_id,
                "mismatch",
                f"call #{exc.position} of {exc.parent!r}",
                position=exc.position,
                parent=exc.parent,
                recorded=exc.recorded,
                new=exc.new,
                patched_fixes=not exc.recorded.startswith("patched("),
            )
        if self.probe.frontier is not None:
            return ThreadCheck(self.thread_id, "ok", self.probe.frontier)
        if not isinstance(exc, Exception):
            raise exc
        return ThreadCheck(self.thread_id, "error", f"{type(exc).__name__}: {exc}")
