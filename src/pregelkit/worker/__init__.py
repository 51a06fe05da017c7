"""A fleet of workers serving durable runs queued in the checkpointer's database.

``wf.submit(input, config)`` queues a run and returns a ``RunHandle``;
``Worker`` (threads) and ``AsyncWorker`` (asyncio) claim queued runs, hold
each under a lease renewed by a heartbeat, and record how they end. A run
whose worker died is resumed by another from its last checkpoint; a worker
that lost its lease can write nothing more for the run (its fence is
checked in every write transaction). Workers also fire the schedules of
their workflows (``wf.schedule``), with no leader. See docs/scale-out.md and
docs/guides/fleet.md.
"""

from pregelkit.checkpoint.runs import RunHandle, RunRecord
from pregelkit.worker._async import AsyncWorker
from pregelkit.worker._lease import Lease, current_lease
from pregelkit.worker._sync import Worker

__all__ = ["AsyncWorker", "Lease", "RunHandle", "RunRecord", "Worker", "current_lease"]
