"""``wf.submit`` / ``wf.asubmit``: queue a run for a worker instead of running it here.

``SubmitAPI`` is a base of ``Pregel``. The request goes into the graph's
checkpointer's database (``pregelkit.checkpoint.runs``), named by the
graph's ``name``; a ``pregelkit.Worker`` serving a graph of that name runs it.
The run queue's modules load on the first submit: most programs never queue,
and they would cost ``import pregelkit.func`` about 10 ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import timedelta

    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.checkpoint.runs import RunHandle

__all__ = ["SubmitAPI"]


class SubmitAPI:
    checkpointer: Any
    name: str

    def _queue(self) -> tuple[BaseCheckpointSaver[Any], str]:
        from pregelkit.checkpoint.base import BaseCheckpointSaver

        saver = self.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            raise ValueError(
                "submit() stores the run request in the checkpointer's database, and this "
                "workflow has no checkpointer: give it a SqliteSaver or PostgresSaver"
            )
        if not self.name:
            raise ValueError(
                "submit() names the workflow for the workers, and this graph has no name: "
                "pass Pregel(..., name='...')"
            )
        return saver, self.name

    def submit(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        queue: str | None = None,
        key: str | None = None,
        dedup_id: str | None = None,
        debounce: float | timedelta | None = None,
        priority: int = 0,
        detach: bool = False,
    ) -> RunHandle:
        """Queue a run of this workflow and return at once: a worker serving a
        workflow of this name (``pregelkit.Worker``) runs it. ``input`` is what
        ``invoke`` takes (a ``Command(resume=...)`` queues a resume); a higher
        ``priority`` is taken first. While the thread has a queued or running
        run, submitting again returns that run's handle.

        Inside a running workflow this starts a *child workflow* and returns
        its ``ChildHandle`` (see ``pregelkit.durable``): recorded, so a replay
        finds the same child; its thread is derived from the parent's unless
        ``config`` names one; ``detach=True`` keeps it running when the
        parent is cancelled.

        ``queue``: a declared queue (``pregelkit.durable.Queue``) whose limits
        the run starts within (default: the default queue, no limits);
        ``key``: what its ``key_concurrency`` counts (e.g. a customer id);
        ``dedup_id``: while a run of the queue submitted with this id is
        active (queued, running, sleeping or waiting), submitting again
        returns its handle; ``debounce`` (seconds, with ``key``): the run
        starts once the key has been quiet that long, a newer debounced
        submit of the key replacing it if it has not started."""
        from pregelkit.pregel._api.children import in_workflow, submit_child

        if in_workflow():
            _child_route(queue, key, dedup_id, debounce)
            return submit_child(self, input, config, detach=detach)  # type: ignore[arg-type]
        if detach:
            raise ValueError("submit(detach=True) is for a child workflow, submitted inside one")
        from pregelkit.checkpoint.runs import Routing, submit_run

        route = Routing.of(queue, key, dedup_id, debounce)
        saver, name = self._queue()
        return submit_run(saver, name, input, config, priority, route=route)

    async def asubmit(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        queue: str | None = None,
        key: str | None = None,
        dedup_id: str | None = None,
        debounce: float | timedelta | None = None,
        priority: int = 0,
        detach: bool = False,
    ) -> RunHandle:
        """The async twin of ``submit``."""
        from pregelkit.pregel._api.children import asubmit_child, in_workflow

        if in_workflow():
            _child_route(queue, key, dedup_id, debounce)
            return await asubmit_child(self, input, config, detach=detach)  # type: ignore[arg-type]
        if detach:
            raise ValueError("submit(detach=True) is for a child workflow, submitted inside one")
        from pregelkit.checkpoint.runs import Routing, asubmit_run

        route = Routing.of(queue, key, dedup_id, debounce)
        saver, name = self._queue()
        return await asubmit_run(saver, name, input, config, priority, route=route)


def _child_route(queue: Any, key: Any, dedup_id: Any, debounce: Any) -> None:
    """A child workflow is recorded in its parent (a replay finds the same
    child: that is its dedup) and runs where its parent runs: a queue, key,
    dedup id or debounce would change neither, so they are refused."""
    given = [
        name
        for name, value in (
            ("queue", queue),
            ("key", key),
            ("dedup_id", dedup_id),
            ("debounce", debounce),
        )
        if value is not None
    ]
    if given:
        raise ValueError(
            f"submit({', '.join(f'{name}=' for name in given)}...) inside a workflow starts a "
            "child workflow, which is recorded in its parent (a replay finds the same child) "
            "and is queued on the default queue: leave these out, or submit the run from "
            "outside a workflow"
        )
