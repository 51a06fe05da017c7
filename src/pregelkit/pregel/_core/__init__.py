"""The run core: one object that decides a run, and the two drivers that act for it.

`loop.PregelLoop` owns the checkpoint, the channels, the step and the pending
writes and returns effects (`effects`) instead of doing I/O; its parts are
objects it is handed: input (`input`), task calls, their records and
replay (`calls`), the task cache (`cache`), stream output (`stream`), the
cancel mark (`mark`), attempt records (`records`), checkpoint lineage
(`lineage`), what a nested run inherits (`nested`).
`perform.SyncPregelLoop`/`AsyncPregelLoop` perform those effects and are the
only code here that touches savers, caches, locks, threads and the event
loop; `driver` runs the steps and `output` shapes what the caller gets.

Knows the graph only through `_graph.protocol`, never `main.Pregel`.
"""
