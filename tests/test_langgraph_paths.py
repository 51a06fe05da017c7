"""Import paths LangGraph's own guides use keep working after renaming the package."""

import logging

from pregelkit.channels import LastValue
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.pregel._write import ChannelWriteEntry
from pregelkit.types import RetryPolicy


def test_channel_write_entry_from_langgraphs_path_writes() -> None:
    node = NodeBuilder().subscribe_only("a").do(lambda x: x + 1).write_to(ChannelWriteEntry("b"))
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    assert app.invoke(1) == 2


def test_retries_log_on_langgraphs_logger_name() -> None:
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("pregelkit.pregel._retry")
    handler = Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    calls = []

    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise ValueError("once")
        return x

    node = NodeBuilder().subscribe_only("a").do(flaky).write_to("b")
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        retry_policy=RetryPolicy(initial_interval=0.001, jitter=False, retry_on=ValueError),
    )
    try:
        assert app.invoke(3) == 3
    finally:
        logger.removeHandler(handler)
    assert len(calls) == 2
    assert any("once" in m or "ValueError" in m for m in seen), seen
