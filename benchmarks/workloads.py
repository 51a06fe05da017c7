"""Benchmark workloads, written once for both pregelkit and LangGraph.

The library is chosen by name (``--lib pregelkit`` / ``--lib langgraph``, or the
``BENCH_LIB`` environment variable) and imported with ``importlib``, so the
same code runs on both: ``pregelkit.func`` mirrors ``langgraph.func``, and so on.

One call of this script runs ONE workload once and prints one JSON object on
stdout. ``benchmarks/run.py`` calls it in a fresh interpreter for every
measurement, so imports, caches and memory never leak from one workload (or
one library) into another.

Timing: each workload is built (graph, checkpointer, cache), run once on a
small input to warm up lazy imports and first-call paths, and then the timed
run is measured with ``time.perf_counter`` (the cold Pregel chains warm up
less or not at all: the first invoke of a new graph is what they time; their
unit is the one invoke, not a superstep). Memory: ``peak_rss_delta_mb`` is
the growth of the process's peak resident set (``resource.getrusage``
``ru_maxrss``) over the timed run, relative to the peak reached before it
(after imports, build and warm-up). ``peak_rss_mb`` is the process's absolute
peak.

Usage::

    python benchmarks/workloads.py --lib pregelkit --workload fanout --n 1000
    python benchmarks/workloads.py --list
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

from short_runs import (
    short_async_memory,
    short_async_sqlite,
    short_memory,
    short_postgres,
    short_sqlite,
)
from workload_base import LIBS, WARMUP_N, Lib, Prepared, expect, thread_config


def _maxrss_mb() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


# --------------------------------------------------------------------------
# Workloads. Each takes (lib, n) and returns a Prepared; "per" says what the
# time is divided by (tasks, supersteps).
# --------------------------------------------------------------------------


def fanout(lib: Lib, n: int) -> Prepared:
    """N trivial tasks started at once, gathered by one entrypoint."""
    entrypoint, task = lib.func.entrypoint, lib.func.task

    @task
    def t(i: int) -> int:
        return i

    @entrypoint()
    def main(n: int) -> int:
        return sum(f.result() for f in [t(i) for i in range(n)])

    return Prepared(
        run=lambda: main.invoke(n),
        warmup=lambda: main.invoke(WARMUP_N),
        check=lambda r: expect(r, n * (n - 1) // 2),
    )


def _chain_entrypoint(lib: Lib, checkpointer: Any = None) -> Any:
    entrypoint, task = lib.func.entrypoint, lib.func.task

    @task
    def inc(x: int) -> int:
        return x + 1

    @entrypoint(checkpointer=checkpointer)
    def main(n: int) -> int:
        x = 0
        for _ in range(n):
            x = inc(x).result()
        return x

    return main


def chain(lib: Lib, n: int) -> Prepared:
    """N sequential task calls, each waiting for the previous one; no checkpointer."""
    main = _chain_entrypoint(lib)
    return Prepared(
        run=lambda: main.invoke(n),
        warmup=lambda: main.invoke(WARMUP_N),
        check=lambda r: expect(r, n),
    )


def chain_memory(lib: Lib, n: int) -> Prepared:
    """The chain with an InMemorySaver (default durability)."""
    saver = lib.module("checkpoint.memory").InMemorySaver()
    main = _chain_entrypoint(lib, saver)
    return Prepared(
        run=lambda: main.invoke(n, thread_config("timed")),
        warmup=lambda: main.invoke(WARMUP_N, thread_config("warmup")),
        check=lambda r: expect(r, n),
    )


def _chain_sqlite(lib: Lib, n: int, durability: str | None) -> Prepared:
    sqlite_mod = lib.module("checkpoint.sqlite")
    tmpdir = tempfile.TemporaryDirectory(prefix="bench-sqlite-")
    path = os.path.join(tmpdir.name, "checkpoints.db")
    cm = sqlite_mod.SqliteSaver.from_conn_string(path)
    saver = cm.__enter__()
    main = _chain_entrypoint(lib, saver)
    kwargs = {} if durability is None else {"durability": durability}

    def close() -> None:
        cm.__exit__(None, None, None)
        tmpdir.cleanup()

    return Prepared(
        run=lambda: main.invoke(n, thread_config("timed"), **kwargs),
        warmup=lambda: main.invoke(WARMUP_N, thread_config("warmup"), **kwargs),
        check=lambda r: expect(r, n),
        close=close,
    )


def chain_sqlite(lib: Lib, n: int) -> Prepared:
    """The chain with a SqliteSaver on a temporary file, durability="sync"."""
    return _chain_sqlite(lib, n, "sync")


def chain_sqlite_default(lib: Lib, n: int) -> Prepared:
    """The chain with a SqliteSaver on a temporary file, default durability."""
    return _chain_sqlite(lib, n, None)


def resume(lib: Lib, n: int) -> Prepared:
    """Resume after an interrupt that follows N finished (sequential) tasks.

    The first invoke runs the N tasks and stops at ``interrupt()`` (untimed);
    the timed invoke resumes with ``Command(resume=...)``, which replays the N
    saved task results and finishes. Time is per replayed task.
    """
    entrypoint, task = lib.func.entrypoint, lib.func.task
    interrupt, Command = lib.types.interrupt, lib.types.Command
    saver = lib.module("checkpoint.memory").InMemorySaver()
    calls = [0]

    @task
    def inc(x: int) -> int:
        calls[0] += 1
        return x + 1

    @entrypoint(checkpointer=saver)
    def main(n: int) -> int:
        x = 0
        for _ in range(n):
            x = inc(x).result()
        answer = interrupt("continue?")
        return x + answer

    def first(tid: str, k: int) -> None:
        out = main.invoke(k, thread_config(tid))
        if "__interrupt__" not in out:
            raise AssertionError(f"expected an interrupt, got {out!r}")

    def warmup() -> None:
        first("warmup", WARMUP_N)
        main.invoke(Command(resume=1), thread_config("warmup"))
        first("timed", n)  # untimed: runs the N tasks, then interrupts
        calls[0] = 0

    def check(r: Any) -> None:
        expect(r, n + 1)
        if calls[0]:
            raise AssertionError(f"{calls[0]} tasks ran again on resume instead of replaying")

    return Prepared(
        run=lambda: main.invoke(Command(resume=1), thread_config("timed")),
        warmup=warmup,
        check=check,
    )


def async_fanout(lib: Lib, n: int) -> Prepared:
    """N trivial async tasks gathered by one async entrypoint, run with ainvoke."""
    entrypoint, task = lib.func.entrypoint, lib.func.task

    @task
    async def t(i: int) -> int:
        return i

    @entrypoint()
    async def main(n: int) -> int:
        return sum(await asyncio.gather(*[t(i) for i in range(n)]))

    loop = asyncio.new_event_loop()

    return Prepared(
        run=lambda: loop.run_until_complete(main.ainvoke(n)),
        warmup=lambda: loop.run_until_complete(main.ainvoke(WARMUP_N)),
        check=lambda r: expect(r, n * (n - 1) // 2),
        close=loop.close,
    )


def _pregel_chain_app(lib: Lib, k: int) -> Any:
    """K nodes in a line over ``LastValue`` channels: K supersteps per invoke."""
    pregel = lib.module("pregel")
    LastValue = lib.module("channels").LastValue
    Pregel, NodeBuilder = pregel.Pregel, pregel.NodeBuilder
    nodes = {
        f"n{i}": NodeBuilder().subscribe_only(f"c{i}").do(lambda x: x + 1).write_to(f"c{i + 1}")
        for i in range(k)
    }
    channels = {f"c{i}": LastValue(int) for i in range(k + 1)}
    return Pregel(nodes=nodes, channels=channels, input_channels="c0", output_channels=f"c{k}")


def pregel_chain(lib: Lib, n: int) -> Prepared:
    """Low-level Pregel: N nodes in a line, one superstep each (time per superstep)."""
    app, small = _pregel_chain_app(lib, n), _pregel_chain_app(lib, WARMUP_N)
    config = {"recursion_limit": n + 100}
    return Prepared(
        run=lambda: app.invoke(0, config),
        warmup=lambda: small.invoke(0, config),
        check=lambda r: expect(r, n),
    )


COLD_WARMUP_NODES = 5


def pregel_chain_cold(lib: Lib, n: int) -> Prepared:
    """The first invoke of a new N-node Pregel chain, after a 5-node chain's one invoke."""
    config = {"recursion_limit": n + 100}
    built: list[Any] = []

    def warmup() -> None:
        expect(_pregel_chain_app(lib, COLD_WARMUP_NODES).invoke(0, config), COLD_WARMUP_NODES)
        built.append(_pregel_chain_app(lib, n))

    return Prepared(
        run=lambda: built[0].invoke(0, config),
        warmup=warmup,
        check=lambda r: expect(r, n),
    )


