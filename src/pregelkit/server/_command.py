"""``pregelkit serve``: load what the config names, open the database, and
run the application under uvicorn until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from pregelkit.cli._errors import CliError
from pregelkit.cli._fleet import _log_to_stderr
from pregelkit.cli._render import clean
from pregelkit.server._auth import KEY_ENV, check_bind, keys_from
from pregelkit.server._static import UI_PATH, check_static

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

if TYPE_CHECKING:
    from pregelkit.cli._workers import Workers
    from pregelkit.server._api import Api
    from pregelkit.server._hook import Hook


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    try:
        import uvicorn
    except ImportError:
        raise CliError(
            "pregelkit serve needs starlette and uvicorn: pip install 'pregelkit[server]'",
            kind="install",
        ) from None
    from pregelkit.server._api import Api
    from pregelkit.server._app import create_app, in_thread
    from pregelkit.server._config import load_served
    from pregelkit.server._database import open_backend
    from pregelkit.server._hook import load_hook
    from pregelkit.server._uvicorn import Server

    keys = keys_from(args.auth_key, os.environ.get(KEY_ENV))
    hook = load_hook(args.config)
    if hook is not None and keys:
        raise CliError(
            f"the config's auth hook ({hook.spec}) replaces API keys: give no --auth-key "
            f"and no {KEY_ENV} (the hook can check x-api-key itself)"
        )
    check_bind(args.host, keys, hook is not None)
    if args.concurrency < 1:
        raise CliError(f"--concurrency must be at least 1, got {args.concurrency}")
    if args.max_body < 1024:
        raise CliError(f"--max-body must be at least 1024 bytes, got {args.max_body}")
    if not 0 < args.stop_timeout < float("inf"):
        raise CliError(
            f"--stop-timeout must be a positive number of seconds, got {args.stop_timeout}"
        )
    served = load_served(args.target, args.config)
    static = check_static(args.static) if args.static is not None else None
    with contextlib.ExitStack() as stack:
        listening = stack.enter_context(_listening(args.host, args.port))
        backend = stack.enter_context(open_backend(args.db, pool_size=8))
        db = backend.db
        api = Api(served, db.saver, backend.store, backend.records, args.max_body)
        start = None
        running = "no workers"
        if not args.no_workers:
            worker = _worker(stack, args, api)
            api.wake = worker.wake
            start = in_thread(worker)
            running = f"{args.concurrency} in-process runs" + (
                " per worker, sync and async" if len(worker.serving) > 1 else ""
            )
        _log_to_stderr()  # a failed run's traceback, as `pregelkit worker` logs it
        _log_to_stderr("pregelkit.server")  # a request that failed unexpectedly
        app = create_app(api, keys, start, static, hook)
        graphs = ", ".join(s.graph_id for s in served)
        out.write(
            clean(f"serving {graphs} on {db.shown} at http://{args.host}:{args.port} "
                  f"({running}, {_admission(keys, hook)})") + "\n"
        )  # fmt: skip
        if static is not None:
            out.write(
                clean(f"the files of {static} at http://{args.host}:{args.port}{UI_PATH}/") + "\n"
            )
        out.flush()
        with _stopped_by_signals():
            config = uvicorn.Config(
                app,
                host=args.host,
                port=args.port,
                log_level="warning",
                timeout_graceful_shutdown=args.stop_timeout,
            )
            Server(api, config).run(sockets=[listening])
    out.write("stopped\n")
    return 0


def _listening(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything starts: a port in use is
    said plainly, not after the start line and the workers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = (
            "stop what listens there, or give another --port"
            if exc.errno == errno.EADDRINUSE
            else "check --host and --port"
        )
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}; {hint}") from None
    sock.set_inheritable(True)
    return sock


def _admission(keys: tuple[str, ...], hook: Hook | None) -> str:
    """Who the server admits, as its start line says it."""
    if hook is not None:
        return f"auth hook {hook.spec}"
    return "API keys required" if keys else "no API key"


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """uvicorn stops gracefully on SIGTERM or SIGINT, then raises the signal
    again to the handler in place before it: here one that does nothing, so
    a graceful stop exits 0 (after the workers handed their runs back)."""
    old = {sig: signal.signal(sig, lambda signum, frame: None) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _worker(stack: contextlib.ExitStack, args: argparse.Namespace, api: Api) -> Workers:
    """The workers on database connections of their own (pools on
    PostgreSQL), serving the configured graphs with the server's store: a
    ``Worker`` for the sync graphs, an ``AsyncWorker`` for the async ones
    (``cli/_workers.py``), each up to ``--concurrency`` runs at a time."""
    from pregelkit.cli._workers import Workers

    graphs = [s.graph.copy(store=api.store) for s in api.served]
    return Workers(graphs, args.db, stack, concurrency=args.concurrency)
