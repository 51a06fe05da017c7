"""JsonPlusSerializer and EncryptedSerializer: round trips, the exception
convention, restricted loading, the registry, and encryption."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import http
import ipaddress
import os
import pathlib
import pickle
import subprocess
import sys
import threading
import time
import types
import urllib.parse
import uuid
import zoneinfo
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pregelkit.checkpoint.serde import (
    EncryptedSerializer,
    JsonPlusSerializer,
    SerdeError,
    SerializerProtocol,
    UnsafeTypeError,
    allow_modules,
    allow_types,
)
from pregelkit.checkpoint.serde.base import StoredAt
from pregelkit.types import Command, Interrupt, Send


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


@dataclasses.dataclass
class Point:
    x: Any
    y: Any


# The round trips load this module's classes through an instance option, so
# the process-wide registry stays untouched for the refusal tests.
serde = JsonPlusSerializer(allowed_modules=[__name__])


def roundtrip(value: Any, s: SerializerProtocol = serde) -> Any:
    return s.loads_typed(s.dumps_typed(value))


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1 == True`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple, collections.deque)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (datetime.datetime, datetime.time)):
        return a == b and repr(a.tzinfo) == repr(b.tzinfo)
    if isinstance(a, Send):
        return a.node == b.node and same(a.arg, b.arg)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


tzs = (
    st.none()
    | st.timezones()
    | st.builds(
        datetime.timezone,
        st.timedeltas(datetime.timedelta(hours=-23), datetime.timedelta(hours=23)),
    )
)
hashable = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.datetimes(timezones=tzs),
    st.dates(),
    st.times(timezones=tzs),
    st.timedeltas(),
    st.uuids(),
    st.decimals(allow_nan=False),
    st.fractions(),
    st.complex_numbers(allow_nan=False),
    st.sampled_from(Color),
    st.builds(pathlib.PurePosixPath, st.text()),
    st.builds(pathlib.Path, st.text()),
    st.ip_addresses(),
)
values = st.recursive(
    hashable | st.binary().map(bytearray),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(hashable, children, max_size=4),
        st.sets(hashable, max_size=4),
        st.frozensets(hashable, max_size=4),
        st.lists(children, max_size=4).map(collections.deque),
        st.dictionaries(st.text(), children, max_size=3).map(collections.OrderedDict),
        st.dictionaries(st.text(), children, max_size=3).map(
            lambda d: collections.defaultdict(list, d)
        ),
        st.builds(Point, children, children),
        st.builds(Send, st.text(), children),
        st.builds(Interrupt, children, st.text()),
        st.builds(Command, resume=children, goto=st.text()),
    ),
    max_leaves=12,
)


Pair = collections.namedtuple("Pair", "left right")


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def _unloadable(kind: str) -> Any:
    """A fresh value the loader could never rebuild."""
    if kind == "lambda":
        return lambda: kind
    if kind == "local-class":

        class Local:
            pass

        return Local()
    if kind == "lock":
        return threading.Lock()
    if kind == "generator":
        return (i for i in range(2))
    if kind == "module":
        return os
    return os.path.join  # a function: loading only rebuilds classes


# what each kind's error must name
_CULPRIT = {
    "lambda": "<lambda>",
    "local-class": "Local",
    "lock": "lock",
    "generator": "generator",
    "module": "module",
    "function": "join",
}


def _kind_of(value: Any) -> str | None:
    if isinstance(value, types.LambdaType) and value.__name__ == "<lambda>":
        return "lambda"
    if type(value).__qualname__.endswith("<locals>.Local"):
        return "local-class"
    if isinstance(value, type(threading.Lock())):
        return "lock"
    if isinstance(value, types.GeneratorType):
        return "generator"
    if isinstance(value, types.ModuleType):
        return "module"
    if value is os.path.join:
        return "function"
    return None


def _unloadables_in(value: Any) -> set[str]:
    kind = _kind_of(value)
    if kind is not None:
        return {kind}
    if isinstance(value, dict):
        parts: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        parts = list(value)
    elif isinstance(value, types.SimpleNamespace):
        parts = list(vars(value).values())
    elif isinstance(value, (Point, Send)):
        parts = [value.x, value.y] if isinstance(value, Point) else [value.arg]
    elif isinstance(value, (Interrupt, Command)):
        parts = [value.value] if isinstance(value, Interrupt) else [value.resume]
    else:
        parts = []
    return set().union(*(_unloadables_in(p) for p in parts)) if parts else set()


stdlib_leaves = st.one_of(
    hashable,
    st.sampled_from(http.HTTPStatus),
    st.sampled_from(Level),
    st.builds(urllib.parse.SplitResult, st.text(), st.text(), st.text(), st.text(), st.text()),
    st.builds(urllib.parse.urlparse, st.from_regex(r"\Ahttps?://[a-z]{1,8}/[a-z/]{0,10}\Z")),
    st.builds(Pair, st.integers(), st.text()),
    st.builds(pathlib.PurePosixPath, st.text()),
)
mixed = st.recursive(
    stdlib_leaves | st.sampled_from(list(_CULPRIT)).map(_unloadable),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(stdlib_leaves, children, max_size=4),
        st.dictionaries(st.from_regex(r"\A[a-z]{1,5}\Z"), children, max_size=3).map(
            lambda d: types.SimpleNamespace(**d)
        ),
        st.builds(Point, children, children),
        st.builds(Send, st.text(), children),
        st.builds(Command, resume=children, goto=st.text()),
    ),
    max_leaves=10,
)


@given(mixed)
@settings(max_examples=400, deadline=None)
def test_a_value_is_refused_at_save_naming_the_culprit_or_loads_equal(value: Any) -> None:
    culprits = _unloadables_in(value)
    if not culprits:
        assert same(roundtrip(value), value)
        return
    with pytest.raises(SerdeError) as err:
        serde.dumps_typed(value)
    message = str(err.value)
    assert message.startswith("cannot s"), message
    assert any(_CULPRIT[kind] in message for kind in culprits), (culprits, message)


@given(values)
@settings(max_examples=300, deadline=None)
def test_round_trip_keeps_value_and_types(value: Any) -> None:
    assert same(roundtrip(value), value)


@given(values)
@settings(max_examples=100, deadline=None)
def test_bytes_convenience_round_trip(value: Any) -> None:
    assert same(serde.loads(serde.dumps(value)), value)


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        (None, "null"),
        ("héllo", "str"),
        ("lone \ud800 surrogate", "str"),
        (-42, "int"),
        (b"\x00raw", "bytes"),
        (bytearray(b"ba"), "bytearray"),
        (True, "pickle"),
        (1.5, "pickle"),
        ({"a": [1, "x"]}, "pickle"),
        (10**5000, "pickle"),  # beyond the int/str digit limit: stays binary
    ],
    ids=["none", "str", "surrogate", "int", "bytes", "bytearray", "bool", "float", "dict", "huge"],
)
def test_scalars_use_their_own_tags(value: Any, tag: str) -> None:
    dumped = serde.dumps_typed(value)
    assert dumped[0] == tag
    assert same(serde.loads_typed(dumped), value)


def test_payload_may_be_bytearray_or_memoryview() -> None:
    tag, data = serde.dumps_typed({"k": "v"})
    assert serde.loads_typed((tag, bytearray(data))) == {"k": "v"}
    assert serde.loads_typed((tag, memoryview(data))) == {"k": "v"}


def test_zoneinfo_datetime_round_trips() -> None:
    value = datetime.datetime(2024, 3, 31, 2, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    back = roundtrip(value)
    assert back == value
    assert back.tzinfo is zoneinfo.ZoneInfo("Europe/Paris")


def test_stdlib_odds_and_ends_round_trip() -> None:
    for value in (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_interface("::1/128"),
        range(1, 10, 3),
        slice(1, None, 2),
        collections.Counter("abca"),
        decimal.Decimal("-Infinity"),
        fractions.Fraction(3, 7),
        uuid.UUID(int=5),
        datetime.timezone(datetime.timedelta(hours=5, minutes=30), "IST"),
    ):
        assert same(roundtrip(value), value)


def test_exception_is_stored_as_its_repr() -> None:
    dumped = serde.dumps_typed(Exception("manllually raised exception"))
    assert dumped[0] == "exc"
    assert serde.loads_typed(dumped) == "Exception('manllually raised exception')"


def test_exception_with_broken_repr_still_records_its_type() -> None:
    class Broken(ValueError):
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert roundtrip(Broken("x")) == "Broken(<repr failed>)"


def test_builtin_exception_nested_in_a_value_round_trips() -> None:
    back = roundtrip([KeyError("k")])
    assert type(back[0]) is KeyError
    assert back[0].args == ("k",)


def _foreign_unpickle(cls: type, args: tuple[Any, ...]) -> BaseException:
    return cls(*args)


def _foreign_reduce(exc: BaseException) -> Any:
    return (_foreign_unpickle, (type(exc), exc.args))


def test_exception_ignores_a_reducer_another_library_registered() -> None:
    """tblib, which dask's distributed imports, registers a reducer in
    copyreg for every exception class; a stored exception must still be one
    the loader rebuilds (it was refused at save once distributed was imported)."""
    import copyreg

    copyreg.pickle(KeyError, _foreign_reduce)
    try:
        back = roundtrip([KeyError("k")])
    finally:
        del copyreg.dispatch_table[KeyError]
    assert type(back[0]) is KeyError and back[0].args == ("k",)


# refusing to run code


class _Evil:
    def __init__(self, func: Any, arg: str) -> None:
        self.func = func
        self.arg = arg

    def __reduce__(self) -> Any:
        return (self.func, (self.arg,))


def test_payload_calling_os_system_is_refused_and_not_run(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(os.system, f"touch {marker}"))
    with pytest.raises(UnsafeTypeError, match=r"system") as info:
        serde.loads_typed(("pickle", payload))
    assert "allow_modules" in str(info.value)
    assert "pickle_fallback=True" in str(info.value)
    assert not marker.exists()


def test_payload_calling_eval_is_refused_and_not_run(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(eval, f"open({str(marker)!r}, 'w').write('x')"))
    with pytest.raises(UnsafeTypeError, match=r"builtins\.eval"):
        serde.loads_typed(("pickle", payload))
    assert not marker.exists()


def _call_pickle(module: str, name: str, *args: Any) -> bytes:
    """A protocol-2 pickle that looks up ``module.name`` and calls it with ``args``."""
    args_pickle = pickle.dumps(args, 2)[2:-1]  # drop PROTO and STOP
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + args_pickle + b"R."


def test_getattr_reaches_only_vetted_attributes() -> None:
    payload = _call_pickle("builtins", "getattr", Send, "__init__")
    with pytest.raises(UnsafeTypeError, match=r"getattr\(pregelkit\.types\.Send, '__init__'\)"):
        serde.loads_typed(("pickle", payload))


def test_harmless_but_unlisted_class_is_refused() -> None:
    with pytest.raises(UnsafeTypeError, match=r"argparse\.Namespace"):
        serde.loads_typed(("pickle", _call_pickle("argparse", "Namespace")))


def test_unregistered_user_class_is_refused_with_a_hint() -> None:
    dumped = serde.dumps_typed(Point(1, 2))
    with pytest.raises(UnsafeTypeError) as info:
        JsonPlusSerializer().loads_typed(dumped)
    message = str(info.value)
    assert f"{__name__}.Point" in message
    assert f"allow_modules({__name__!r})" in message


def test_lambda_is_refused_when_saved_unless_the_store_is_trusted() -> None:
    offset = 3
    with pytest.raises(SerdeError, match=r"type function: .*<lambda> is a lambda"):
        serde.dumps_typed(lambda x: x + offset)
    trusting = JsonPlusSerializer(pickle_fallback=True)
    dumped = trusting.dumps_typed(lambda x: x + offset)
    assert dumped[0] == "cloudpickle"
    with pytest.raises(UnsafeTypeError, match="pickle_fallback=True"):
        serde.loads_typed(dumped)
    assert trusting.loads_typed(dumped)(1) == 4
    assert JsonPlusSerializer(unsafe_allow_any=True).loads_typed(dumped)(1) == 4


def test_pickle_fallback_and_unsafe_allow_any_are_one_switch() -> None:
    for trusting in (
        JsonPlusSerializer(pickle_fallback=True),
        JsonPlusSerializer(unsafe_allow_any=True),
    ):
        assert trusting.pickle_fallback and trusting.unsafe_allow_any
    assert not JsonPlusSerializer().pickle_fallback


def test_unsafe_allow_any_loads_plain_pickles_of_anything() -> None:
    with pytest.raises(SerdeError, match=r"threading\.Event"):
        JsonPlusSerializer().dumps_typed(threading.Event)
    dumped = ("pickle", pickle.dumps(threading.Event))  # a class pickled by reference
    with pytest.raises(UnsafeTypeError):
        serde.loads_typed(dumped)
    assert JsonPlusSerializer(unsafe_allow_any=True).loads_typed(dumped) is threading.Event


# the registry


@pytest.fixture
def user_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fresh importable module with a dataclass, as a user's code would have."""
    name = f"userland_{uuid.uuid4().hex}"
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    exec(
        "import dataclasses, os\n"
        "@dataclasses.dataclass\n"
        "class Order:\n"
        "    item: str\n"
        "    qty: int\n"
        "    class Line:\n"
        "        pass\n"
        "def helper():\n"
        "    return 1\n",
        module.__dict__,
    )
    return module


