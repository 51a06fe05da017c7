"""Every misuse of the API is an error naming the culprit, raised before any
task runs: wrong components, configs, stream modes, policies, keyword typos,
futures passed as arguments, connections other threads may not use."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pregelkit.cache.memory import InMemoryCache
from pregelkit.cache.sqlite import SqliteCache
from pregelkit.channels import LastValue
from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.checkpoint.sqlite import SqliteSaver
from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver
from pregelkit.func import entrypoint, task
from pregelkit.pregel import NodeBuilder, Pregel
from pregelkit.types import CachePolicy, RetryPolicy

THREAD = {"configurable": {"thread_id": "t"}}


def counting_workflow(**options: Any) -> tuple[Any, list[int]]:
    """An entrypoint that records each run of its task, to show nothing ran."""
    runs: list[int] = []

    @task
    def step(x: int) -> int:
        runs.append(x)
        return x + 1

    @entrypoint(**options)
    def workflow(x: int) -> int:
        runs.append(-x)
        return step(x).result()

    return workflow, runs


def graph(**options: Any) -> Pregel:
    return Pregel(
        nodes={"n": NodeBuilder().subscribe_only("a").do(lambda v: v + 1).write_to("b")},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
        **options,
    )


# components


@pytest.mark.parametrize("build", [lambda **kw: counting_workflow(**kw)[0], graph])
def test_a_path_as_checkpointer_is_refused_naming_it(build: Callable[..., Any]) -> None:
    with pytest.raises(TypeError, match=r"checkpointer= must be a BaseCheckpointSaver.*str"):
        build(checkpointer="state.db")


def test_a_saver_context_manager_used_without_with_says_to_use_with(tmp_path: Path) -> None:
    opener = SqliteSaver.from_conn_string(str(tmp_path / "state.db"))
    with pytest.raises(TypeError, match=r"checkpointer= got a context manager.*`with "):
        counting_workflow(checkpointer=opener)
    with pytest.raises(TypeError, match=r"checkpointer= got a context manager.*`with "):
        graph(checkpointer=opener)


def test_an_async_saver_context_manager_says_async_with(tmp_path: Path) -> None:
    opener = AsyncSqliteSaver.from_conn_string(str(tmp_path / "state.db"))
    with pytest.raises(TypeError, match=r"`async with "):
        counting_workflow(checkpointer=opener)


def test_wrong_store_and_cache_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"store= must be a BaseStore"):
        counting_workflow(store={})
    with pytest.raises(TypeError, match=r"cache= must be a BaseCache.*str"):
        counting_workflow(cache=str(tmp_path / "cache.db"))
    with pytest.raises(TypeError, match=r"cache= got the class SqliteCache itself"):
        counting_workflow(cache=SqliteCache)  # the class, not an instance


def test_a_saver_class_instead_of_an_instance_is_refused() -> None:
    with pytest.raises(TypeError, match=r"checkpointer= got the class InMemorySaver itself"):
        counting_workflow(checkpointer=InMemorySaver)


def test_copy_with_a_wrong_component_is_refused() -> None:
    with pytest.raises(TypeError, match="checkpointer="):
        graph().copy(checkpointer="state.db")


# config


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        (["thread_id", "t"], TypeError, r"config must be a dict.*list"),
        ("t", TypeError, r"config must be a dict.*str"),
        ({"configurable": None}, TypeError, r"config\['configurable'\] must be a dict.*NoneType"),
        ({"configurable": "t"}, TypeError, r"config\['configurable'\] must be a dict"),
        ({"recursion_limit": None}, TypeError, r"config\['recursion_limit'\] must be an int"),
        ({"recursion_limit": "10"}, TypeError, r"config\['recursion_limit'\] must be an int"),
        ({"recursion_limit": True}, TypeError, r"config\['recursion_limit'\] must be an int"),
        ({"recursion_limit": 2.5}, TypeError, r"config\['recursion_limit'\] must be an int"),
        ({"recursion_limit": 0}, ValueError, r"config\['recursion_limit'\] must be 1 or more"),
        ({"recursion_limit": -3}, ValueError, r"config\['recursion_limit'\] must be 1 or more"),
    ],
)
def test_a_bad_config_fails_before_anything_runs(
    config: Any, error: type[Exception], match: str
) -> None:
    workflow, runs = counting_workflow()
    with pytest.raises(error, match=match):
        workflow.invoke(1, config)
    with pytest.raises(error, match=match):
        list(workflow.stream(1, config))
    with pytest.raises(error, match=match):
        asyncio.run(workflow.ainvoke(1, config))
    assert runs == []


def test_a_bad_config_is_refused_by_the_state_api_too() -> None:
    workflow, _ = counting_workflow(checkpointer=InMemorySaver())
    with pytest.raises(TypeError, match=r"config\['configurable'\] must be a dict"):
        workflow.get_state({"configurable": None})
    with pytest.raises(TypeError, match="config must be a dict"):
        workflow.with_config(["x"])  # type: ignore[arg-type]


def test_a_good_recursion_limit_still_works() -> None:
    workflow, runs = counting_workflow()
    assert workflow.invoke(1, {"recursion_limit": 5}) == 2
    assert runs == [-1, 1]


# stream modes, durability, keywords


def test_an_unknown_stream_mode_suggests_the_closest() -> None:
    workflow, runs = counting_workflow()
    with pytest.raises(ValueError, match=r"unknown stream_mode 'valuse'; did you mean 'values'"):
        workflow.invoke(1, stream_mode="valuse")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown stream_mode 'update'; did you mean 'updates'"):
        list(workflow.stream(1, stream_mode=["values", "update"]))  # type: ignore[list-item]

    async def consume() -> None:
        async for _ in workflow.astream(1, stream_mode="custum"):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError, match=r"did you mean 'custom'"):
        asyncio.run(consume())
    with pytest.raises(TypeError, match=r"stream_mode= must be a mode name"):
        workflow.invoke(1, stream_mode=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown stream_mode"):
        graph(stream_mode="everything")  # type: ignore[arg-type]
    assert runs == []


def test_an_unknown_durability_is_refused() -> None:
    workflow, runs = counting_workflow(checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match=r"durability= must be.*'synch'; did you mean 'sync'"):
        workflow.invoke(1, THREAD, durability="synch")
    with pytest.raises(ValueError, match=r"durability= must be"):
        workflow.invoke(1, THREAD, durability=True)  # type: ignore[arg-type]
    assert runs == []


@pytest.mark.parametrize(
    ("method", "typo", "meant"),
    [
        ("invoke", "durabilty", "durability"),
        ("invoke", "stream_modes", "stream_mode"),
        ("stream", "stream_modes", "stream_mode"),
        ("stream", "subgraph", "subgraphs"),
        ("ainvoke", "interupt_before", "interrupt_before"),
        ("astream", "output_key", "output_keys"),
        ("batch", "durabilty", "durability"),
        ("abatch", "contxt", "context"),
    ],
)
def test_a_misspelt_keyword_is_a_type_error_with_a_suggestion(
    method: str, typo: str, meant: str
) -> None:
    workflow, runs = counting_workflow()
    call = getattr(workflow, method)
    first = [1] if "batch" in method else 1

    def run() -> None:
        result = call(first, **{typo: "x"})
        if method == "stream":
            list(result)
        elif method == "astream":

            async def consume() -> None:
                async for _ in result:
                    pass

            asyncio.run(consume())
        elif asyncio.iscoroutine(result):
            asyncio.run(result)

    with pytest.raises(
        TypeError,
        match=rf"{method}\(\) got an unexpected keyword argument '{typo}'; did you mean '{meant}'",
    ):
        run()
    assert runs == []


_KNOWN = {
    "input",
    "config",
    "stream_mode",
    "output_keys",
    "interrupt_before",
    "interrupt_after",
    "durability",
    "context",
    "debug",
}


@given(st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True).filter(lambda n: n not in _KNOWN))
def test_no_unknown_keyword_is_ever_silently_ignored(name: str) -> None:
    workflow = _SHARED_WORKFLOW
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
        workflow.invoke(1, **{name: 1})


_SHARED_WORKFLOW = counting_workflow()[0]


def test_debug_is_still_accepted_by_invoke(capsys: pytest.CaptureFixture[str]) -> None:
    workflow, _ = counting_workflow()
    assert workflow.invoke(1, debug=True) == 2


def test_batch_can_return_exceptions_in_place() -> None:
    @entrypoint()
    def checked(x: int) -> int:
        if x < 0:
            raise ValueError(f"negative: {x}")
        return x

    results = checked.batch([1, -2, 3], return_exceptions=True)
    assert results[0] == 1 and results[2] == 3
    assert isinstance(results[1], ValueError) and "negative: -2" in str(results[1])
    with pytest.raises(ValueError, match="negative"):
        checked.batch([1, -2])
    results = asyncio.run(checked.abatch([-1, 2], return_exceptions=True))
    assert isinstance(results[0], ValueError) and results[1] == 2


# copy


def test_copy_takes_langgraph_s_update_mapping() -> None:
    original = graph()
    renamed = original.copy(update={"name": "renamed", "debug": True})
    assert (renamed.name, renamed.debug) == ("renamed", True)
    assert (original.name, original.debug) == ("LangGraph", False)
    assert original.copy(name="kw").name == "kw"
    assert renamed.invoke(1) == 2


def test_copy_of_an_unknown_attribute_suggests_the_closest() -> None:
    with pytest.raises(TypeError, match=r"unknown attribute 'nmae'; did you mean 'name'"):
        graph().copy(update={"nmae": "x"})


# policies: checked where they are written


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"max_attempts": 0}, ValueError, r"max_attempts=.*1 or more"),
        ({"max_attempts": 2.5}, TypeError, r"max_attempts=.*must be an int"),
        ({"max_attempts": True}, TypeError, r"max_attempts=.*must be an int"),
        ({"initial_interval": -1}, ValueError, r"initial_interval=.*0 or more"),
        ({"initial_interval": "1s"}, TypeError, r"initial_interval=.*number of seconds"),
        ({"max_interval": float("inf")}, ValueError, r"max_interval="),
        ({"backoff_factor": None}, TypeError, r"backoff_factor="),
        ({"jitter": "yes"}, TypeError, r"jitter="),
        ({"retry_on": int}, TypeError, r"retry_on=.*exception class.*type"),
        ({"retry_on": "ValueError"}, TypeError, r"retry_on=.*str"),
        ({"retry_on": (ValueError, "KeyError")}, TypeError, r"retry_on=.*exception classes only"),
        ({"retry_on": 3}, TypeError, r"retry_on="),
    ],
)
def test_a_wrong_retry_policy_fails_where_it_is_written(
    fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        RetryPolicy(**fields)


def test_good_retry_policies_still_build() -> None:
    assert RetryPolicy(retry_on=(ValueError, KeyError)).retry_on == (ValueError, KeyError)
    assert RetryPolicy(retry_on=[OSError]).max_attempts == 3
    assert RetryPolicy(retry_on=lambda exc: True, max_attempts=1).max_attempts == 1
    assert RetryPolicy()._replace(max_attempts=5).max_attempts == 5


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"ttl": -1}, ValueError, r"ttl=.*0 or more"),
        ({"ttl": "1h"}, TypeError, r"ttl=.*number of seconds"),
        ({"ttl": float("nan")}, ValueError, r"ttl="),
        ({"key_func": "x"}, TypeError, r"key_func=.*str"),
    ],
)
def test_a_wrong_cache_policy_fails_where_it_is_written(
    fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        CachePolicy(**fields)


@pytest.mark.parametrize(
    ("where", "make"),
    [
        ("task", lambda **kw: task(**kw)(lambda x: x)),
        ("entrypoint", lambda **kw: entrypoint(**kw)),
        ("node", lambda **kw: NodeBuilder().do(lambda x: x).subscribe_only("a").build()),
    ],
)
def test_a_policy_of_the_wrong_type_is_refused(where: str, make: Callable[..., Any]) -> None:
    if where == "node":
        with pytest.raises(TypeError, match=r"add_retry_policies\(\) must hold RetryPolicy.*int"):
            NodeBuilder().do(lambda x: x).add_retry_policies(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"add_cache_policy\(\) must be a CachePolicy"):
            NodeBuilder().do(lambda x: x).add_cache_policy("x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"retry_policy= must be a RetryPolicy.*str"):
            graph(retry_policy="fast")
        return
    with pytest.raises(TypeError, match=r"retry_policy= must be a RetryPolicy.*dict"):
        make(retry_policy={"max_attempts": 3})
    with pytest.raises(TypeError, match=r"retry_policy= must hold RetryPolicy objects only"):
        make(retry_policy=[RetryPolicy(), "fast"])
    with pytest.raises(TypeError, match=r"cache_policy= must be a CachePolicy.*int"):
        make(cache_policy=60)


def test_a_key_func_that_returns_no_string_fails_before_the_task_runs() -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy(key_func=lambda x: None))
    def lookup(x: int) -> int:
        runs.append(x)
        return x

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> int:
        return lookup(x).result()

    with pytest.raises(TypeError, match=r"CachePolicy\(key_func=.*returned NoneType.*str or bytes"):
        workflow.invoke(1)
    assert runs == []


def test_a_retry_on_predicate_that_raises_names_retry_on_and_keeps_the_task_s_error() -> None:
    def picky(exc: Exception) -> bool:
        raise KeyError("no such rule")

    attempts: list[int] = []

    @task(retry_policy=RetryPolicy(retry_on=picky, initial_interval=0, jitter=False))
    def fragile(x: int) -> int:
        attempts.append(x)
        raise ConnectionError("upstream down")

    @entrypoint()
    def workflow(x: int) -> int:
        return fragile(x).result()

    with pytest.raises(RuntimeError, match=r"retry_on=.*picky.*raised KeyError") as info:
        workflow.invoke(1)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert "upstream down" in str(info.value.__cause__)
    assert attempts == [1]


# futures as arguments


def test_a_future_passed_to_another_task_says_call_result_first() -> None:
    runs: list[str] = []

    @task
    def fetch(x: int) -> int:
        return x

    @task
    def combine(values: Any, *, scale: Any = 1) -> int:
        runs.append("combine")
        return 0

    @entrypoint()
    def direct(x: int) -> int:
        return combine(fetch(x)).result()

    @entrypoint()
    def listed(x: int) -> int:
        return combine([fetch(x), fetch(x + 1)]).result()

    @entrypoint()
    def keyword(x: int) -> int:
        return combine(1, scale=fetch(x)).result()

    with pytest.raises(TypeError, match=r"'combine'.*positional argument 0 is a task future.*"):
        direct.invoke(1)
    with pytest.raises(TypeError, match=r"positional argument 0 holds a task future.*\.result\(\)"):
        listed.invoke(1)
    with pytest.raises(TypeError, match=r"argument 'scale' is a task future"):
        keyword.invoke(1)
    assert runs == []


def test_an_async_future_passed_to_another_task_says_await_it() -> None:
    @task
    async def fetch(x: int) -> int:
        return x

    @task
    async def double(value: Any) -> int:
        return 2 * value  # type: ignore[no-any-return]

    @entrypoint()
    async def workflow(x: int) -> int:
        return await double(fetch(x))

    with pytest.raises(TypeError, match=r"'double'.*is a task future.*await"):
        asyncio.run(workflow.ainvoke(1))


# SQLite connections


def test_a_connection_bound_to_its_thread_is_refused_at_once(tmp_path: Path) -> None:
    conn = sqlite3.connect(str(tmp_path / "state.db"))  # check_same_thread=True
    with pytest.raises(ValueError, match=r"check_same_thread=False"):
        SqliteSaver(conn)
    conn.close()


def test_a_path_given_to_sqlite_saver_says_from_conn_string(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"not a path.*from_conn_string"):
        SqliteSaver(str(tmp_path / "state.db"))  # type: ignore[arg-type]


def test_an_aiosqlite_connection_says_what_to_pass_instead() -> None:
    """LangGraph's AsyncSqliteSaver takes an aiosqlite connection; its sqlite3
    connection is bound to aiosqlite's thread, so pregelkit refuses it at once
    (aiosqlite is not installed here: an object of its module stands in)."""
    from pregelkit.checkpoint.sqlite.aio import AsyncSqliteSaver

    connection = type("Connection", (), {"__module__": "aiosqlite.core"})()
    with pytest.raises(TypeError, match=r"aiosqlite connection.*from_conn_string"):
        AsyncSqliteSaver(connection)


def test_a_connection_shared_between_threads_works(tmp_path: Path) -> None:
    conn = sqlite3.connect(str(tmp_path / "state.db"), check_same_thread=False)
    workflow, runs = counting_workflow(checkpointer=SqliteSaver(conn))
    assert workflow.invoke(1, THREAD) == 2
    assert runs == [-1, 1]
    conn.close()


def test_numbers_of_other_integral_and_real_types_are_accepted() -> None:
    from fractions import Fraction

    class Count(int):
        pass

    workflow, _ = counting_workflow()
    assert workflow.invoke(1, {"recursion_limit": Count(5)}) == 2
    assert RetryPolicy(max_attempts=Count(2), initial_interval=Fraction(1, 2)).max_attempts == 2
    assert list(workflow.stream(1, stream_mode={"values"})) == [("values", 2)]
