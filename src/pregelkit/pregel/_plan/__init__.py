"""Pure planning: which tasks run next, what their writes do, what a replay must match.

Owns the decisions a superstep makes over a checkpoint and its channels
(`algo`: prepare the next tasks, apply writes, task ids, interrupts), how
input and output map onto channels (`io`) and how a replayed call is
compared with the recorded one (`replay`).

Pure functions over values: no I/O, no locks, no threads, no clock. It knows
the graph's parts (`_graph`) and nothing above them: not the runner, not the
run core, not a saver.
"""
