"""``wf.schedule`` / ``wf.aschedule``: run this workflow on a schedule.

``ScheduleAPI`` is a base of ``Pregel``. The schedule is stored in the
checkpointer's database (``pregelkit.checkpoint.schedules``) under the
graph's ``name``; the workers serving a workflow of that name fire it. The
schedule modules load on the first call, as the run queue's do
(``submit.py``): most programs never schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from pregelkit.checkpoint.base import BaseCheckpointSaver
    from pregelkit.checkpoint.schedules import Schedule

__all__ = ["ScheduleAPI"]

Catchup = Literal["skip", "latest", "all"]


class ScheduleAPI:
    checkpointer: Any
    name: str

    def _schedule_target(self) -> tuple[BaseCheckpointSaver[Any], str]:
        from pregelkit.checkpoint.base import BaseCheckpointSaver

        saver = self.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            raise ValueError(
                "schedule() stores the schedule in the checkpointer's database, and this "
                "workflow has no checkpointer: give it a SqliteSaver or PostgresSaver"
            )
        if not self.name:
            raise ValueError(
                "schedule() names the workflow for the workers, and this graph has no name: "
                "pass Pregel(..., name='...')"
            )
        return saver, self.name

    def schedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        input: Any = None,
        timezone: str = "UTC",
        catchup: Catchup = "skip",
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> Schedule:
        """Run this workflow on a schedule, fired by the workers that serve
        it (``pregelkit.Worker``), each slot exactly once. ``cron``: a
        5-field expression read in ``timezone`` (needs
        ``pregelkit[schedules]``), or ``every``: an interval (slots at
        ``start_at + k * every``, else on multiples of it since the epoch).
        Each run gets ``input`` (``None``: its slot time, ISO 8601 UTC) on
        thread ``schedule:<id>:<slot>``, with ``schedule_id`` and
        ``scheduled_at`` in ``config["configurable"]``. ``catchup``: which
        missed slots (every worker down) fire late: none, the latest, or all.

        Declaring an id again updates that schedule: a paused one stays
        paused; its next slot is kept unless when it fires changed.
        Returns the stored :class:`~pregelkit.durable.Schedule`."""
        from pregelkit.checkpoint.schedules import declare_schedule

        saver, name = self._schedule_target()
        return declare_schedule(
            saver,
            name,
            schedule_id,
            cron=cron,
            every=every,
            input=input,
            timezone=timezone,
            catchup=catchup,
            start_at=start_at,
            end_at=end_at,
        )

    async def aschedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        input: Any = None,
        timezone: str = "UTC",
        catchup: Catchup = "skip",
        start_at: datetime | None = None,
        end_at: datetime | None = None,
    ) -> Schedule:
        """The async twin of ``schedule``."""
        from pregelkit.checkpoint.schedules import adeclare_schedule

        saver, name = self._schedule_target()
        return await adeclare_schedule(
            saver,
            name,
            schedule_id,
            cron=cron,
            every=every,
            input=input,
            timezone=timezone,
            catchup=catchup,
            start_at=start_at,
            end_at=end_at,
        )
