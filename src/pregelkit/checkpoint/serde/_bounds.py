"""Refuse a pickle that would build far more than its bytes hold, before
the C unpickler runs it.

A pickle is a program. Everything it builds from its own opcodes costs
bytes of payload, so memory stays proportional to what was stored; the
exceptions are what a few bytes can make the unpickler do on their behalf:

- a memo index or a length the bytes cannot back (the C unpickler sizes its
  memo table by the index before storing anything);
- a constructor that iterates or sizes its argument: ``list(range(10**8))``,
  ``bytes(10**9)``, ``int(Decimal("1e999999999"))``, or a container built once
  and fed again and again to a copying constructor through the memo;
- nesting deeper than the interpreter can later walk (repr, ==, pickling the
  value again all recurse).

This walks the opcodes once, mirroring the unpickler's stack with cheap
symbols (a constant, a global, a container and its size, a range and its
length, some built object), resolves each global with the loader's own
allowlist, and charges what constructors would materialize beyond the
payload against a budget. Pickles this serializer writes never feed a range
or a built object to an iterating constructor and never reuse an argument of
one through the memo, so they charge nothing.
"""

from __future__ import annotations

import collections
import fractions
import struct
from typing import Any

from pregelkit.checkpoint.serde._allowlist import Allowlist, vetted_getattr
from pregelkit.checkpoint.serde.base import LoadLimitError, SerdeError

# symbol kinds
_SCALAR, _INT, _STR, _BYTES, _CONT, _RANGE, _GLOBAL, _OBJ, _MARK = range(9)

_ITERATING = (tuple, list, set, frozenset, dict, collections.deque, bytes, bytearray, str)
_NUMERIC = (int, float, complex)
_PLAIN_KIND, _NUMERIC_KIND, _ITERATING_KIND = range(3)
_BUILTIN_SLOTS: frozenset[Any] = frozenset(
    {getattr(t, slot) for t in (*_ITERATING, *_NUMERIC, object) for slot in ("__new__", "__init__")}
)
_STDLIB_CONSUMERS = frozenset(
    {collections.Counter, collections.OrderedDict, collections.defaultdict, collections.deque}
)
_kinds: dict[type, int] = {}


def _constructor_kind(target: type) -> int:
    """Whether calling ``target`` runs a builtin constructor that sizes itself
    from its arguments. A class with its own ``__new__`` or ``__init__`` (a
    named tuple, an enum, a user's class) runs its own code, which allowing
    its module trusted."""
    kind = _kinds.get(target)
    if kind is None:
        new: Any = getattr(target, "__new__", None)
        init: Any = getattr(target, "__init__", None)
        builtin = new in _BUILTIN_SLOTS and init in _BUILTIN_SLOTS
        if target is fractions.Fraction or (builtin and issubclass(target, _NUMERIC)):
            kind = _NUMERIC_KIND if not issubclass(target, bool) else _PLAIN_KIND
        elif target in _STDLIB_CONSUMERS or (builtin and issubclass(target, _ITERATING)):
            kind = _ITERATING_KIND
        else:
            kind = _PLAIN_KIND
        _kinds[target] = kind
    return kind


_NEVER_WRITTEN = {
    0x69: "INST",
    0x6F: "OBJ",
    0x82: "EXT1",
    0x83: "EXT2",
    0x84: "EXT4",
    0x50: "PERSID",
    0x51: "BINPERSID",
    0x97: "NEXT_BUFFER",
    0x98: "READONLY_BUFFER",
}


class _Sym:
    """What the unpickler's stack would hold at one position."""

    __slots__ = ("depth", "items", "kind", "size", "value")

    def __init__(self, kind: int, value: Any = None, size: int = 0, depth: int = 0) -> None:
        self.kind = kind
        self.value = value
        self.size = size
        self.depth = depth
        self.items: list[tuple[_Sym, bool]] | None = None


_MARK_SYM = _Sym(_MARK)
_SCALAR_SYM = _Sym(_SCALAR)


class Limits:
    """Caps on what one load may build beyond its own bytes."""

    __slots__ = ("max_depth", "max_items")

    def __init__(self, max_items: int, max_depth: int) -> None:
        self.max_items = max_items
        self.max_depth = max_depth


def _corrupt(detail: str) -> SerdeError:
    return SerdeError(f"corrupt or truncated pickle: {detail}")


def _need(pos: int, n: int, end: int) -> None:
    if n < 0 or pos + n > end:
        raise _corrupt(f"an opcode at byte {pos} declares {n} bytes, more than remain")


