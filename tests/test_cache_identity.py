"""The cache is keyed by what the code is: its origin (module, or the path of
the script for ``__main__``), its qualified name, and a digest of its code and
the values it closes over; equal arguments hit whatever the dict order."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pregelkit._internal._cache import canonical_bytes, default_cache_key
from pregelkit._internal._fingerprint import fingerprint, origin
from pregelkit.cache.memory import InMemoryCache
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy

# a user's workflow script; {body} is what differs between the versions
_SCRIPT = """
import sys
from pathlib import Path

from pregelkit.cache.sqlite import SqliteCache
from pregelkit.func import entrypoint, task
from pregelkit.types import CachePolicy

cache_path, log_path = sys.argv[1], Path(sys.argv[2])


def log(what):
    with log_path.open("a") as f:
        f.write(what + "\\n")

{body}

@entrypoint(cache=SqliteCache(path=cache_path))
def workflow(x):
    return price(x).result()


print(workflow.invoke(10))
"""

_PRICE = """
@task(cache_policy=CachePolicy())
def price(x):
    log("price")
    return x * {factor}
"""


def _run(script: Path, cache: Path, log: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(script), str(cache), str(log)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _write(path: Path, body: str) -> Path:
    path.write_text(_SCRIPT.replace("{body}", textwrap.dedent(body)))
    return path


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_edited_task_does_not_reuse_the_old_code_s_results(tmp_path: Path) -> None:
    cache, log = tmp_path / "cache.db", tmp_path / "runs.log"
    script = _write(tmp_path / "flow.py", _PRICE.replace("{factor}", "2"))
    assert _run(script, cache, log) == "20"
    assert _run(script, cache, log) == "20"
    assert _runs(log) == 1  # unchanged code: a hit
    _write(script, _PRICE.replace("{factor}", "3"))
    assert _run(script, cache, log) == "30"  # the edited code runs, not the old result
    assert _runs(log) == 2
    _write(script, _PRICE.replace("{factor}", "2"))
    assert _run(script, cache, log) == "20"  # back to the first code: its entry is still there
    assert _runs(log) == 2


def test_an_edited_module_constant_or_helper_counts_as_an_edit(tmp_path: Path) -> None:
    cache, log = tmp_path / "cache.db", tmp_path / "runs.log"
    body = """
    RATE = {rate}


    def helper(x):
        return x + {offset}


    @task(cache_policy=CachePolicy())
    def price(x):
        log("price")
        return helper(x) * RATE
    """
    script = tmp_path / "flow.py"
    _write(script, body.replace("{rate}", "2").replace("{offset}", "0"))
    assert _run(script, cache, log) == "20"
    _write(script, body.replace("{rate}", "3").replace("{offset}", "0"))
    assert _run(script, cache, log) == "30"
    _write(script, body.replace("{rate}", "3").replace("{offset}", "1"))
    assert _run(script, cache, log) == "33"
    assert _runs(log) == 3


def test_two_scripts_with_the_same_task_name_do_not_share_results(tmp_path: Path) -> None:
    cache, log = tmp_path / "cache.db", tmp_path / "runs.log"
    one = _write(tmp_path / "one.py", _PRICE.replace("{factor}", "2"))
    two = _write(tmp_path / "two.py", _PRICE.replace("{factor}", "5"))
    assert _run(one, cache, log) == "20"
    assert _run(two, cache, log) == "50"
    assert _run(one, cache, log) == "20"
    assert _run(two, cache, log) == "50"
    assert _runs(log) == 2  # each script hit its own entry on its second run


def test_entrypoints_of_two_scripts_with_one_name_do_not_share_results(tmp_path: Path) -> None:
    cache, log = tmp_path / "cache.db", tmp_path / "runs.log"
    script = """
    import sys
    from pathlib import Path

    from pregelkit.cache.sqlite import SqliteCache
    from pregelkit.func import entrypoint
    from pregelkit.types import CachePolicy


    @entrypoint(cache=SqliteCache(path=sys.argv[1]), cache_policy=CachePolicy())
    def main(x):
        with Path(sys.argv[2]).open("a") as f:
            f.write("main\\n")
        return x * {factor}


    print(main.invoke(10))
    """
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text(textwrap.dedent(script.replace("{factor}", "2")))
    two.write_text(textwrap.dedent(script.replace("{factor}", "5")))
    assert _run(one, cache, log) == "20"
    assert _run(two, cache, log) == "50"
    assert _run(one, cache, log) == "20"
    assert _runs(log) == 2


def test_tasks_made_by_one_factory_do_not_share_results() -> None:
    runs: Counter[int] = Counter()

    def make_scaler(factor: int) -> Any:
        @task(cache_policy=CachePolicy())
        def scale(x: int) -> int:
            runs[factor] += 1
            return x * factor

        return scale

    double, triple = make_scaler(2), make_scaler(3)

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> list[int]:
        return [double(x).result(), triple(x).result(), double(x).result()]

    assert workflow.invoke(5) == [10, 15, 10]
    assert workflow.invoke(5) == [10, 15, 10]
    assert runs == {2: 1, 3: 1}


def test_default_arguments_are_part_of_what_the_code_is() -> None:
    def make(unit: str) -> Any:
        def fmt(x: int, unit: str = unit) -> str:
            return f"{x}{unit}"

        return fmt

    assert fingerprint(make("kg")) != fingerprint(make("lb"))
    assert fingerprint(make("kg")) == fingerprint(make("kg"))


def test_a_closure_over_an_unpicklable_value_still_gets_an_identity() -> None:
    import threading

    def make(lock: Any) -> Any:
        def work(x: int) -> int:
            with lock:
                return x

        return work

    a, b = threading.Lock(), threading.Lock()
    # not stable across processes (a lock has no content), but never shared
    assert fingerprint(make(a)) != fingerprint(make(b))
    assert fingerprint(make(a)) == fingerprint(make(a))


def test_recursive_and_nested_functions_are_fingerprinted() -> None:
    def outer(n: int) -> int:
        def inner(k: int) -> int:
            return k + 1

        return inner(n) if n < 1 else outer(n - 1)

    assert len(fingerprint(outer)) == 16
    assert fingerprint(outer) == fingerprint(outer)


def test_the_origin_of_a_module_function_is_module_and_qualname() -> None:
    assert origin(test_the_origin_of_a_module_function_is_module_and_qualname) == (
        f"{__name__}.test_the_origin_of_a_module_function_is_module_and_qualname"
    )


def test_clear_cache_drops_every_version_of_a_task() -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy())
    def square(x: int) -> int:
        runs.append(x)
        return x * x

    cache: InMemoryCache[Any] = InMemoryCache()

    @entrypoint(cache=cache)
    def workflow(x: int) -> int:
        return square(x).result()

    workflow.invoke(3)
    workflow.invoke(3)
    assert runs == [3]
    square.clear_cache(cache)
    workflow.invoke(3)
    assert runs == [3, 3]


# dict order and the canonical key


def test_equal_dicts_in_any_key_order_hit_the_cache() -> None:
    runs: list[Any] = []

    @task(cache_policy=CachePolicy())
    def summarize(options: dict[str, Any], *, tags: set[str]) -> int:
        runs.append(options)
        return len(options)

    @entrypoint(cache=InMemoryCache())
    def workflow(options: dict[str, Any]) -> int:
        return summarize(options, tags={"x", "y"}).result()

    workflow.invoke({"model": "small", "limits": {"tokens": 10, "calls": 2}})
    workflow.invoke({"limits": {"calls": 2, "tokens": 10}, "model": "small"})
    assert len(runs) == 1
    workflow.invoke({"model": "large", "limits": {"tokens": 10, "calls": 2}})
    assert len(runs) == 2


def test_keyword_argument_order_does_not_matter() -> None:
    assert default_cache_key(1, a=1, b=2) == default_cache_key(1, b=2, a=1)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (1, True),
        (1, "1"),
        ("ab", b"ab"),
        ((1, 2), [1, 2]),
        ({1, 2}, frozenset({1, 2})),
        (("a", "bc"), ("ab", "c")),
        ([[1], 2], [[1, 2]]),
        (0.0, -0.0),
    ],
)
def test_different_arguments_never_share_a_key(a: Any, b: Any) -> None:
    assert canonical_bytes(a) != canonical_bytes(b)


def test_values_that_are_not_plain_data_are_keyed_by_their_pickle() -> None:
    from datetime import date
    from decimal import Decimal

    assert canonical_bytes({"d": date(2024, 1, 2)}) == canonical_bytes({"d": date(2024, 1, 2)})
    assert canonical_bytes(Decimal("1.0")) != canonical_bytes(Decimal("1.00"))
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert canonical_bytes(cyclic) == canonical_bytes(cyclic)


def test_an_argument_that_cannot_be_pickled_is_a_clear_error() -> None:
    import threading

    @task(cache_policy=CachePolicy())
    def guarded(lock: Any) -> int:
        return 1

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> int:
        return guarded(threading.Lock()).result()

    with pytest.raises(TypeError, match="cache key") as info:
        workflow.invoke(1)
    assert "guarded" in "\n".join(getattr(info.value, "__notes__", []))


_atoms = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
)
_keys = st.one_of(st.text(max_size=6), st.integers(), st.tuples(st.integers(), st.text(max_size=3)))
_values = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(_keys, inner, max_size=4),
        st.frozensets(st.integers(), max_size=4),
    ),
    max_leaves=20,
)


def _reordered(value: Any, rnd: Any) -> Any:
    """An equal value whose dicts were built in another key order."""
    if type(value) is dict:
        items = [(k, _reordered(v, rnd)) for k, v in value.items()]
        rnd.shuffle(items)
        return dict(items)
    if type(value) is list:
        return [_reordered(v, rnd) for v in value]
    if type(value) is tuple:
        return tuple(_reordered(v, rnd) for v in value)
    return value


@given(_values, st.randoms(use_true_random=False))
def test_dict_order_never_changes_the_key(value: Any, rnd: Any) -> None:
    assert canonical_bytes(_reordered(value, rnd)) == canonical_bytes(value)


def _strict(value: Any) -> Any:
    """``value`` with every leaf tagged by its type: equal only if the cache
    may treat the two as the same argument (1, 1.0 and True are not)."""
    if type(value) is dict:
        return ("dict", {_strict(k): _strict(v) for k, v in value.items()})
    if type(value) in (list, tuple):
        return (type(value).__name__, tuple(_strict(v) for v in value))
    if type(value) is frozenset:
        return ("frozenset", frozenset(_strict(v) for v in value))
    if type(value) is float:
        return ("float", value.hex())
    return (type(value).__name__, value)


@given(_values, _values)
def test_two_values_share_a_key_only_when_equal(a: Any, b: Any) -> None:
    same = _strict(a) == _strict(b)
    assert (canonical_bytes(a) == canonical_bytes(b)) == same


# one run, one execution per key


def test_a_cached_task_called_twice_at_once_in_one_run_runs_once() -> None:
    runs: list[int] = []
    started = threading.Event()

    @task(cache_policy=CachePolicy())
    def slow(x: int) -> int:
        runs.append(x)
        started.set()
        time.sleep(0.05)
        return x * 2

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> list[int]:
        first, second = slow(x), slow(x)  # both in flight together
        other = slow(x + 1)
        return [first.result(), second.result(), other.result()]

    assert workflow.invoke(4) == [8, 8, 10]
    assert sorted(runs) == [4, 5]


def test_a_cached_task_called_again_right_after_in_one_run_runs_once() -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy())
    def quick(x: int) -> int:
        runs.append(x)
        return x * 2

    @entrypoint(cache=InMemoryCache())
    def workflow(n: int) -> list[int]:
        return [quick(1).result() for _ in range(n)]

    for _ in range(20):  # the result must not race the cache's background write
        runs.clear()
        fresh = entrypoint(cache=InMemoryCache())(workflow.__wrapped__)  # type: ignore[attr-defined]
        assert fresh.invoke(5) == [2] * 5
        assert runs == [1]


def test_a_failed_first_call_does_not_fail_its_twin() -> None:
    attempts: list[int] = []

    @task(cache_policy=CachePolicy())
    def flaky(x: int) -> int:
        attempts.append(x)
        if len(attempts) == 1:
            time.sleep(0.05)
            raise ConnectionError("first attempt fails")
        return x

    @entrypoint(cache=InMemoryCache())
    def workflow(x: int) -> list[Any]:
        first, second = flaky(x), flaky(x)
        try:
            first.result()
        except ConnectionError as exc:
            a: Any = str(exc)
        return [a, second.result()]

    assert workflow.invoke(3) == ["first attempt fails", 3]
    assert attempts == [3, 3]


def test_async_twins_run_once() -> None:
    runs: list[int] = []

    @task(cache_policy=CachePolicy())
    async def slow(x: int) -> int:
        runs.append(x)
        await asyncio.sleep(0.05)
        return x * 2

    @entrypoint(cache=InMemoryCache())
    async def workflow(x: int) -> list[int]:
        return list(await asyncio.gather(slow(x), slow(x), slow(x)))

    assert asyncio.run(workflow.ainvoke(4)) == [8, 8, 8]
    assert runs == [4]
    runs.clear()

    @entrypoint(cache=InMemoryCache())
    async def sequential(x: int) -> list[int]:
        return [await slow(x) for _ in range(4)]

    assert asyncio.run(sequential.ainvoke(6)) == [12] * 4
    assert runs == [6]