def pregel_chain_cold_nowarmup(lib: Lib, n: int) -> Prepared:
    """The first invoke of an N-node Pregel chain in a fresh process, no warm-up at all."""
    app = _pregel_chain_app(lib, n)
    return Prepared(
        run=lambda: app.invoke(0, {"recursion_limit": n + 100}),
        check=lambda r: expect(r, n),
    )


def cached(lib: Lib, n: int) -> Prepared:
    """N tasks (fan-out, distinct inputs) with a CachePolicy and an InMemoryCache,
    all hitting the cache: the first run fills it (untimed), the second is timed."""
    entrypoint, task = lib.func.entrypoint, lib.func.task
    CachePolicy = lib.types.CachePolicy
    cache = lib.module("cache.memory").InMemoryCache()
    calls = [0]

    @task(cache_policy=CachePolicy())
    def t(i: int) -> int:
        calls[0] += 1
        return i

    @entrypoint(cache=cache)
    def main(n: int) -> int:
        return sum(f.result() for f in [t(i) for i in range(n)])

    def warmup() -> None:
        main.invoke(n)  # fills the cache
        calls[0] = 0

    def check(r: Any) -> None:
        expect(r, n * (n - 1) // 2)
        if calls[0]:
            raise AssertionError(f"{calls[0]} of {n} tasks missed the cache")

    return Prepared(run=lambda: main.invoke(n), warmup=warmup, check=check)


# Stores: the same calls on both libraries' SqliteStore / PostgresStore.
# PostgreSQL workloads need BENCH_PG_DSN (a database they may fill and empty).

STORE_ITEMS = 1000
VECTOR_DIMS = 384


def _store(lib: Lib, kind: str, **options: Any) -> tuple[Any, Callable[[], None]]:
    if kind == "sqlite":
        tmpdir = tempfile.TemporaryDirectory(prefix="bench-store-")
        cm = lib.module("store.sqlite").SqliteStore.from_conn_string(
            os.path.join(tmpdir.name, "store.db"), **options
        )
        store = cm.__enter__()
        store.setup()

        def close() -> None:
            cm.__exit__(None, None, None)
            tmpdir.cleanup()

        return store, close
    dsn = os.environ.get("BENCH_PG_DSN")
    if not dsn:
        raise RuntimeError("PostgreSQL store workloads need BENCH_PG_DSN")
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("store", "store_vectors", "pregelkit_store", "pregelkit_store_vectors"):
            conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
        conn.execute("DROP TABLE IF EXISTS store_migrations, vector_migrations")
        conn.execute("DROP TABLE IF EXISTS pregelkit_store_migrations")
    cm = lib.module("store.postgres").PostgresStore.from_conn_string(dsn, **options)
    store = cm.__enter__()
    store.setup()
    return store, lambda: cm.__exit__(None, None, None)


def _doc(i: int) -> dict[str, Any]:
    return {"i": i, "kind": ("cat", "dog", "bird")[i % 3], "text": f"memory number {i}"}


def _store_put(kind: str) -> Callable[[Lib, int], Prepared]:
    def workload(lib: Lib, n: int) -> Prepared:
        store, close = _store(lib, kind)

        def run() -> int:
            for i in range(n):
                store.put(("users", str(i % 10), "memories"), str(i), _doc(i))
            return n

        return Prepared(
            run=run,
            warmup=lambda: store.put(("warmup",), "k", _doc(0)),
            check=lambda r: expect(
                store.get(("users", str((n - 1) % 10), "memories"), str(n - 1)).value["i"], n - 1
            ),
            close=close,
        )

    workload.__doc__ = f"N single-item puts into a {kind} store (one transaction each)."
    return workload


def _store_get(kind: str) -> Callable[[Lib, int], Prepared]:
    def workload(lib: Lib, n: int) -> Prepared:
        store, close = _store(lib, kind)
        for i in range(STORE_ITEMS):
            store.put(("users", str(i % 10)), str(i), _doc(i))

        def run() -> int:
            found = 0
            for i in range(n):
                item = store.get(("users", str(i % 10)), str(i % STORE_ITEMS))
                found += item is not None
            return found

        return Prepared(
            run=run,
            warmup=lambda: store.get(("users", "0"), "0"),
            check=lambda r: expect(r, n),
            close=close,
        )

    workload.__doc__ = f"N gets of single items from a {kind} store of {STORE_ITEMS} items."
    return workload


def _store_search(kind: str) -> Callable[[Lib, int], Prepared]:
    def workload(lib: Lib, n: int) -> Prepared:
        store, close = _store(lib, kind)
        for i in range(STORE_ITEMS):
            store.put(("users", str(i % 10)), str(i), _doc(i))

        def run() -> int:
            hits = 0
            for i in range(n):
                hits += len(store.search(("users", str(i % 10)), filter={"kind": "cat"}, limit=10))
            return hits

        return Prepared(
            run=run,
            warmup=lambda: store.search(("users",), limit=1),
            check=lambda r: expect(r, n * 10),
            close=close,
        )

    workload.__doc__ = (
        f"N filtered searches (limit 10) in one namespace of a {kind} store of {STORE_ITEMS}."
    )
    return workload


def _vector(text: str) -> list[float]:
    import random

    rng = random.Random(text)
    return [rng.uniform(-1, 1) for _ in range(VECTOR_DIMS)]


def _embed(texts: Any) -> list[list[float]]:
    return [_vector(text) for text in texts]


def _store_vector_search(kind: str) -> Callable[[Lib, int], Prepared]:
    def workload(lib: Lib, n: int) -> Prepared:
        index = {"dims": VECTOR_DIMS, "embed": _embed, "fields": ["text"]}
        store, close = _store(lib, kind, index=index)
        batch = lib.module("store.base").PutOp
        store.batch([batch(("docs",), str(i), _doc(i)) for i in range(STORE_ITEMS)])

        def run() -> int:
            return sum(len(store.search(("docs",), query=f"q{i}", limit=5)) for i in range(n))

        return Prepared(
            run=run,
            warmup=lambda: store.search(("docs",), query="warmup", limit=1),
            check=lambda r: expect(r, n * 5),
            close=close,
        )

    workload.__doc__ = (
        f"N exact semantic searches over {STORE_ITEMS} vectors of {VECTOR_DIMS} dims "
        f"in a {kind} store (user embedding function)."
    )
    return workload


CPU_TASK_LOOPS = 2_000_000  # pure-Python additions per CPU-bound task: ~0.1 s on one core
CPU_PASSES = 3  # timed runs of a CPU-bound fan-out per process (median kept)


def _cpu_fanout(lib: Lib, n: int, executor: Any = None) -> Prepared:
    entrypoint, task = lib.func.entrypoint, lib.func.task

    @task
    def burn(seed: int) -> int:
        total = seed
        for i in range(CPU_TASK_LOOPS):
            total = (total + i) % 1_000_003
        return total

    @entrypoint(executor=executor)
    def main(n: int) -> list[int]:
        return [f.result() for f in [burn(i) for i in range(n)]]

    want = [burn.__wrapped__(i) for i in range(2)]
    return Prepared(
        run=lambda: main.invoke(n),
        warmup=lambda: main.invoke(2),
        check=lambda r: expect(r[:2], want),
        passes=CPU_PASSES,
    )


def cpu_fanout(lib: Lib, n: int) -> Prepared:
    """N CPU-bound tasks (pure Python, ~0.1 s each) on the default executor (threads)."""
    return _cpu_fanout(lib, n)


DASK_QUIET = {
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False,
}


def cpu_fanout_dask(lib: Lib, n: int) -> Prepared:
    """The CPU-bound fan-out with DaskExecutor on a LocalCluster of 2 worker processes."""
    import dask
    from distributed import Client, LocalCluster

    # Dask's own monitoring, as docs/scale-out.md advises for CPU-bound work on
    # few cores: its defaults (a 20 ms event-loop tick in every process, a
    # 10 ms profiler per worker, 100 ms memory checks, work stealing) cost 0.16
    # of a core on an idle 2-worker cluster, 8% of this 2-core machine
    dask.config.set(DASK_QUIET)
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    executor = lib.module("executors.dask").DaskExecutor(client)
    prepared = _cpu_fanout(lib, n, executor)

    def close() -> None:
        client.close()
        cluster.close()

    prepared.close = close
    return prepared


WORKLOADS: dict[str, tuple[Callable[[Lib, int], Prepared], str]] = {
    "fanout": (fanout, "task"),
    "chain": (chain, "task"),
    "chain_memory": (chain_memory, "task"),
    "chain_sqlite": (chain_sqlite, "task"),
    "chain_sqlite_default": (chain_sqlite_default, "task"),
    "resume": (resume, "replayed task"),
    "async_fanout": (async_fanout, "task"),
    "pregel_chain": (pregel_chain, "superstep"),
    "pregel_chain_cold": (pregel_chain_cold, "invoke"),
    "pregel_chain_cold_nowarmup": (pregel_chain_cold_nowarmup, "invoke"),
    "cached": (cached, "task"),
    "cpu_fanout": (cpu_fanout, "task"),
    "cpu_fanout_dask": (cpu_fanout_dask, "task"),
    **{
        f"store_{kind}_{what}": (make(kind), unit)
        for kind in ("sqlite", "postgres")
        for what, make, unit in (
            ("put", _store_put, "op"),
            ("get", _store_get, "op"),
            ("search", _store_search, "op"),
            ("vector_search", _store_vector_search, "op"),
        )
    },
    "short_memory": (short_memory, "run"),
    "short_sqlite": (short_sqlite, "run"),
    "short_async_sqlite": (short_async_sqlite, "run"),
    "short_async_memory": (short_async_memory, "run"),
    "short_postgres": (short_postgres, "run"),
}

IMPORT_SNIPPET = (
    "import time\nt0 = time.perf_counter()\nimport {lib}.func\nprint(time.perf_counter() - t0)\n"
)


def measure_import(lib_name: str, repeats: int) -> dict[str, Any]:
    """Median wall time of ``import {lib}.func`` in a bare fresh interpreter."""
    code = IMPORT_SNIPPET.format(lib=lib_name)
    # Bytecode caching on, as on a user's machine (a sandbox or CI may set
    # PYTHONDONTWRITEBYTECODE, which would make every import compile from
    # source); one untimed run first writes the .pyc files.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
    times = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
        )
        times.append(float(out.stdout.strip()))
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "seconds": statistics.median(times),
        "samples": times,
        "peak_rss_mb": child,
        "peak_rss_delta_mb": None,
    }


