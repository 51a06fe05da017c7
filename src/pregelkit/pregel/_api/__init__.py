"""What `Pregel` offers besides running: state, submission, v2 events, drawing.

Owns the state API (`state`: get/update/history over a saver), queued runs
(`submit`), the typed arguments of `invoke`/`stream` and their async twins
(`run_args`), the surface shared with the functional API (`surface`),
LangChain-style v2 events (`v2_events`) and drawing (`draw`).

Built on the run core; nothing below imports it.
"""