def test_allow_modules_admits_a_users_dataclass(user_module: types.ModuleType) -> None:
    value = {"order": user_module.Order("tea", 2)}
    default = JsonPlusSerializer()
    with pytest.raises(SerdeError, match=f"{user_module.__name__}.Order"):
        default.dumps_typed(value)  # refused when saved, not when resumed
    dumped = ("pickle", pickle.dumps(value))
    with pytest.raises(UnsafeTypeError, match=f"{user_module.__name__}.Order"):
        default.loads_typed(dumped)
    allow_modules(user_module.__name__)
    assert default.loads_typed(default.dumps_typed(value)) == value
    assert JsonPlusSerializer().loads_typed(dumped) == value  # every instance consults it


def test_allow_types_admits_exactly_that_class(user_module: types.ModuleType) -> None:
    allow_types(user_module.Order)
    default = JsonPlusSerializer()
    assert roundtrip(user_module.Order("x", 1), default) == user_module.Order("x", 1)
    with pytest.raises(SerdeError, match=r"Order\.Line"):
        default.dumps_typed(user_module.Order.Line())
    with pytest.raises(UnsafeTypeError, match=r"Order\.Line"):
        default.loads_typed(("pickle", pickle.dumps(user_module.Order.Line())))


def test_langgraph_allowlist_options(user_module: types.ModuleType) -> None:
    name = user_module.__name__
    order = user_module.Order("x", 1)
    for options in (
        {"allowed_json_modules": [(name, "Order")]},
        {"allowed_msgpack_modules": [(name, "Order")]},
        {"allowed_msgpack_modules": [user_module.Order]},
        {"allowed_json_modules": True},
        {"allowed_msgpack_modules": True},
    ):
        assert roundtrip(order, JsonPlusSerializer(**options)) == order, options
    only_order = JsonPlusSerializer(allowed_json_modules=[(name, "Order")])
    with pytest.raises(SerdeError, match=r"Order\.Line"):
        only_order.dumps_typed(user_module.Order.Line())
    with pytest.raises(UnsafeTypeError, match="helper"):  # True admits classes, not functions
        JsonPlusSerializer(allowed_json_modules=True).loads_typed(
            ("pickle", _call_pickle(name, "helper"))
        )
    with pytest.raises(TypeError, match="allowed_json_modules takes"):
        JsonPlusSerializer(allowed_json_modules=["myapp.models"])  # type: ignore[list-item]