def version(lib_name: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(lib_name)
    except PackageNotFoundError:
        return "unknown"


def run_one(lib_name: str, workload: str, n: int, import_repeats: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "lib": lib_name,
        "version": version(lib_name),
        "workload": workload,
        "n": n,
        "python": sys.version.split()[0],
    }
    if workload == "import":
        result.update(measure_import(lib_name, import_repeats))
        result["per"] = "import"
        return result

    fn, per = WORKLOADS[workload]
    result["per"] = per
    lib = Lib(lib_name)
    prepared = fn(lib, n)
    try:
        prepared.warmup()
        before = _maxrss_mb()
        passes = []
        for _ in range(prepared.passes):
            t0 = time.perf_counter()
            out = prepared.run()
            passes.append(time.perf_counter() - t0)
            prepared.check(out)
        elapsed = statistics.median(passes)
        after = _maxrss_mb()
        result.update(prepared.extra())
    finally:
        prepared.close()
    result.update(
        seconds=elapsed,
        pass_seconds=passes,
        us_per_unit=elapsed / (1 if per == "invoke" else n) * 1e6,
        peak_rss_mb=after,
        peak_rss_delta_mb=after - before,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default=os.environ.get("BENCH_LIB", "pregelkit"), choices=LIBS)
    parser.add_argument("--workload", choices=[*WORKLOADS, "import"])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--import-repeats", type=int, default=5)
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = parser.parse_args(argv)
    if args.list or not args.workload:
        for name, (fn, per) in WORKLOADS.items():
            print(f"{name:28} per {per:14} {(fn.__doc__ or '').strip().splitlines()[0]}")
        print(f"{'import':28} {'':18} wall time of `import <lib>.func` in a fresh interpreter")
        return 0
    try:
        result = run_one(args.lib, args.workload, args.n, args.import_repeats)
    except BaseException as exc:  # report every failure as data, never as a crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        first_line = (str(exc).strip().splitlines() or [""])[0]
        result = {
            "lib": args.lib,
            "workload": args.workload,
            "n": args.n,
            "error": f"{type(exc).__name__}: {first_line}"[:300],
            "traceback": traceback.format_exc()[-4000:],
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
