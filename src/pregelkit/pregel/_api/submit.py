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
        parent is cancelled."""
        from pregelkit.pregel._api.children import in_workflow, submit_child

        if in_workflow():
            return submit_child(self, input, config, detach=detach)  # type: ignore[arg-type]
        if detach:
            raise ValueError("submit(detach=True) is for a child workflow, submitted inside one")
        from pregelkit.checkpoint.runs import submit_run

        saver, name = self._queue()
        return submit_run(saver, name, input, config, priority)

    async def asubmit(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        priority: int = 0,
        detach: bool = False,
    ) -> RunHandle:
        """The async twin of ``submit``."""
        from pregelkit.pregel._api.children import asubmit_child, in_workflow

        if in_workflow():
            return await asubmit_child(self, input, config, detach=detach)  # type: ignore[arg-type]
        if detach:
            raise ValueError("submit(detach=True) is for a child workflow, submitted inside one")
        from pregelkit.checkpoint.runs import asubmit_run

        saver, name = self._queue()
        return await asubmit_run(saver, name, input, config, priority)