def _module_with_class(monkeypatch: pytest.MonkeyPatch, name: str) -> type:
    module = types.ModuleType(name)
    cls = type("Thing", (), {"__module__": name})
    module.Thing = cls  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    return cls


def test_registered_module_covers_submodules_but_not_lookalikes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    package = f"pkg_{uuid.uuid4().hex}"
    monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
    inside = _module_with_class(monkeypatch, f"{package}.models")
    lookalike = _module_with_class(monkeypatch, f"{package}x")
    s = JsonPlusSerializer(allowed_modules=package)  # a lone name is one module
    assert type(roundtrip(inside(), s)) is inside
    with pytest.raises(UnsafeTypeError, match=f"{package}x.Thing"):
        s.loads_typed(("pickle", pickle.dumps(lookalike())))


def test_registered_module_never_yields_functions_or_traversals(
    user_module: types.ModuleType,
) -> None:
    s = JsonPlusSerializer(allowed_modules=[user_module.__name__])
    name = user_module.__name__
    with pytest.raises(UnsafeTypeError, match="helper"):
        s.loads_typed(("pickle", _call_pickle(name, "helper")))
    with pytest.raises(UnsafeTypeError, match=r"os\.system"):
        s.loads_typed(("pickle", _call_pickle(name, "os.system", "true")))
    with pytest.raises(UnsafeTypeError, match="__class__"):
        s.loads_typed(("pickle", _call_pickle(name, "Order.__class__")))
    with pytest.raises(SerdeError, match="renamed or moved"):
        s.loads_typed(("pickle", _call_pickle(name, "Gone")))


