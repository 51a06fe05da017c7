"""Running one step's tasks: the runner, attempts, retries, timeouts, executors.

Owns how tasks run once they are planned: `runner` runs a step's tasks and
commits each task's writes through the run it serves (`port.LoopPort`),
`retry` decides when to try again, `attempt` runs one attempt, `timeout`
bounds it, `run_executor` is a run's executor (threads or event-loop
tasks) and `executor` the shared thread pool and its futures, `remote` ships
an attempt to an external executor, `twins` tracks duplicate calls, `stop`
carries Ctrl-C and cancellation to running tasks, `recorder` and `hooks` are
what each attempt reports.

Knows nothing of checkpoints or savers: what a task's writes become is the
run core's business, reached only through `LoopPort`.
"""
