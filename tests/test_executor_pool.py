"""The shared pool's deferred work: a job its caller does not wait for still
reaches a worker on its own, after a busy spell and after a quiet one (when
the poller has backed off or parked), and a run's background saves reach the
database while a long task body runs inline. Workers blocked on each other
get more workers; a run's executor keeps no finished job."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path

import pytest

from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.pregel._exec.executor import MAX_PAUSE_SECONDS, _get_pool, in_background

DEADLINE = 5.0
"""Generous: the pool promises milliseconds; a loaded CI machine gets seconds."""


def _busy_until(event: threading.Event) -> bool:
    """Spin without blocking (so the caller never hands the job over itself)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if event.is_set():
            return True
        sum(range(200))
    return event.is_set()


@pytest.mark.parametrize("quiet_before", [0.0, 0.3])
def test_a_job_nobody_waits_for_reaches_a_worker(quiet_before: float) -> None:
    # 0.3 s of quiet is longer than the poller's backing off and parking
    # (PARK_AFTER looks at most MAX_PAUSE_SECONDS apart)
    pool = _get_pool()
    assert quiet_before == 0 or quiet_before > pool.PARK_AFTER * MAX_PAUSE_SECONDS
    time.sleep(quiet_before)
    started = threading.Event()
    job = in_background(started.set)
    assert _busy_until(started), "a deferred job never started while its caller was busy"
    job.result(timeout=DEADLINE)


def test_many_jobs_taken_by_their_callers_then_one_left_alone() -> None:
    # a long spell of jobs run by their own callers backs the poller off;
    # the one left alone afterwards must still get to a worker
    for _ in range(2000):
        in_background(lambda: None).result()
    started = threading.Event()
    in_background(started.set)
    assert _busy_until(started)


def test_the_input_is_saved_while_a_long_task_body_runs_inline(tmp_path: Path) -> None:
    """A lone task runs in its caller's thread; the run's queued saves must
    not wait for the run's end to reach the database."""
    path = str(tmp_path / "state.db")
    seen: list[bool] = []

    with SqliteSaver.from_conn_string(path) as saver:

        @task
        def long_body(x: int) -> int:
            reader = SqliteSaver.from_conn_string(path)
            with reader as other:
                end = time.monotonic() + DEADLINE
                while time.monotonic() < end:
                    if other.get_tuple({"configurable": {"thread_id": "t"}}) is not None:
                        seen.append(True)
                        break
                    time.sleep(0.001)  # releases the GIL, but blocks on no future
            return x + 1

        @entrypoint(checkpointer=saver)
        def main(x: int) -> int:
            return long_body(x).result()

        assert main.invoke(1, {"configurable": {"thread_id": "t"}}) == 2
    assert seen == [True], "nothing of the run was saved while its task ran"


def test_workers_blocked_on_each_other_get_company() -> None:
    """Beyond its first workers the pool adds threads only when queued jobs
    stay untaken: jobs that all wait for each other must still all run."""
    from pregelkit.pregel._exec.executor import Job

    pool = _get_pool()
    parties = pool.eager_workers + 6
    barrier = threading.Barrier(parties, timeout=DEADLINE)
    jobs = [Job(barrier.wait, (), {}) for _ in range(parties)]
    for job in jobs:
        pool.put(job)
    # waits without running a job here (as result() would one not started)
    _, not_done = concurrent.futures.wait(jobs, timeout=DEADLINE)
    assert not not_done and not barrier.broken


def test_a_runs_executor_forgets_finished_jobs_but_not_a_failure() -> None:
    """No done callback per job: finished jobs are swept as they pile up, so a
    long run keeps none alive; a failed job stays, to be raised at exit."""
    from pregelkit.pregel._exec.run_executor import SWEEP_AT, BackgroundExecutor

    def boom() -> None:
        raise ValueError("boom")

    executor = BackgroundExecutor()
    with pytest.raises(ValueError, match="boom"), executor:
        failed = executor.submit(boom, __next_tick__=True)
        assert isinstance(failed.exception(), ValueError)
        for i in range(10 * SWEEP_AT):
            done = executor.submit(int, i, __next_tick__=True, __reraise_on_exit__=False)
            assert done.result() == i
            assert len(executor.tasks) <= 2 * SWEEP_AT
        assert failed in executor.tasks


def test_walking_away_leaves_every_running_job_behind() -> None:
    """A second Ctrl-C: the run's exit waits for no job still running, even
    one the step's futures never recorded (a Ctrl-C landed between the job's
    start and its recording), and a job not started never starts."""
    from pregelkit.pregel._exec.run_executor import BackgroundExecutor

    release, ran = threading.Event(), []
    # one at a time: ``queued`` waits in the backlog until ``running`` ends
    executor = BackgroundExecutor({"max_concurrency": 1})
    with executor:
        running = executor.submit(release.wait, 60)
        while not running.running():
            time.sleep(0.01)
        queued = executor.submit(ran.append, 1)
        executor.walk_away()
        started = time.monotonic()
    assert time.monotonic() - started < 5  # did not wait for ``running``
    assert queued.cancelled() and not ran
    release.set()
    assert running.result(timeout=10)