def test_registry_rejects_non_names_and_non_classes() -> None:
    with pytest.raises(TypeError, match="module names"):
        allow_modules("")
    with pytest.raises(TypeError, match="takes classes"):
        allow_types(print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="module names"):
        JsonPlusSerializer(allowed_modules=[3])  # type: ignore[list-item]


# failures


@pytest.mark.parametrize(
    "value",
    [threading.Lock(), (i for i in range(3)), {"nested": [threading.RLock()]}],
    ids=["lock", "generator", "nested-rlock"],
)
def test_unserializable_value_names_its_type(value: Any) -> None:
    with pytest.raises(SerdeError, match="cannot serialize a value of type"):
        serde.dumps_typed(value)


def test_open_file_is_not_serializable(tmp_path: pathlib.Path) -> None:
    with (tmp_path / "f").open("w") as handle, pytest.raises(SerdeError, match="TextIOWrapper"):
        serde.dumps_typed(handle)


def test_unknown_tag_is_named() -> None:
    with pytest.raises(SerdeError, match="unknown serialization tag 'msgpack'"):
        serde.loads_typed(("msgpack", b"\x80"))


@pytest.mark.parametrize(
    "data",
    [("int", b"12x"), ("str", b"\xff\xfe"), ("pickle", b"garbage"), ("pickle", b"")],
)
def test_corrupt_payloads_raise_serde_error(data: tuple[str, bytes]) -> None:
    with pytest.raises(SerdeError, match="corrupt or truncated"):
        serde.loads_typed(data)


