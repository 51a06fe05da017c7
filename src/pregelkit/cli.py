"""The ``pregelkit`` command: run, resume and inspect durable workflows.

Workflows are ``@entrypoint`` functions (or any ``Pregel`` graph) named as
``MODULE:NAME``, where MODULE is a dotted module name or a path to a ``.py``
file. State lives in a SQLite file (``--db``, default ``pregelkit.sqlite``) or
a PostgreSQL database (``--db postgresql://...``)::

    pregelkit run examples/quickstart.py:report '[1, 2, 3]'
    pregelkit resume THREAD '"yes"'
    pregelkit threads
    pregelkit history THREAD
    pregelkit show THREAD [CHECKPOINT]
    pregelkit delete THREAD

Every command prints readable tables, or JSON with ``--json``. Mistakes in
the command line or the environment (an unknown thread, an unreadable
database, an entrypoint that cannot be found) exit with status 2 and a
message saying what to do; a workflow that fails exits with status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import io
import json
import os
import shlex
import sqlite3
import sys
import threading
import time
import traceback
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pregelkit.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
    from pregelkit.pregel import Pregel
    from pregelkit.types import Interrupt, StreamMode

__all__ = ["main"]

DEFAULT_DB = "pregelkit.sqlite"
ENTRYPOINT_KEY = "pregelkit_entrypoint"
"""Checkpoint metadata key holding the ``MODULE:NAME`` a thread was started with."""

_NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
_INTERRUPT = "__interrupt__"
_ERROR = "__error__"
_CELL_WIDTH = 48


class CliError(Exception):
    """A mistake the user can fix: printed without a traceback, exit status 2."""


# output


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data: containers recursively, anything else by repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if type(value).__name__ == "Interrupt" and hasattr(value, "id"):
        return {"id": value.id, "value": _jsonable(value.value)}
    return repr(value)


def _short(value: Any, width: int = _CELL_WIDTH) -> str:
    """One line of at most ``width`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(ts: str | None) -> str:
    if not ts:
        return "-"
    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return ts


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, indent: str = ""
) -> None:
    cells = [[_short(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines: list[Sequence[str]] = [headers, *cells]
    for i, line in enumerate(lines):
        text = "  ".join(cell.ljust(widths[j]) for j, cell in enumerate(line)).rstrip()
        out.write(indent + text + "\n")
        if i == 0:
            out.write(indent + "  ".join("-" * w for w in widths) + "\n")


def _print_json(data: Any, out: TextIO) -> None:
    out.write(json.dumps(_jsonable(data), ensure_ascii=False) + "\n")
    out.flush()


class Progress:
    """A one-line status (running tasks, elapsed time) redrawn in place while a
    run goes on; only on a terminal. Lines printed through ``line`` clear it
    first, so the status always stays the last line."""

    DELAY = 0.3
    """Seconds before the status first shows."""

    def __init__(self, out: TextIO, enabled: bool) -> None:
        self.out = out
        self.enabled = enabled
        self.running: dict[str, str] = {}
        self.finished = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._shown = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._clear()

    def task_event(self, event: dict[str, Any]) -> None:
        with self._lock:
            if "input" in event:
                self.running[event["id"]] = event["name"]
            elif self.running.pop(event["id"], None) is not None:
                self.finished += 1

    def line(self, text: str) -> None:
        with self._lock:
            self._clear()
            self.out.write(text + "\n")
            self.out.flush()

    def _clear(self) -> None:
        if self._shown:
            self.out.write("\r\033[K")
            self._shown = False

    def _tick(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                names = sorted(set(self.running.values()))
                elapsed = time.monotonic() - self.started
                if elapsed < self.DELAY:
                    continue  # a quick run shows no status at all
                status = f"running {', '.join(names)}" if names else "working"
                done = f"{self.finished} task{'' if self.finished == 1 else 's'} done"
                text = f"… {status} ({done}, {elapsed:.1f}s)"
                self.out.write("\r\033[K" + _short(text, 100))
                self.out.flush()
                self._shown = True


class _Lines(io.TextIOBase):
    """Stands in for ``sys.stdout`` while a workflow runs: what the workflow
    prints reaches the terminal a whole line at a time, through ``line``, so it
    never splits one of the CLI's own lines (tasks print from many threads)."""

    def __init__(self, line: Callable[[str], None], real: TextIO) -> None:
        self._line = line
        self._real = real
        self._partial: dict[int, str] = {}
        self._guard = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._real, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._real.isatty()

    def write(self, text: str) -> int:
        ident = threading.get_ident()
        with self._guard:
            *lines, rest = (self._partial.pop(ident, "") + text).split("\n")
            if rest:
                self._partial[ident] = rest
        for line in lines:
            self._line(line)
        return len(text)

    def drain(self) -> None:
        """Write out what was printed without a final newline."""
        with self._guard:
            rest = list(self._partial.values())
            self._partial.clear()
        for line in rest:
            self._line(line)


@contextlib.contextmanager
def _whole_lines(progress: Progress, real: TextIO) -> Iterator[None]:
    saved = sys.stdout
    lines = _Lines(progress.line, real)
    sys.stdout = lines
    try:
        yield
    finally:
        sys.stdout = saved
        lines.drain()


# storage


@dataclass
class Database:
    """The saver for ``--db`` plus the few catalogue queries the savers do not
    offer (which threads exist, and a thread's metadata without loading it)."""

    location: str
    saver: BaseCheckpointSaver[Any]
    kind: str
    conn: Any = field(repr=False)

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self.kind == "postgres":
            sql = sql.replace("?", "%s")
        rows: list[tuple[Any, ...]] = self.conn.execute(sql, params).fetchall()
        return rows

    def threads(self) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT thread_id FROM pregelkit_checkpoints WHERE checkpoint_ns = ?", ("",)
        )
        return sorted(str(r[0]) for r in rows)

    def has_thread(self, thread_id: str) -> bool:
        rows = self._rows(
            "SELECT 1 FROM pregelkit_checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,)
        )
        return bool(rows)

    def checkpoint_count(self, thread_id: str) -> int:
        rows = self._rows(
            "SELECT count(*) FROM pregelkit_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ""),
        )
        return int(rows[0][0])

    def entrypoint_of(self, thread_id: str) -> str | None:
        """The ``MODULE:NAME`` the thread was started with, read from the JSON copy
        of its latest metadata (so nothing stored is unpickled)."""
        rows = self._rows(
            "SELECT metadata_json FROM pregelkit_checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ""),
        )
        if not rows:
            return None
        meta = rows[0][0]
        if isinstance(meta, (str, bytes)):
            try:
                meta = json.loads(meta)
            except ValueError:
                return None
        value = meta.get(ENTRYPOINT_KEY) if isinstance(meta, dict) else None
        return value if isinstance(value, str) else None


def _is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


@contextlib.contextmanager
def open_database(location: str, *, create: bool) -> Iterator[Database]:
    """The database at ``location``; unless ``create``, it must already hold
    pregelkit checkpoints (so a typo never creates an empty file)."""
    if _is_postgres(location):
        with _open_postgres(location) as db:
            yield db
        return
    if location != ":memory:" and not create:
        _check_sqlite_file(location)
    from pregelkit.checkpoint.sqlite import SqliteSaver

    try:
        with SqliteSaver.from_conn_string(location) as saver:
            saver.setup()
            yield Database(location, saver, "sqlite", saver.conn)
    except sqlite3.DatabaseError as exc:
        raise CliError(f"cannot use the database {location!r}: {exc}") from None


def _check_sqlite_file(path: str) -> None:
    if not os.path.exists(path):
        raise CliError(
            f"no database at {path!r}: start a workflow there with `pregelkit run`, or point "
            "--db (or PREGELKIT_DB) at the database your workflows use"
        )
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                ("pregelkit_checkpoints",),
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise CliError(
            f"cannot read the database {path!r}: {exc}. Is it a SQLite file? Point --db at "
            "the file your workflows use"
        ) from None
    if found is None:
        raise CliError(
            f"{path!r} is a SQLite database but holds no pregelkit checkpoints: point --db "
            "at the file your workflows use"
        )


@contextlib.contextmanager
def _open_postgres(dsn: str) -> Iterator[Database]:
    try:
        import psycopg

        from pregelkit.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise CliError(
            "a postgresql:// database needs psycopg: pip install 'pregelkit[postgres]'"
        ) from None
    try:
        manager = PostgresSaver.from_conn_string(dsn)
        saver = manager.__enter__()
    except psycopg.Error as exc:
        raise CliError(f"cannot connect to the database: {_short(str(exc), 200)}") from None
    try:
        saver.setup()
        yield Database(dsn, saver, "postgres", saver.conn)
    except psycopg.Error as exc:
        manager.__exit__(None, None, None)
        raise CliError(f"database error: {_short(str(exc), 200)}") from None
    except BaseException:
        manager.__exit__(*sys.exc_info())
        raise
    else:
        manager.__exit__(None, None, None)


# entrypoints


@dataclass
class Target:
    """A workflow named on the command line: the graph and how to name it again."""

    spec: str
    """``MODULE:NAME`` with a file path made absolute, so any directory can resume."""
    graph: Pregel


def load_target(spec: str) -> Target:
    """Import ``MODULE:NAME`` and return the ``Pregel`` it names."""
    from pregelkit.pregel import Pregel

    module_part, sep, name = spec.rpartition(":")
    if not sep or not module_part or not name:
        raise CliError(
            f"{spec!r} does not name an entrypoint: write MODULE:NAME, e.g. "
            "myapp.flows:report or path/to/flows.py:report"
        )
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise CliError(f"no such file: {module_part!r} (from {spec!r})")
        module = _import_file(path)
        canonical = f"{path}:{name}"
    else:
        module = _import_module(module_part)
        canonical = spec
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(k for k, v in vars(module).items() if isinstance(v, Pregel))
            hint = (
                f"workflows defined there: {', '.join(found)}"
                if found
                else "it defines no @entrypoint workflow"
            )
            raise CliError(f"{module_part} has no attribute {name!r}; {hint}")
        obj = getattr(obj, part)
    if not isinstance(obj, Pregel):
        raise CliError(
            f"{spec} is of type {type(obj).__name__}, not a workflow: decorate the function with "
            "@entrypoint() (from pregelkit.func), or name a Pregel graph"
        )
    return Target(canonical, obj)


def _import_file(path: str) -> Any:
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None:
        if os.path.abspath(getattr(existing, "__file__", "") or "") == path:
            return existing
        raise CliError(
            f"cannot import {path!r} as module {name!r}: a module of that name is already "
            "loaded; rename the file"
        )
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file can import its neighbours
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path!r}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise CliError(f"importing {path!r} failed: {type(exc).__name__}: {exc}") from None
    return module


def _import_module(name: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliError(
                f"no module named {name!r}: run pregelkit from the directory that holds it, "
                "or give the path to its file (path/to/module.py:NAME)"
            ) from None
        raise CliError(f"importing {name!r} failed: {exc}") from None
    except Exception as exc:
        raise CliError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _try_load(spec: str | None) -> Target | None:
    """The thread's workflow if it can be imported (so values of its classes
    load and its state can be planned); ``None`` otherwise."""
    if not spec:
        return None
    try:
        return load_target(spec)
    except CliError:
        return None


# running


@dataclass
class RunOutcome:
    interrupts: list[Interrupt] = field(default_factory=list)
    output: Any = None
    error: BaseException | None = None


def _bound(target: Target, db: Database, cache: str | None) -> Pregel:
    update: dict[str, Any] = {"checkpointer": db.saver}
    if cache:
        from pregelkit.cache.sqlite import SqliteCache

        update["cache"] = SqliteCache(path=cache)
    return target.graph.copy(**update)


def _is_async(graph: Pregel) -> bool:
    return any(node.is_async for node in graph.nodes.values())


def _drive(
    graph: Pregel,
    input: Any,
    config: dict[str, Any],
    durability: str | None,
    on_chunk: Callable[[str, Any], None],
) -> None:
    modes: list[StreamMode] = ["updates", "tasks"]
    if _is_async(graph):

        async def consume() -> None:
            async for mode, chunk in graph.astream(
                input, config, stream_mode=modes, durability=durability
            ):
                on_chunk(mode, chunk)

        asyncio.run(consume())
    else:
        for mode, chunk in graph.stream(input, config, stream_mode=modes, durability=durability):
            on_chunk(mode, chunk)


def _execute(
    args: argparse.Namespace,
    db: Database,
    target: Target,
    thread_id: str,
    input: Any,
    out: TextIO,
) -> int:
    graph = _bound(target, db, args.cache)
    config: dict[str, Any] = {
        "configurable": {"thread_id": thread_id},
        "metadata": {ENTRYPOINT_KEY: target.spec},
    }
    as_json = args.json
    outcome = RunOutcome()
    with (
        Progress(out, enabled=not as_json and out.isatty()) as progress,
        _whole_lines(progress, out),
    ):

        def on_chunk(mode: str, chunk: Any) -> None:
            if mode == "tasks":
                progress.task_event(chunk)
                return
            if _INTERRUPT in chunk:
                outcome.interrupts.extend(chunk[_INTERRUPT])
                return
            cached = bool(chunk.get("__metadata__", {}).get("cached"))
            for name, value in chunk.items():
                if name == "__metadata__":
                    continue
                if as_json:
                    event = {"event": "update", "node": name, "value": value, "cached": cached}
                    progress.line(json.dumps(_jsonable(event), ensure_ascii=False))
                else:
                    suffix = " (cached)" if cached else ""
                    progress.line(f"{name}: {_short(value, 200)}{suffix}")

        try:
            _drive(graph, input, config, args.durability, on_chunk)
        except KeyboardInterrupt:
            progress.line("")
            _fail_line(
                f"stopped. Finished tasks are saved; continue with: "
                f"{_resume_command(args, thread_id, None)}"
            )
            return 130
        except Exception as exc:
            outcome.error = exc
    return _report(args, db, graph, thread_id, config, outcome, out)


def _report(
    args: argparse.Namespace,
    db: Database,
    graph: Pregel,
    thread_id: str,
    config: dict[str, Any],
    outcome: RunOutcome,
    out: TextIO,
) -> int:
    from pregelkit.errors import ThreadBusyError

    exc = outcome.error
    if exc is not None:
        if isinstance(exc, ThreadBusyError):
            raise CliError(
                f"thread {thread_id!r} is being run by another process; wait for that run to "
                "finish (`pregelkit threads` shows its status)"
            )
        if args.traceback:
            traceback.print_exception(exc)
        message = f"{type(exc).__name__}: {exc}"
        again = _resume_command(args, thread_id, None)
        if args.json:
            _print_json(
                {"event": "error", "thread_id": thread_id, "error": message, "retry": again}, out
            )
        else:
            _fail_line(
                f"the workflow failed: {message}\nFinished tasks are saved; after fixing the "
                f"cause, continue with: {again}"
                + ("" if args.traceback else "\n(--traceback shows where it failed)")
            )
        return 1
    if outcome.interrupts:
        resume = _resume_command(args, thread_id, outcome.interrupts)
        if args.json:
            _print_json(
                {
                    "event": "interrupt",
                    "thread_id": thread_id,
                    "interrupts": outcome.interrupts,
                    "resume": resume,
                },
                out,
            )
        else:
            out.write(f"interrupted: thread {thread_id} is waiting for an answer\n")
            for i in outcome.interrupts:
                out.write(f"  [{i.id}] {_short(i.value, 200)}\n")
            out.write(f"resume with (the answer is JSON):\n  {resume}\n")
        return 0
    output = graph.get_state(config).values
    if args.json:
        _print_json({"event": "done", "thread_id": thread_id, "output": output}, out)
    else:
        out.write(f"done: thread {thread_id}\nresult: {_short(output, 500)}\n")
    return 0


def _db_args(args: argparse.Namespace) -> list[str]:
    return [] if args.db == DEFAULT_DB else ["--db", args.db]


def _resume_command(
    args: argparse.Namespace, thread_id: str, interrupts: Sequence[Interrupt] | None
) -> str:
    words = ["pregelkit", *_db_args(args), "resume", thread_id]
    if interrupts:
        if len(interrupts) == 1:
            words.append('"yes"')
        else:
            words.append(json.dumps({i.id: "..." for i in interrupts}))
    return shlex.join(words)


def _fail_line(text: str) -> None:
    sys.stderr.write(f"pregelkit: {text}\n")


def _parse_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(
            f"{what} is not valid JSON ({exc}): {text!r}. Strings need quotes, e.g. "
            "'\"yes\"'; numbers, lists and objects are written as in JSON"
        ) from None


# commands


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    value = _parse_json(args.input, "INPUT_JSON")
    target = load_target(args.entrypoint)
    thread_id = args.thread or uuid.uuid4().hex[:12]
    with open_database(args.db, create=True) as db:
        if value is None and not db.has_thread(thread_id):
            raise CliError(
                "give the workflow an input (INPUT_JSON), e.g. pregelkit run "
                f"{shlex.quote(args.entrypoint)} '[1, 2, 3]'; without one, run continues an "
                "existing thread (--thread ID)"
            )
        if args.json:
            _print_json({"event": "start", "thread_id": thread_id, "db": args.db}, out)
        else:
            out.write(f"thread: {thread_id}\n")
            out.flush()
        return _execute(args, db, target, thread_id, value, out)


def cmd_resume(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.types import Command

    value = _parse_json(args.value, "VALUE_JSON")
    with open_database(args.db, create=False) as db:
        thread_id = args.thread
        _require_thread(db, thread_id)
        spec = args.entrypoint or db.entrypoint_of(thread_id)
        if spec is None:
            raise CliError(
                f"thread {thread_id!r} does not say which workflow it runs (it was not started "
                "by `pregelkit run`): pass --entrypoint MODULE:NAME"
            )
        target = load_target(spec)
        graph = target.graph.copy(checkpointer=db.saver)
        state = graph.get_state({"configurable": {"thread_id": thread_id}})
        if value is not None and not state.interrupts:
            raise CliError(
                f"thread {thread_id!r} is not waiting for an answer "
                f"({'nothing left to run' if not state.next else 'it can continue'}); "
                f"`pregelkit history {thread_id}` shows what happened"
            )
        if value is None and state.interrupts:
            raise CliError(
                f"thread {thread_id!r} is waiting for an answer: give it as VALUE_JSON, e.g. "
                f"{_resume_command(args, thread_id, state.interrupts)}"
            )
        if value is None and not state.next:
            raise CliError(f"thread {thread_id!r} has finished: there is nothing to resume")
        if value is not None:
            _check_answer(args, thread_id, value, state.interrupts)
        if args.json:
            _print_json({"event": "start", "thread_id": thread_id, "db": args.db}, out)
        else:
            out.write(f"thread: {thread_id}\n")
            out.flush()
        run_input = Command(resume=value) if value is not None else None
        return _execute(args, db, target, thread_id, run_input, out)


def _check_answer(
    args: argparse.Namespace, thread_id: str, value: Any, pending: Sequence[Interrupt]
) -> None:
    """Several pending interrupts are answered by id; say how before running."""
    ids = {i.id for i in pending}
    if isinstance(value, dict) and value and all(k in ids for k in value):
        return
    if isinstance(value, dict) and value and all(_looks_like_id(k) for k in value):
        unknown = sorted(k for k in value if k not in ids)
        raise CliError(
            f"thread {thread_id!r} has no pending interrupt {unknown[0]!r}; pending: "
            f"{', '.join(sorted(ids))}"
        )
    if len(ids) > 1:
        raise CliError(
            f"thread {thread_id!r} waits at {len(ids)} interrupts: answer them by id, e.g. "
            f"{_resume_command(args, thread_id, pending)}"
        )


def _looks_like_id(key: str) -> bool:
    return len(key) == 32 and all(c in "0123456789abcdef" for c in key)


def _require_thread(db: Database, thread_id: str) -> None:
    if not db.has_thread(thread_id):
        raise CliError(
            f"unknown thread {thread_id!r} in {db.location!r}: `pregelkit threads` lists the "
            "threads there"
        )


def _load_tuples(
    db: Database, thread_id: str, checkpoint_id: str | None = None, *, latest: bool = False
) -> list[CheckpointTuple]:
    """The thread's root checkpoints, newest first (or only the one named, or
    only the latest)."""
    from pregelkit.errors import CheckpointCorruptError

    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    try:
        if checkpoint_id is not None or latest:
            if checkpoint_id is not None:
                conf["checkpoint_id"] = checkpoint_id
            found = db.saver.get_tuple({"configurable": conf})
            return [found] if found is not None else []
        return list(db.saver.list({"configurable": conf}))
    except CheckpointCorruptError as exc:
        raise CliError(
            f"{exc}\nIf the thread stores instances of your own classes, pass --entrypoint "
            "MODULE:NAME (or run from the directory the workflow was started in) so their "
            "module is imported and allowed"
        ) from None


def _status(target: Target | None, db: Database, tup: CheckpointTuple) -> str:
    """done, interrupted, failed or pending: planned with the workflow when it
    can be imported, else guessed from the latest checkpoint's pending writes."""
    if target is not None:
        thread_id = tup.config["configurable"]["thread_id"]
        try:
            graph = target.graph.copy(checkpointer=db.saver)
            state = graph.get_state({"configurable": {"thread_id": thread_id}})
        except Exception:
            state = None
        if state is not None:
            if state.interrupts:
                return "interrupted"
            if any(t.error is not None for t in state.tasks):
                return "failed"
            return "pending" if state.next else "done"
    writes = tup.pending_writes or []
    if _interrupts_of(tup):
        return "interrupted"
    if any(c == _ERROR for _, c, _ in writes):
        return "failed"
    return "pending" if writes or tup.metadata.get("source") == "input" else "done"


def cmd_threads(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False) as db:
        rows: list[dict[str, Any]] = []
        targets: dict[str, Target | None] = {}
        for thread_id in db.threads():
            spec = db.entrypoint_of(thread_id)
            if (spec or "") not in targets:
                targets[spec or ""] = _try_load(spec)
            try:
                found = _load_tuples(db, thread_id, latest=True)
            except CliError:
                rows.append({"thread_id": thread_id, "status": "unreadable", "entrypoint": spec})
                continue
            if not found:
                continue
            latest = found[0]
            rows.append(
                {
                    "thread_id": thread_id,
                    "status": _status(targets[spec or ""], db, latest),
                    "step": latest.metadata.get("step"),
                    "checkpoints": db.checkpoint_count(thread_id),
                    "updated": latest.checkpoint["ts"],
                    "entrypoint": spec,
                }
            )
        rows.sort(key=lambda r: str(r.get("updated") or ""), reverse=True)
        if args.json:
            _print_json(rows, out)
            return 0
        if not rows:
            out.write(f"no threads in {args.db}\n")
            return 0
        _table(
            ["THREAD", "STATUS", "STEP", "CHECKPOINTS", "UPDATED", "ENTRYPOINT"],
            [
                [
                    r["thread_id"],
                    r["status"],
                    _cell(r.get("step")),
                    _cell(r.get("checkpoints")),
                    _when(r.get("updated")),
                    _entry_cell(r.get("entrypoint")),
                ]
                for r in rows
            ],
            out,
        )
    return 0


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _entry_cell(spec: str | None) -> str:
    if not spec:
        return "-"
    module, _, name = spec.rpartition(":")
    if os.path.isabs(module):
        with contextlib.suppress(ValueError):
            relative = os.path.relpath(module)
            if not relative.startswith(".."):
                module = relative
    return f"{module}:{name}"


def _interrupts_of(tup: CheckpointTuple) -> list[Any]:
    """The interrupts still waiting at this checkpoint: those of tasks that have
    not finished since, each once."""
    from pregelkit.pregel._algo import is_done_write

    writes = tup.pending_writes or []
    finished = {t for t, c, _ in writes if is_done_write(c)}
    found: dict[str, Any] = {}
    for task_id, channel, value in writes:
        if channel == _INTERRUPT and task_id not in finished:
            for i in value:
                found.setdefault(i.id, i)
    return list(found.values())


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False) as db:
        _require_thread(db, args.thread)
        target = _try_load(args.entrypoint or db.entrypoint_of(args.thread))
        if args.entrypoint and target is None:
            load_target(args.entrypoint)  # raises the reason
        tuples = list(reversed(_load_tuples(db, args.thread)))
        nexts: dict[str, tuple[str, ...]] = {}
        if target is not None:
            graph = target.graph.copy(checkpointer=db.saver)
            with contextlib.suppress(Exception):
                conf = {"configurable": {"thread_id": args.thread}}
                for snap in graph.get_state_history(conf):
                    nexts[snap.config["configurable"]["checkpoint_id"]] = snap.next
        rows = []
        for tup in tuples:
            cid = tup.config["configurable"]["checkpoint_id"]
            writes = tup.pending_writes or []
            rows.append(
                {
                    "checkpoint_id": cid,
                    "step": tup.metadata.get("step"),
                    "source": tup.metadata.get("source"),
                    "next": list(nexts[cid]) if cid in nexts else None,
                    "tasks": len({t for t, _, _ in writes if t != _NULL_TASK_ID}),
                    "writes": len(writes),
                    "interrupts": _interrupts_of(tup),
                    "errors": [v for _, c, v in writes if c == _ERROR],
                    "time": tup.checkpoint["ts"],
                }
            )
        if args.json:
            _print_json(rows, out)
            return 0
        _table(
            ["CHECKPOINT", "STEP", "SOURCE", "NEXT", "TASKS", "WRITES", "INTERRUPTS", "TIME"],
            [
                [
                    r["checkpoint_id"],
                    _cell(r["step"]),
                    _cell(r["source"]),
                    ", ".join(r["next"]) if r["next"] else "-",
                    str(r["tasks"]),
                    str(r["writes"]) + (" (error)" if r["errors"] else ""),
                    _interrupt_cell(r["interrupts"]),
                    _when(r["time"]),
                ]
                for r in rows
            ],
            out,
        )
    return 0


def _interrupt_cell(interrupts: list[Any]) -> str:
    if not interrupts:
        return "-"
    first = _short(interrupts[0].value, 30)
    return first if len(interrupts) == 1 else f"{first} (+{len(interrupts) - 1})"


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    with open_database(args.db, create=False) as db:
        _require_thread(db, args.thread)
        target = _try_load(args.entrypoint or db.entrypoint_of(args.thread))
        if args.entrypoint and target is None:
            load_target(args.entrypoint)
        checkpoint_id = args.checkpoint
        if checkpoint_id is not None:
            checkpoint_id = _match_checkpoint(db, args.thread, checkpoint_id)
        found = _load_tuples(db, args.thread, checkpoint_id, latest=True)
        if not found:
            raise CliError(f"thread {args.thread!r} has no checkpoints")
        tup = found[0]
        conf = tup.config["configurable"]
        writes = tup.pending_writes or []
        data = {
            "thread_id": args.thread,
            "checkpoint_id": conf["checkpoint_id"],
            "parent_checkpoint_id": (tup.parent_config or {})
            .get("configurable", {})
            .get("checkpoint_id"),
            "time": tup.checkpoint["ts"],
            "metadata": tup.metadata,
            "channel_values": tup.checkpoint["channel_values"],
            "channel_versions": tup.checkpoint["channel_versions"],
            "pending_writes": [{"task_id": t, "channel": c, "value": v} for t, c, v in writes],
            "interrupts": _interrupts_of(tup),
        }
        if args.json:
            _print_json(data, out)
            return 0
        meta = {k: v for k, v in tup.metadata.items() if k not in ("parents",)}
        out.write(f"thread:      {args.thread}\n")
        out.write(f"checkpoint:  {data['checkpoint_id']}\n")
        out.write(f"parent:      {data['parent_checkpoint_id'] or '-'}\n")
        out.write(f"time:        {_when(tup.checkpoint['ts'])}\n")
        out.write(f"metadata:    {_short(meta, 200)}\n")
        out.write("\nchannel values:\n")
        values = tup.checkpoint["channel_values"]
        if values:
            rows = [[k, _short(v, 80)] for k, v in values.items()]
            _table(["CHANNEL", "VALUE"], rows, out, indent="  ")
        else:
            out.write("  (none)\n")
        out.write("\npending writes:\n")
        if writes:
            rows = [[t, c, _short(v, 60)] for t, c, v in writes]
            _table(["TASK", "CHANNEL", "VALUE"], rows, out, indent="  ")
        else:
            out.write("  (none)\n")
        interrupts = data["interrupts"]
        if interrupts:
            out.write("\ninterrupts:\n")
            for i in interrupts:
                out.write(f"  [{i.id}] {_short(i.value, 200)}\n")
    return 0


def _match_checkpoint(db: Database, thread_id: str, prefix: str) -> str:
    rows = db._rows(
        "SELECT checkpoint_id FROM pregelkit_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
        (thread_id, ""),
    )
    ids = sorted(str(r[0]) for r in rows if str(r[0]).startswith(prefix))
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise CliError(
            f"thread {thread_id!r} has no checkpoint {prefix!r}: `pregelkit history "
            f"{thread_id}` lists its checkpoints"
        )
    raise CliError(f"{prefix!r} matches {len(ids)} checkpoints; give more of the id")


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.errors import ThreadBusyError

    with open_database(args.db, create=False) as db:
        _require_thread(db, args.thread)
        try:
            with db.saver.lock_thread(args.thread):
                db.saver.delete_thread(args.thread)
        except ThreadBusyError:
            raise CliError(
                f"not deleted: thread {args.thread!r} is being run right now; delete it when "
                "that run is over"
            ) from None
        if args.json:
            _print_json({"deleted": args.thread}, out)
        else:
            out.write(f"deleted thread {args.thread}\n")
    return 0


