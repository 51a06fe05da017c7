"""The graph's parts as the engine sees them: nodes, writes, task calls, scope.

Owns what a graph is made of before anything runs: a node's reads and bound
writers (`nodes`, `writes`), how a user function is called and what it is
injected with (`call`), what a running task can reach (`scope`), the checks
run when a graph is built (`validate`) and the protocols through which the
engine sees a graph (`protocol`).

Knows nothing of steps, checkpoints, savers, threads or the event loop:
every layer above imports it, it imports none of them.
"""