def test_every_truncation_of_a_pickle_is_a_serde_error() -> None:
    _, data = serde.dumps_typed({"when": datetime.datetime.now(), "who": [Point(1, "a")]})
    for end in range(len(data)):
        with pytest.raises(SerdeError):
            serde.loads_typed(("pickle", data[:end]))


@given(st.binary(max_size=64))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_escape_as_other_errors(data: bytes) -> None:
    try:
        serde.loads_typed(("pickle", b"\x80\x05" + data))
    except SerdeError:
        pass


def test_malformed_arguments() -> None:
    with pytest.raises(SerdeError, match="takes the"):
        serde.loads_typed(("str",))  # type: ignore[arg-type]
    with pytest.raises(SerdeError, match="needs bytes"):
        serde.loads_typed(("str", "text"))  # type: ignore[arg-type]
    with pytest.raises(SerdeError, match="no tag separator"):
        serde.loads(b"no separator")


def test_is_a_serializer_protocol() -> None:
    assert isinstance(serde, SerializerProtocol)
    assert isinstance(EncryptedSerializer.from_key(os.urandom(16)), SerializerProtocol)


def test_small_values_are_fast() -> None:
    # Loose guards against an accidental slow path. Saving (every task write
    # pays it) measures about 2 us for this dict; loading scans the pickle's
    # opcodes before running them (about 15 us), and happens once per resume.
    value = {"messages": ["hi"], "count": 3}
    start = time.perf_counter()
    for _ in range(10_000):
        serde.dumps_typed(value)
        serde.dumps_typed("a short string")
    assert time.perf_counter() - start < 1.0
    dumped = serde.dumps_typed(value)
    start = time.perf_counter()
    for _ in range(10_000):
        serde.loads_typed(dumped)
    assert time.perf_counter() - start < 20.0  # generous: a busy machine is not a failure