# argument parsing


def _parser() -> argparse.ArgumentParser:
    default_db = os.environ.get("PREGELKIT_DB", DEFAULT_DB)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help=f"SQLite file or postgresql:// URL (default: $PREGELKIT_DB or {DEFAULT_DB})",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    parser = argparse.ArgumentParser(
        prog="pregelkit",
        description="Run, resume and inspect durable pregelkit workflows.",
        epilog="Exit status: 0 done or waiting at an interrupt, 1 the workflow failed, "
        "2 a usage or environment error.",
    )
    parser.add_argument("--db", default=default_db, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run_opts = argparse.ArgumentParser(add_help=False)
    run_opts.add_argument("--cache", help="SQLite file for the tasks' cache (CachePolicy)")
    run_opts.add_argument(
        "--durability",
        choices=["sync", "async", "exit"],
        help="when to save: before each next step (sync), in the background (async, the "
        "default), or when the run ends (exit)",
    )
    run_opts.add_argument(
        "--traceback", action="store_true", help="print the traceback if the workflow fails"
    )

    p = sub.add_parser(
        "run",
        parents=[common, run_opts],
        help="start a workflow (or continue a thread)",
        description="Run MODULE:NAME on INPUT_JSON, printing each task's result as it "
        "finishes. Without INPUT_JSON, continue the thread given by --thread (e.g. after "
        "a crash).",
    )
    p.add_argument("entrypoint", metavar="MODULE:NAME", help="e.g. myapp.flows:report")
    p.add_argument("input", nargs="?", metavar="INPUT_JSON", help="the input, as JSON")
    p.add_argument("--thread", help="thread id (default: a new random one, printed)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "resume",
        parents=[common, run_opts],
        help="answer an interrupt, or continue a stopped run",
        description="Resume THREAD: with VALUE_JSON as the answer to its interrupt (or a "
        "JSON object of interrupt id to answer), or without it after a crash.",
    )
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("value", nargs="?", metavar="VALUE_JSON", help="the answer, as JSON")
    p.add_argument(
        "--entrypoint",
        metavar="MODULE:NAME",
        help="the workflow (default: the one `pregelkit run` recorded)",
    )
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("threads", parents=[common], help="list threads")
    p.set_defaults(func=cmd_threads)

    p = sub.add_parser("history", parents=[common], help="a thread's checkpoints, oldest first")
    p.add_argument("thread", metavar="THREAD")
    p.add_argument("--entrypoint", metavar="MODULE:NAME", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "show", parents=[common], help="a checkpoint's channel values and pending writes"
    )
    p.add_argument("thread", metavar="THREAD")
    p.add_argument(
        "checkpoint", nargs="?", metavar="CHECKPOINT", help="id or prefix (default: latest)"
    )
    p.add_argument("--entrypoint", metavar="MODULE:NAME", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("delete", parents=[common], help="delete a thread's checkpoints")
    p.add_argument("thread", metavar="THREAD")
    p.set_defaults(func=cmd_delete)
    return parser


def _version() -> str:
    from pregelkit import __version__

    return f"pregelkit {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        status: int = args.func(args, out)
    except CliError as exc:
        _fail_line(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        _fail_line("interrupted")
        return 130
    out.flush()
    return status