def _line(payload: bytes, pos: int) -> tuple[bytes, int]:
    stop = payload.find(b"\n", pos)
    if stop < 0:
        raise _corrupt("a text argument has no end of line")
    return payload[pos:stop], stop + 1


def _memo_index(code: int, payload: bytes, pos: int, end: int) -> tuple[int, int]:
    """The memo index a GET or PUT opcode at ``pos`` names (in a byte, four
    bytes or a decimal line), and where its argument ends."""
    if code in (0x68, 0x71):  # BINGET, BINPUT
        _need(pos, 1, end)
        return payload[pos], pos + 1
    if code in (0x6A, 0x72):  # LONG_BINGET, LONG_BINPUT
        _need(pos, 4, end)
        return struct.unpack_from("<I", payload, pos)[0], pos + 4
    text, pos = _line(payload, pos)  # GET, PUT
    return _decimal(text), pos


def _pop(stack: list[tuple[_Sym, bool]]) -> tuple[_Sym, bool]:
    if not stack or stack[-1][0] is _MARK_SYM:
        raise _corrupt("stack underflow")
    return stack.pop()


def _pop_mark(stack: list[tuple[_Sym, bool]]) -> list[tuple[_Sym, bool]]:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] is _MARK_SYM:
            items = stack[i + 1 :]
            del stack[i:]
            return items
    raise _corrupt("no mark on the stack")


def _container(size: int, items: list[tuple[_Sym, bool]]) -> _Sym:
    depth = 1 + max((s.depth for s, _ in items), default=0)
    return _Sym(_CONT, None, size, depth)


def _call(
    func: _Sym, args: tuple[_Sym, bool], charged: int, limits: Limits, end: int
) -> tuple[_Sym, int]:
    """The symbol for ``func(*args)`` and the items charged so far."""
    target = func.value if func.kind == _GLOBAL else None
    arg_sym, arg_reused = args
    items = list(arg_sym.items or ())
    depth = 1 + max((s.depth for s, _ in items), default=0)
    if target is None or target is vetted_getattr or not isinstance(target, type):
        return _Sym(_OBJ, None, 0, depth), charged
    if arg_reused:
        charged += arg_sym.size
    if issubclass(target, range):
        bounds = [s.value for s, _ in items]
        if all(s.kind == _INT for s, _ in items) and len(bounds) <= 3:
            try:
                length = len(range(*bounds))
            except (TypeError, ValueError, OverflowError):
                length = 1 << 62
        else:
            length = 1 << 62
        return _Sym(_RANGE, None, length, 1), charged
    kind = _constructor_kind(target)
    if kind == _NUMERIC_KIND:
        for sym, _ in items:
            exponent = sym.kind == _STR and (b"e" in sym.value or b"E" in sym.value)
            if sym.kind not in (_INT, _STR, _SCALAR, _BYTES) or (
                exponent and issubclass(target, fractions.Fraction)
            ):
                raise LoadLimitError(
                    f"the payload builds a {target.__qualname__} from an argument that "
                    "could make it arbitrarily large; this serializer never writes that"
                )
    elif kind == _ITERATING_KIND:
        sizes_by_int = issubclass(target, (bytes, bytearray))
        for sym, reused in items:
            if sym.kind == _RANGE:
                charged += sym.size
            elif sym.kind == _OBJ:
                raise LoadLimitError(
                    f"the payload builds a {target.__qualname__} from an object it "
                    "constructed, which could be any size; this serializer never writes that"
                )
            elif sym.kind == _INT and sizes_by_int:
                charged += max(sym.value, 0)
            elif reused:
                charged += sym.size
    if charged > limits.max_items:
        raise LoadLimitError(
            f"loading would build more than max_items={limits.max_items} items beyond "
            f"what the {end}-byte payload holds (a {target.__qualname__} built from a range, "
            "a size or a reused argument)"
        )
    return _Sym(_OBJ, None, 0, depth), charged


