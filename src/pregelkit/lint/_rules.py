"""The rules: which calls read something a replay cannot see again, and the
hint each finding gives. Names are dotted as imported (``_names``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    code: str
    title: str
    hint: str


CLOCK = Rule(
    "PK001",
    "reads the wall clock",
    "a replay reads another time: move it into a @task (its result is recorded) "
    "or pass the time in as input",
)
RANDOM = Rule(
    "PK002",
    "draws a random value",
    "a replay draws another one: move it into a @task (its result is recorded) "
    "or pass the value in as input",
)
IO = Rule(
    "PK003",
    "does I/O",
    "it runs again on every replay and may see other data: move it into a @task",
)
UNORDERED = Rule(
    "PK004",
    "iterates in an order that is not recorded, feeding task calls",
    "a replay may call the tasks in another order: iterate over sorted(...) "
    "(or get the items from a @task)",
)
MUTATION = Rule(
    "PK005",
    "mutates the workflow's input",
    "a replay starts from the saved input, not the mutated one: work on a copy "
    "(e.g. list(x), dict(x), copy.deepcopy(x))",
)
INTERRUPT_LOOP = Rule(
    "PK006",
    "is called in a loop whose count depends on values that are not recorded",
    "a replay may ask a different number of questions and match answers to the wrong ones: "
    "make the loop depend on the input, task results or interrupt answers",
)

RULES = (CLOCK, RANDOM, IO, UNORDERED, MUTATION, INTERRUPT_LOOP)

_CLOCK_CALLS = frozenset(
    f"time.{name}"
    for name in (
        "time",
        "time_ns",
        "monotonic",
        "monotonic_ns",
        "perf_counter",
        "perf_counter_ns",
        "process_time",
        "process_time_ns",
        "thread_time",
        "thread_time_ns",
    )
) | {
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "datetime.date.today",
}
# without a time argument these read the clock
_CLOCK_WITHOUT_ARGS = frozenset(
    {"time.localtime", "time.gmtime", "time.ctime", "time.asctime", "time.strftime"}
)

_RANDOM_CALLS = frozenset({"uuid.uuid1", "uuid.uuid4", "os.urandom", "os.getrandom"})
_RANDOM_MODULES = ("random.", "secrets.", "numpy.random.")
# seeded generators are deterministic: flagged only without a seed
_SEEDABLE = frozenset({"Random", "default_rng", "RandomState", "Generator", "seed"})

_IO_CALLS = frozenset(
    {"builtins.open", "builtins.input", "io.open", "os.system", "os.popen", "os.remove"}
    | {"os.unlink", "os.rename", "os.replace", "os.makedirs", "os.mkdir", "os.rmdir"}
    | {"os.listdir", "os.scandir", "os.walk", "os.startfile", "os.read", "os.write"}
    | {"os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.getsize"}
    | {"os.path.getmtime", "glob.glob", "glob.iglob", "urllib.request.urlopen"}
    | {"urllib.request.urlretrieve"}
)
_IO_MODULES = (
    "socket.",
    "subprocess.",
    "requests.",
    "httpx.",
    "aiohttp.",
    "http.client.",
    "shutil.",
    "sqlite3.",
    "psycopg.",
    "psycopg2.",
    "smtplib.",
    "ftplib.",
    "aiofiles.",
)
# calls on a path object: these names belong to pathlib alone
PATH_IO_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes"})
# these read or write only on something known to be a Path
PATH_ONLY_METHODS = frozenset(
    {"open", "exists", "is_file", "is_dir", "stat", "unlink", "mkdir", "touch", "rmdir"}
    | {"iterdir", "glob", "rglob", "rename", "replace"}
)
PATH_TYPES = frozenset({"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath"})

UNORDERED_CALLS = frozenset(
    {"builtins.set", "builtins.frozenset", "os.listdir", "os.scandir", "glob.glob", "glob.iglob"}
)
UNORDERED_METHODS = frozenset({"iterdir", "glob", "rglob"})
SET_METHODS = frozenset({"union", "intersection", "difference", "symmetric_difference"})
# these keep their argument's order (so its lack of one)
ORDER_KEEPING = frozenset(
    f"builtins.{name}" for name in ("list", "tuple", "iter", "enumerate", "zip", "reversed")
)
ORDER_KEEPING_MAPS = frozenset({"builtins.map", "builtins.filter"})

INPUT_MUTATORS = frozenset(
    {"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update"}
    | {"setdefault", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"}
    | {"difference_update", "intersection_update", "symmetric_difference_update"}
)
# an augmented assignment to a parameter of these types rebinds it: no mutation
IMMUTABLE_ANNOTATIONS = frozenset(
    {"int", "float", "str", "bytes", "bool", "complex", "tuple", "frozenset"}
)


def classify(qualified: str, call: ast.Call) -> Rule | None:
    """The rule a call to ``qualified`` (a dotted name) breaks, if any."""
    if qualified in _CLOCK_CALLS:
        return CLOCK
    if qualified in _CLOCK_WITHOUT_ARGS:
        time_args = call.args[1:] if qualified == "time.strftime" else call.args
        return None if time_args or call.keywords else CLOCK
    if qualified in _RANDOM_CALLS:
        return RANDOM
    if qualified == "secrets.compare_digest":  # a comparison, not a draw
        return None
    if qualified.startswith(_RANDOM_MODULES):
        seeded = qualified.rpartition(".")[2] in _SEEDABLE and (call.args or call.keywords)
        return None if seeded else RANDOM
    if qualified in _IO_CALLS:
        return IO
    if qualified.startswith(_IO_MODULES) and not _builds_a_value(qualified):
        return IO
    return None


# what an I/O module builds without doing I/O: its errors, a request or URL not sent yet
_VALUES = frozenset({"Request", "URL", "Headers", "Timeout", "Limits", "Cookies", "QueryParams"})


def _builds_a_value(qualified: str) -> bool:
    last = qualified.rpartition(".")[2]
    return last in _VALUES or last.endswith(("Error", "Exception", "Warning"))
