"""What a replay checks: the identity of each task call, and recorded failures.

A resumed run re-executes the entrypoint from the top; each task call it makes
is matched by position with the call recorded at that position the first time.
Each recorded call carries its identity (task name plus a digest of its
arguments), written with the task's result in the same ``put_writes``, so a
call that was swapped, inserted or given other arguments by edited code is a
``NondeterminismError`` instead of silently receiving another call's result.

The identity is a short string: ``name`` or ``name#digest``. A failed call's
record is a list ``[identity, type module, type qualname, args, message,
handled]`` so a handled failure can be raised again on replay without running
the task, and rebuilt without running code stored in the database.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from xxhash import xxh3_64_hexdigest

from pregelkit.errors import GraphBubbleUp, NondeterminismError, ReplayedTaskError

__all__ = [
    "PATCH_PREFIX",
    "ReplayFrontier",
    "ReplayProbe",
    "call_identity",
    "check_call",
    "check_ended",
    "encode_failure",
    "exception_chain",
    "identity_of",
    "is_failure",
    "rebuild_failure",
    "replays",
]

PATCH_PREFIX = "__patch__:"
"""Identity of a ``patched()`` marker: it takes a position in the call sequence."""

_BUDGET = 10_000
"""Values walked per call at most: a call with bigger (non-plain) arguments is
identified by its task name only, so no call pays for walking a huge value."""

_ATOMS = (str, int, float, bool, type(None), bytes)
_ATOM_TYPES = frozenset(_ATOMS)


class _Budget(Exception):
    pass


def _canon(value: Any, out: list[str], left: list[int]) -> None:
    """Append a canonical text of ``value`` to ``out``: equal values give equal
    text (dict and set order do not matter); values that have no cheap
    canonical form contribute their type name only."""
    left[0] -= 1
    if left[0] < 0:
        raise _Budget
    t = type(value)
    if t is str or t is int or t is bool or t is float or value is None or t is bytes:
        out.append(t.__name__[0])
        out.append(repr(value))
    elif t is list or t is tuple:
        out.append("[" if t is list else "(")
        for v in value:
            _canon(v, out, left)
            out.append(",")
        out.append("]")
    elif t is dict:
        entries = sorted(f"{_member(k, left)}:{_member(v, left)}" for k, v in value.items())
        out.append("{")
        out.append(",".join(entries))
        out.append("}")
    elif t is set or t is frozenset:
        out.append("<")
        out.append(",".join(sorted(_member(v, left) for v in value)))
        out.append(">")
    else:
        out.append("?")
        out.append(t.__qualname__)


def _member(value: Any, left: list[int]) -> str:
    """The canonical text of a dict's key or value or a set's member: alone,
    so that the container's texts are sorted by it."""
    out: list[str] = []
    _canon(value, out, left)
    return "".join(out)