def scan(payload: bytes, allowlist: Allowlist, limits: Limits) -> None:
    """Raise ``LoadLimitError``, ``UnsafeTypeError`` or ``SerdeError`` if
    loading ``payload`` would exceed ``limits``, name a refused global, or
    read past its bytes; return if it may be loaded."""
    end = len(payload)
    pos = 0
    stack: list[tuple[_Sym, bool]] = []
    memo: dict[int, _Sym] = {}
    ops = 0
    charged = 0
    deepest = 0
    unpack_from = struct.unpack_from
    while True:
        if pos >= end:
            raise _corrupt("no STOP opcode")
        code = payload[pos]
        pos += 1
        ops += 1
        sym: _Sym | None = None
        if code == 0x8C:  # SHORT_BINUNICODE
            if pos >= end or pos + 1 + payload[pos] > end:
                raise _corrupt(f"a string at byte {pos} runs past the end")
            n = payload[pos]
            sym = _Sym(_STR, payload[pos + 1 : pos + 1 + n], n)
            pos += 1 + n
        elif code == 0x94:  # MEMOIZE
            if not stack:
                raise _corrupt("MEMOIZE on an empty stack")
            memo[len(memo)] = stack[-1][0]
            continue
        elif code == 0x4B:  # BININT1
            _need(pos, 1, end)
            sym = _Sym(_INT, payload[pos])
            pos += 1
        elif code in (0x28,):  # MARK
            stack.append((_MARK_SYM, False))
            continue
        elif code in (0x5D, 0x7D, 0x8F):  # EMPTY_LIST, EMPTY_DICT, EMPTY_SET
            sym = _Sym(_CONT, None, 0, 1)
        elif code == 0x29:  # EMPTY_TUPLE
            sym = _Sym(_CONT, None, 0, 1)
            sym.items = []
        elif code in (0x75, 0x65, 0x90):  # SETITEMS, APPENDS, ADDITEMS
            items = _pop_mark(stack)
            target, _ = _pop(stack)
            target.size += len(items) // (2 if code == 0x75 else 1)
            target.depth = max(target.depth, 1 + max((s.depth for s, _ in items), default=0))
            stack.append((target, False))
            deepest = max(deepest, target.depth)
        elif code in (0x61, 0x73):  # APPEND, SETITEM
            items = [_pop(stack)]
            if code == 0x73:
                items.append(_pop(stack))
            target, _ = _pop(stack)
            target.size += 1
            target.depth = max(target.depth, 1 + max(s.depth for s, _ in items))
            stack.append((target, False))
            deepest = max(deepest, target.depth)
        elif code in (0x68, 0x6A, 0x67):  # BINGET, LONG_BINGET, GET
            idx, pos = _memo_index(code, payload, pos, end)
            found = memo.get(idx)
            if found is None:
                raise _corrupt(f"memo index {idx} read before it was stored")
            stack.append((found, True))
            continue
        elif code in (0x71, 0x72, 0x70):  # BINPUT, LONG_BINPUT, PUT
            idx, pos = _memo_index(code, payload, pos, end)
            if idx > ops or idx < 0:
                raise _corrupt(f"memo index {idx} in a {end}-byte payload")
            if not stack:
                raise _corrupt("PUT on an empty stack")
            memo[idx] = stack[-1][0]
            continue
        elif code in (0x4A, 0x4D):  # BININT, BININT2
            size = 4 if code == 0x4A else 2
            _need(pos, size, end)
            sym = _Sym(_INT, unpack_from("<i" if size == 4 else "<H", payload, pos)[0])
            pos += size
        elif code in (0x8A, 0x8B):  # LONG1, LONG4
            width = 1 if code == 0x8A else 4
            _need(pos, width, end)
            n = payload[pos] if width == 1 else unpack_from("<i", payload, pos)[0]
            _need(pos, width + n, end)
            sym = _Sym(
                _INT, int.from_bytes(payload[pos + width : pos + width + n], "little", signed=True)
            )
            pos += width + n
        elif code in (0x58, 0x8D, 0x42, 0x43, 0x8E, 0x96, 0x54, 0x55):
            width = {0x58: 4, 0x8D: 8, 0x42: 4, 0x43: 1, 0x8E: 8, 0x96: 8, 0x54: 4, 0x55: 1}[code]
            _need(pos, width, end)
            n = (
                payload[pos]
                if width == 1
                else unpack_from("<Q" if width == 8 else "<I", payload, pos)[0]
            )
            _need(pos, width + n, end)
            raw = payload[pos + width : pos + width + n]
            pos += width + n
            if code in (0x58, 0x8D):
                sym = _Sym(_STR, raw, n)
            elif code == 0x96:
                sym = _Sym(_CONT, None, n, 1)
            else:
                sym = _Sym(_BYTES, None, n)
        elif code in (0x4E, 0x88, 0x89):  # NONE, NEWTRUE, NEWFALSE
            sym = _SCALAR_SYM
        elif code == 0x47:  # BINFLOAT
            _need(pos, 8, end)
            pos += 8
            sym = _SCALAR_SYM
        elif code in (0x85, 0x86, 0x87, 0x74, 0x6C, 0x64, 0x91):
            if code in (0x85, 0x86, 0x87):
                items = [_pop(stack) for _ in range(code - 0x84)][::-1]
            else:
                items = _pop_mark(stack)
            sym = _container(len(items) // (2 if code == 0x64 else 1), items)
            if code in (0x85, 0x86, 0x87, 0x74):
                sym.items = items
            deepest = max(deepest, sym.depth)
        elif code == 0x93:  # STACK_GLOBAL
            name, _ = _pop(stack)
            module, _ = _pop(stack)
            if name.kind != _STR or module.kind != _STR:
                raise _corrupt("STACK_GLOBAL needs a module and a name")
            sym = _Sym(_GLOBAL, allowlist.find(_text(module.value), _text(name.value)))
        elif code == 0x63:  # GLOBAL
            module_raw, pos = _line(payload, pos)
            name_raw, pos = _line(payload, pos)
            module_name, name_text = _text(module_raw), _text(name_raw)
            sym = _Sym(_GLOBAL, allowlist.find(module_name, name_text))
        elif code in (0x52, 0x81):  # REDUCE, NEWOBJ
            args = _pop(stack)
            func, _ = _pop(stack)
            sym, charged = _call(func, args, charged, limits, end)
        elif code == 0x92:  # NEWOBJ_EX
            kwargs_sym, kwargs_reused = _pop(stack)
            args = _pop(stack)
            func, _ = _pop(stack)
            if kwargs_reused:
                charged += kwargs_sym.size
            sym, charged = _call(func, args, charged, limits, end)
        elif code == 0x62:  # BUILD
            state, reused = _pop(stack)
            target, _ = _pop(stack)
            if reused:
                charged += state.size
                if charged > limits.max_items:
                    raise LoadLimitError(
                        f"loading would copy more than max_items={limits.max_items} items "
                        "of reused object state"
                    )
            target.depth = max(target.depth, state.depth)
            stack.append((target, False))
            deepest = max(deepest, target.depth)
        elif code == 0x30:  # POP
            if stack and stack[-1][0] is _MARK_SYM:
                stack.pop()
            else:
                _pop(stack)
        elif code == 0x31:  # POP_MARK
            _pop_mark(stack)
        elif code == 0x32:  # DUP
            if not stack:
                raise _corrupt("DUP on an empty stack")
            stack.append(stack[-1])
        elif code == 0x80:  # PROTO
            _need(pos, 1, end)
            pos += 1
        elif code == 0x95:  # FRAME
            _need(pos, 8, end)
            pos += 8
        elif code == 0x2E:  # STOP
            if len(stack) != 1:
                raise _corrupt("STOP with a stack not holding exactly one value")
            if deepest > limits.max_depth:
                raise LoadLimitError(
                    f"the value nests {deepest} levels deep, more than max_depth="
                    f"{limits.max_depth}; nothing this deep can be walked or saved again"
                )
            return
        elif code in (0x49, 0x4C):  # INT, LONG (text)
            text, pos = _line(payload, pos)
            text = text.rstrip(b"L")
            sym = _Sym(_INT, _decimal(text)) if text not in (b"00", b"01") else _SCALAR_SYM
        elif code == 0x46:  # FLOAT (text)
            _, pos = _line(payload, pos)
            sym = _SCALAR_SYM
        elif code in (0x56, 0x53):  # UNICODE, STRING (text)
            text, pos = _line(payload, pos)
            sym = _Sym(_STR, text, len(text))
        elif code in _NEVER_WRITTEN:
            raise LoadLimitError(
                f"the payload uses the {_NEVER_WRITTEN[code]} opcode, which this serializer "
                "never writes"
            )
        else:
            raise _corrupt(f"unknown opcode {code:#04x} at byte {pos - 1}")
        if sym is not None:
            stack.append((sym, False))
            if sym.depth > deepest:
                deepest = sym.depth
        if deepest > limits.max_depth:
            raise LoadLimitError(
                f"the value nests more than max_depth={limits.max_depth} levels deep"
            )


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _corrupt(f"a global's name is not UTF-8: {exc}") from None


def _decimal(text: bytes) -> int:
    try:
        return int(text)
    except ValueError:
        raise _corrupt(f"{text[:20]!r} is not a number") from None