def test_importing_serde_does_not_import_cryptography() -> None:
    code = (
        "import sys, pregelkit.checkpoint.serde as s; s.JsonPlusSerializer; "
        "s.EncryptedSerializer; assert 'cryptography' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# encryption

KEY = bytes(range(32))


def test_encrypted_round_trip_and_tag() -> None:
    enc = EncryptedSerializer(serde, KEY)
    for value in ({"a": [1, 2]}, "text", None, Point(1, Color.RED)):
        tag, data = enc.dumps_typed(value)
        assert tag.startswith("enc2:")
        assert b"text" not in data
        assert same(enc.loads_typed((tag, data)), value)


def test_encryption_uses_a_fresh_nonce_per_value() -> None:
    enc = EncryptedSerializer.from_key(KEY)
    assert enc.dumps_typed("same") != enc.dumps_typed("same")


def test_wrong_key_fails() -> None:
    dumped = EncryptedSerializer(serde, KEY).dumps_typed({"secret": 1})
    with pytest.raises(SerdeError, match="key differs"):
        EncryptedSerializer(serde, os.urandom(32)).loads_typed(dumped)


def test_tampering_fails() -> None:
    enc = EncryptedSerializer(serde, KEY)
    tag, data = enc.dumps_typed("payload")
    flipped = bytearray(data)
    flipped[-1] ^= 1
    with pytest.raises(SerdeError, match="altered"):
        enc.loads_typed((tag, bytes(flipped)))
    with pytest.raises(SerdeError, match="altered"):
        enc.loads_typed(("enc2:bytes", data))  # the tag is authenticated too
    with pytest.raises(SerdeError, match="truncated"):
        enc.loads_typed((tag, data[:20]))


HERE = StoredAt("thread-a", "", "blob", ("messages", "3"))


@pytest.mark.parametrize(
    "elsewhere",
    [
        HERE._replace(thread_id="thread-b"),
        HERE._replace(checkpoint_ns="sub:1"),
        HERE._replace(key=("other", "3")),
        HERE._replace(key=("messages", "4")),
        HERE._replace(kind="write"),
        None,
    ],
    ids=["thread", "namespace", "channel", "version", "kind", "no-place"],
)
def test_a_value_loads_only_where_it_was_sealed(elsewhere: StoredAt | None) -> None:
    enc = EncryptedSerializer(serde, KEY)
    sealed = enc.dumps_typed_at({"secret": 1}, HERE)
    assert enc.loads_typed_at(sealed, HERE) == {"secret": 1}
    with pytest.raises(SerdeError, match="sealed for another thread, checkpoint or channel"):
        enc.loads_typed_at(sealed, elsewhere)


def test_reseal_moves_a_value_without_loading_it() -> None:
    enc = EncryptedSerializer(serde, KEY)
    there = HERE._replace(thread_id="copy")
    moved = enc.reseal(enc.dumps_typed_at([1], HERE), HERE, there)
    assert enc.loads_typed_at(moved, there) == [1]
    with pytest.raises(SerdeError):
        enc.loads_typed_at(moved, HERE)


def test_plaintext_is_refused_while_encryption_is_on() -> None:
    plain = serde.dumps_typed([1, "x"])
    with pytest.raises(SerdeError, match=r"unencrypted .* while encryption is on"):
        EncryptedSerializer(serde, KEY).loads_typed_at(plain, HERE)
    assert EncryptedSerializer(serde, KEY, accept_legacy=True).loads_typed_at(plain, HERE) == [
        1,
        "x",
    ]


def _sealed_by_the_old_code_path(value: Any) -> tuple[str, bytes]:
    """What EncryptedSerializer wrote before values were bound to their place:
    AES-GCM with only the inner tag as associated data, tag ``enc:<inner>``."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    tag, payload = serde.dumps_typed(value)
    nonce = os.urandom(12)
    return "enc:" + tag, nonce + AESGCM(KEY).encrypt(nonce, payload, tag.encode())


def test_values_encrypted_before_binding_need_an_explicit_migration() -> None:
    legacy = _sealed_by_the_old_code_path({"old": True})
    with pytest.raises(SerdeError, match=r"older pregelkit.*accept_legacy=True"):
        EncryptedSerializer(serde, KEY).loads_typed_at(legacy, HERE)
    migrating = EncryptedSerializer(serde, KEY, accept_legacy=True)
    assert migrating.loads_typed_at(legacy, HERE) == {"old": True}
    resealed = migrating.reseal(legacy, HERE, HERE)
    assert EncryptedSerializer(serde, KEY).loads_typed_at(resealed, HERE) == {"old": True}


def test_from_pycryptodome_aes_takes_a_key_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    enc = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    assert enc.loads_typed(enc.dumps_typed("v")) == "v"
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "k" * 32)
    from_env = EncryptedSerializer.from_pycryptodome_aes(serde)
    assert from_env.inner is serde
    assert EncryptedSerializer.from_key(b"k" * 32).loads_typed(from_env.dumps_typed(1)) == 1
    with pytest.raises(TypeError, match="AES-GCM"):
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, mode=2)
    monkeypatch.delenv("LANGGRAPH_AES_KEY")
    with pytest.raises(ValueError, match="LANGGRAPH_AES_KEY"):
        EncryptedSerializer.from_pycryptodome_aes()


def test_bad_key_is_explained() -> None:
    with pytest.raises(ValueError, match="16, 24 or 32 bytes, got 5 bytes"):
        EncryptedSerializer(serde, b"short")


def test_missing_cryptography_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(ImportError, match=r'pip install "pregelkit\[encryption\]"'):
        EncryptedSerializer(serde, KEY)


def test_repr_shows_configuration() -> None:
    assert "allowed_modules=" in repr(serde)
    assert "JsonPlusSerializer" in repr(EncryptedSerializer(serde, KEY))


def test_a_pickle_claiming_a_huge_memo_or_buffer_is_refused_before_allocating() -> None:
    # A tampered row could make the C unpickler allocate for a memo index or a
    # bytearray length its bytes cannot back: tens of GB for a 10-byte payload.
    memo_bomb = b"\x80\x05N" + b"r" + (2**31 - 5).to_bytes(4, "little") + b"."
    buffer_bomb = b"\x80\x05\x96" + (2**40).to_bytes(8, "little") + b"."
    for payload in (memo_bomb, buffer_bomb):
        with pytest.raises(SerdeError, match="corrupt or truncated"):
            JsonPlusSerializer().loads_typed(("pickle", payload))


def test_http_status_loads_in_a_process_that_never_imported_http() -> None:
    dumped = serde.dumps_typed({"status": http.HTTPStatus.NOT_FOUND})
    code = (
        "import sys\n"
        "from pregelkit.checkpoint.serde import JsonPlusSerializer\n"
        "assert 'http' not in sys.modules\n"
        f"value = JsonPlusSerializer().loads_typed({dumped!r})\n"
        "print(int(value['status']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "404"