def call_identity(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``name#digest`` of a call; just ``name`` when its arguments are too big."""
    if not kwargs and _ATOM_TYPES.issuperset(map(type, args)):
        # plain arguments (the common case): their repr is already canonical
        # (1, True, 1.0, '1' and b'1' all differ), so no walk is needed
        return f"{name}#{xxh3_64_hexdigest(repr(args).encode())}"
    out: list[str] = []
    try:
        _canon(args, out, [_BUDGET])
        if kwargs:
            _canon(kwargs, out, [_BUDGET])
    except _Budget:
        return name
    return f"{name}#{xxh3_64_hexdigest(''.join(out).encode())}"


def _describe(identity: str, other: str) -> str:
    if identity.startswith(PATCH_PREFIX):
        return f"patched({identity[len(PATCH_PREFIX) :]!r})"
    name, _, digest = identity.partition("#")
    if name == other.partition("#")[0]:
        return f"{name!r} with arguments of digest {digest}"
    return repr(name)


def check_call(recorded: str | None, new: str, position: int, parent: str) -> None:
    """Raise ``NondeterminismError`` unless the recorded call at ``position``
    is the call the code makes now."""
    if recorded is None or recorded == new:
        return
    rname, _, rdigest = recorded.partition("#")
    nname, _, ndigest = new.partition("#")
    if rname == nname and (not rdigest or not ndigest):
        return  # one side could not be digested: the name is all there is to compare
    raise NondeterminismError(
        position=position,
        parent=parent,
        recorded=_describe(recorded, new),
        new=_describe(new, recorded),
    )


def check_ended(recorded: str | None, calls: int, parent: str) -> None:
    """Raise ``NondeterminismError`` if ``parent`` returned after ``calls``
    calls while the run it resumes recorded one more: the new code dropped a
    call the old one made (and whose side effects happened)."""
    if recorded is None:
        return
    raise NondeterminismError(
        position=calls,
        parent=parent,
        recorded=_describe(recorded, ""),
        new="nothing (it returns before)",
    )


def identity_of(record: Any) -> str | None:
    """The identity in a recorded call write's value (None if nothing is recorded)."""
    if record is None:
        return None
    return record if isinstance(record, str) else str(record[0])


def replays(
    done: list[tuple[str, Any]] | None, record: Any, identity: str, position: int, parent: str
) -> bool:
    """Check the call recorded at ``position`` (its saved writes ``done`` and
    identity ``record``) against the call made now; True if it is a finished
    result to hand back (a value, or a failure the caller handled), False if
    the call must run (it was interrupted, or its failure ended the run)."""
    if record is None:
        return done is not None  # recorded before identities were: nothing to check
    check_call(identity_of(record), identity, position, parent)
    if done is not None:
        return True
    return isinstance(record, list) and failure_handled(record)


# the replay check (pregelkit.testing.replay_check)
class ReplayFrontier(GraphBubbleUp):
    """A replay check reached a call its recorded run had not finished: the
    run stops there instead of running the call's body (or waiting)."""


class ReplayProbe:
    """Rides in a replay check's config (``CONFIG_KEY_REPLAY_CHECK``): where
    the run reached the frontier of its recorded run, if it did."""

    __slots__ = ("frontier",)

    def __init__(self) -> None:
        self.frontier: str | None = None

    def reach(self, where: str) -> ReplayFrontier:
        """The exception that stops the run at ``where``; the first one is kept
        (code that catches it and goes on cannot hide it)."""
        if self.frontier is None:
            self.frontier = where
        return ReplayFrontier(where)


# failures
def is_failure(value: Any) -> bool:
    """Whether a recorded call identity value records a failure."""
    return isinstance(value, list)


def _plain(value: Any) -> bool:
    return type(value) in _ATOMS


def encode_failure(identity: str, exc: BaseException, *, handled: bool) -> list[Any]:
    """What is stored for a failed call: enough to raise an equal exception
    again, made only of plain values (no pickle)."""
    cls = type(exc)
    args = list(exc.args) if all(_plain(a) for a in exc.args) else None
    try:
        message = str(exc)
    except Exception:
        message = f"<{cls.__name__}: str() failed>"
    return [identity, cls.__module__, cls.__qualname__, args, message, handled]


def failure_handled(value: list[Any]) -> bool:
    return bool(value[5])


def exception_chain(exc: BaseException | None) -> set[int]:
    """Ids of ``exc`` and the exceptions it was raised from or during: a call
    whose failure is among them is what ended its caller."""
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < 100:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        todo.append(e.__cause__)
        todo.append(e.__context__)
    return seen


def _allowed(module: str) -> bool:
    from pregelkit.checkpoint.serde._registry import _registry

    return any(module == m or module.startswith(m + ".") for m in _registry.modules)


def _resolve(module: str, qualname: str) -> type[BaseException] | None:
    """The exception class, only from builtins or an allowed module that is
    already imported: loading a record never imports or calls user code."""
    if module == "builtins":
        owner: Any = builtins
    elif _allowed(module) and module in sys.modules:
        owner = sys.modules[module]
    else:
        return None
    for part in qualname.split("."):
        owner = owner.__dict__.get(part) if hasattr(owner, "__dict__") else None
        if owner is None:
            return None
    if isinstance(owner, type) and issubclass(owner, BaseException):
        return owner
    return None


def rebuild_failure(value: list[Any]) -> BaseException:
    """The recorded exception, rebuilt: builtin classes from their args,
    classes of allowed modules without running their ``__init__``, anything
    else as a ``ReplayedTaskError`` carrying the type name and message."""
    _, module, qualname, args, message, _ = value
    cls = _resolve(module, qualname)
    if cls is not None:
        exc_args = tuple(args) if args is not None else (message,)
        try:
            if module == "builtins":
                return cls(*exc_args)
            exc = BaseException.__new__(cls)
            exc.args = exc_args
            return exc
        except Exception:
            pass
    return ReplayedTaskError(f"{module}.{qualname}", message)
