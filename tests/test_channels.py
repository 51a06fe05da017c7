"""Channel semantics: how each kind folds a step's writes, and survives checkpoints."""

from __future__ import annotations

import copy
import operator
import pickle
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NotRequired

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pregelkit._internal._typing import MISSING
from pregelkit.channels import (
    AnyValue,
    BaseChannel,
    BinaryOperatorAggregate,
    EphemeralValue,
    LastValue,
    LastValueAfterFinish,
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
    Topic,
    UntrackedValue,
)
from pregelkit.errors import EmptyChannelError, InvalidUpdateError
from pregelkit.types import Overwrite

Chan = BaseChannel[Any, Any, Any]


def keyed(chan: Chan, key: str) -> Chan:
    chan.key = key
    return chan


def value_of(chan: Chan) -> Any:
    """The channel's value, or MISSING: lets tests compare empty and full alike."""
    try:
        return chan.get()
    except EmptyChannelError:
        return MISSING


ALL_FACTORIES: list[Callable[[], Chan]] = [
    lambda: LastValue(int),
    lambda: LastValueAfterFinish(int),
    lambda: EphemeralValue(int),
    lambda: AnyValue(int),
    lambda: UntrackedValue(int),
    lambda: Topic(int),
    lambda: Topic(int, accumulate=True),
    lambda: BinaryOperatorAggregate(int, operator.add),
    lambda: NamedBarrierValue(str, {"a", "b"}),
    lambda: NamedBarrierValueAfterFinish(str, {"a", "b"}),
]


# --- behaviour shared by every channel -------------------------------------------------


@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_instances_use_slots_only(factory: Callable[[], Chan]) -> None:
    assert not hasattr(factory(), "__dict__")


@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_missing_checkpoint_gives_a_channel_equal_to_a_fresh_one(
    factory: Callable[[], Chan],
) -> None:
    fresh = keyed(factory(), "k")
    restored = fresh.from_checkpoint(MISSING)
    assert type(restored) is type(fresh)
    assert restored.key == "k"
    assert restored == fresh
    assert value_of(restored) == value_of(fresh)
    assert restored.checkpoint() == fresh.checkpoint()


@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_empty_channel_checkpoints_as_missing(factory: Callable[[], Chan]) -> None:
    chan = factory()
    if isinstance(chan, BinaryOperatorAggregate):
        chan = BinaryOperatorAggregate(int | None, operator.add)
    assert not chan.is_available()
    assert chan.checkpoint() is MISSING
    with pytest.raises(EmptyChannelError):
        chan.get()


@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_copies_survive_pickle_and_deepcopy(factory: Callable[[], Chan]) -> None:
    chan = keyed(factory(), "k")
    for clone in (pickle.loads(pickle.dumps(chan)), copy.deepcopy(chan)):
        assert type(clone) is type(chan)
        assert clone == chan
        assert clone.key == "k"
        assert clone.clears_on_step == chan.clears_on_step


def test_value_and_update_types() -> None:
    assert LastValue(int).ValueType is int
    assert LastValue(int).UpdateType is int
    assert EphemeralValue(str).UpdateType is str
    assert BinaryOperatorAggregate(list, operator.add).ValueType is list
    assert Topic(int).ValueType == Sequence[int]
    assert Topic(int).UpdateType == int | list[int]


def test_equality_compares_kind_and_configuration() -> None:
    assert LastValue(int) == LastValue(str)
    assert LastValue(int) != AnyValue(int)
    assert LastValue(int) != LastValueAfterFinish(int)
    assert EphemeralValue(int) != EphemeralValue(int, guard=False)
    assert UntrackedValue(int) != UntrackedValue(int, guard=False)
    assert Topic(int) == Topic(int)
    assert Topic(int) != Topic(int, accumulate=True)
    assert NamedBarrierValue(str, {"a"}) != NamedBarrierValue(str, {"a", "b"})
    assert NamedBarrierValue(str, {"a"}) != NamedBarrierValueAfterFinish(str, {"a"})
    assert BinaryOperatorAggregate(int, operator.add) == BinaryOperatorAggregate(int, operator.add)
    assert BinaryOperatorAggregate(int, operator.add) != BinaryOperatorAggregate(int, operator.mul)
    # Equal channels must be interchangeable as dict keys.
    assert len({Topic(int), Topic(int), Topic(int, accumulate=True)}) == 2


def test_binop_treats_separately_written_lambdas_as_the_same_reducer() -> None:
    first = BinaryOperatorAggregate(list, lambda a, b: a + b)
    second = BinaryOperatorAggregate(list, lambda a, b: a + b)
    assert first == second
    assert hash(first) == hash(second)


def test_package_exports_every_channel() -> None:
    import pregelkit.channels as channels

    for name in channels.__all__:
        assert getattr(channels, name).__name__ == name


# --- LastValue -------------------------------------------------------------------------


def test_last_value_keeps_a_single_write_until_the_next() -> None:
    chan = LastValue(int, "x")
    assert chan.clears_on_step is False
    assert chan.update([1]) is True
    assert chan.update([]) is False
    assert chan.get() == 1
    assert chan.update([2]) is True
    assert chan.get() == 2


def test_last_value_treats_none_as_a_value() -> None:
    chan = LastValue(type(None))
    chan.update([None])
    assert chan.is_available()
    assert chan.get() is None
    assert chan.checkpoint() is None
    assert chan.from_checkpoint(None).is_available()


def test_last_value_rejects_two_writes_naming_the_key() -> None:
    chan = LastValue(int, key="b")
    chan.update([1])
    with pytest.raises(InvalidUpdateError, match="At key 'b': Can receive only one value per step"):
        chan.update([2, 3])
    assert chan.get() == 1


def test_last_value_copy_is_independent() -> None:
    chan = LastValue(int, "x")
    chan.update([1])
    clone = chan.copy()
    clone.update([2])
    assert (chan.get(), clone.get()) == (1, 2)
    assert clone.key == "x"


# --- LastValueAfterFinish --------------------------------------------------------------


def test_last_value_after_finish_is_hidden_until_finish_and_consumed_once() -> None:
    chan = LastValueAfterFinish(int, "d")
    assert chan.finish() is False
    assert chan.update([1, 2]) is True
    assert not chan.is_available()
    with pytest.raises(EmptyChannelError):
        chan.get()
    assert chan.consume() is False
    assert chan.finish() is True
    assert chan.finish() is False
    assert chan.get() == 2
    assert chan.consume() is True
    assert not chan.is_available()
    assert chan.checkpoint() is MISSING


def test_last_value_after_finish_new_write_waits_for_the_next_finish() -> None:
    chan = LastValueAfterFinish(int)
    chan.update([1])
    chan.finish()
    chan.update([5])
    assert not chan.is_available()
    chan.finish()
    assert chan.get() == 5


def test_last_value_after_finish_checkpoint_keeps_the_finished_flag() -> None:
    chan = LastValueAfterFinish(int)
    chan.update([3])
    assert chan.from_checkpoint(chan.checkpoint()).is_available() is False
    chan.finish()
    restored = chan.from_checkpoint(chan.checkpoint())
    assert restored.get() == 3
    assert restored.consume() is True


# --- EphemeralValue --------------------------------------------------------------------


def test_ephemeral_value_lasts_one_step() -> None:
    chan = EphemeralValue(int)
    assert chan.clears_on_step is True
    assert chan.update([]) is False
    assert chan.update([1]) is True
    assert chan.get() == 1
    assert chan.update([]) is True
    assert not chan.is_available()
    assert chan.update([]) is False


def test_ephemeral_value_guard_rejects_two_writes_naming_the_key() -> None:
    chan = keyed(EphemeralValue(int), "branch:to:a")
    with pytest.raises(InvalidUpdateError, match=r"At key 'branch:to:a'.*guard=False"):
        chan.update([1, 2])
    assert not chan.is_available()


def test_ephemeral_value_without_guard_keeps_the_last_write() -> None:
    chan = EphemeralValue(int, guard=False)
    chan.update([1, 2])
    assert chan.get() == 2
    assert chan.from_checkpoint(chan.checkpoint()) == chan


# --- AnyValue --------------------------------------------------------------------------


def test_any_value_keeps_the_last_write_and_clears_on_an_empty_step() -> None:
    chan = AnyValue(int)
    assert chan.clears_on_step is True
    assert chan.update([1, 2, 3]) is True
    assert chan.get() == 3
    assert chan.update([]) is True
    assert not chan.is_available()
    assert chan.update([]) is False


# --- UntrackedValue --------------------------------------------------------------------


def test_untracked_value_is_never_checkpointed() -> None:
    chan = UntrackedValue(object, key="client")
    client = object()
    assert chan.update([client]) is True
    assert chan.update([]) is False
    assert chan.get() is client
    assert chan.checkpoint() is MISSING
    restored = chan.from_checkpoint(client)
    assert not restored.is_available()
    assert restored.key == "client"


def test_untracked_value_copy_keeps_the_value_within_a_run() -> None:
    chan = UntrackedValue(object, guard=False)
    client = object()
    chan.update([client])
    clone = chan.copy()
    assert clone.get() is client
    assert clone.guard is False


def test_untracked_value_guard_rejects_two_writes_naming_the_key() -> None:
    chan = keyed(UntrackedValue(int), "secret")
    with pytest.raises(InvalidUpdateError, match="At key 'secret'"):
        chan.update([1, 2])
    unguarded = UntrackedValue(int, guard=False)
    unguarded.update([1, 2])
    assert unguarded.get() == 2


# --- Topic -----------------------------------------------------------------------------


def test_topic_flattens_list_writes_one_level_only() -> None:
    chan = Topic(Any)
    assert chan.update([1, [2, [3]], (4, 5), []]) is True
    assert chan.get() == [1, 2, [3], (4, 5)]


def test_topic_without_accumulate_holds_one_step() -> None:
    chan = Topic(int)
    assert chan.clears_on_step is True
    assert type(chan).clears_on_step is True
    chan.update([1, 2])
    chan.update([3])
    assert chan.get() == [3]
    assert chan.update([]) is True
    assert not chan.is_available()
    with pytest.raises(EmptyChannelError):
        chan.get()
    assert chan.update([]) is False
    assert chan.update([[]]) is False


def test_topic_with_accumulate_keeps_growing_and_opts_out_of_step_notices() -> None:
    chan = Topic(int, accumulate=True)
    assert isinstance(chan, Topic)
    assert chan.accumulate is True
    assert chan.clears_on_step is False
    assert type(chan).clears_on_step is False
    chan.update([1])
    chan.update([[2, 3]])
    assert chan.update([]) is False
    assert chan.get() == [1, 2, 3]
    restored = chan.from_checkpoint(chan.checkpoint())
    assert restored.accumulate is True
    assert restored.clears_on_step is False
    assert restored.get() == [1, 2, 3]


def test_topic_results_are_snapshots() -> None:
    chan = Topic(int, accumulate=True)
    chan.update([1])
    got, saved = chan.get(), chan.checkpoint()
    got.append(99)  # type: ignore[attr-defined]
    chan.update([2])
    assert saved == [1]
    assert chan.get() == [1, 2]
    restored = chan.from_checkpoint(saved)
    restored.update([3])
    assert saved == [1]


# --- BinaryOperatorAggregate -----------------------------------------------------------


@pytest.mark.parametrize(
    ("typ", "start"),
    [
        (int, 0),
        (list, []),
        (list[int], []),
        (Sequence[int], []),
        (Annotated[list[int], "doc"], []),
        (NotRequired[Annotated[dict[str, int], "doc"]], {}),
    ],
)
def test_binop_starts_from_the_empty_value_of_its_type(typ: Any, start: Any) -> None:
    chan = BinaryOperatorAggregate(typ, operator.add)
    assert chan.clears_on_step is False
    assert chan.get() == start
    assert chan.checkpoint() == start


def test_binop_without_a_default_keeps_the_first_write_as_is() -> None:
    calls: list[tuple[Any, Any]] = []

    def reducer(a: Any, b: Any) -> Any:
        calls.append((a, b))
        return a + b

    chan = BinaryOperatorAggregate(int | None, reducer)
    assert not chan.is_available()
    chan.update([1, 2])
    assert chan.get() == 3
    assert calls == [(1, 2)]


def test_binop_reduces_writes_in_order() -> None:
    chan = BinaryOperatorAggregate(list, operator.add)
    assert chan.update([]) is False
    assert chan.update([[1], [2]]) is True
    assert chan.update([[3]]) is True
    assert chan.get() == [1, 2, 3]


@pytest.mark.parametrize("wrap", [Overwrite, lambda v: {"__overwrite__": v}])
def test_binop_overwrite_replaces_the_value_and_wins_its_step(wrap: Callable[[Any], Any]) -> None:
    chan = BinaryOperatorAggregate(list, operator.add)
    chan.update([[1, 2]])
    assert chan.update([[3], wrap([9]), [4]]) is True
    assert chan.get() == [9]
    chan.update([[5]])
    assert chan.get() == [9, 5]


def test_binop_overwrite_on_an_empty_channel_is_unwrapped() -> None:
    chan = BinaryOperatorAggregate(int | None, operator.add)
    chan.update([Overwrite(4)])
    assert chan.get() == 4


def test_binop_dict_with_other_keys_is_an_ordinary_write() -> None:
    chan = BinaryOperatorAggregate(dict, lambda a, b: {**a, **b})
    chan.update([{"__overwrite__": 1, "x": 2}])
    assert chan.get() == {"__overwrite__": 1, "x": 2}


def test_binop_two_overwrites_in_a_step_fail_naming_the_key_and_change_nothing() -> None:
    chan = keyed(BinaryOperatorAggregate(list, operator.add), "items")
    chan.update([[1]])
    with pytest.raises(InvalidUpdateError, match="At key 'items': Can receive only one Overwrite"):
        chan.update([[2], Overwrite([]), {"__overwrite__": [3]}])
    assert chan.get() == [1]


def test_binop_failing_reducer_leaves_the_value_unchanged() -> None:
    chan = BinaryOperatorAggregate(int, operator.add)
    chan.update([1])
    with pytest.raises(TypeError):
        chan.update([2, "x"])
    assert chan.get() == 1


def test_binop_checkpoint_restores_over_the_default() -> None:
    chan = keyed(BinaryOperatorAggregate(int, operator.add), "total")
    chan.update([5])
    restored = chan.from_checkpoint(chan.checkpoint())
    assert restored.get() == 5
    assert restored.key == "total"
    assert restored.operator is operator.add


# --- NamedBarrierValue -----------------------------------------------------------------


def test_named_barrier_opens_when_every_name_was_written() -> None:
    chan = NamedBarrierValue(str, {"a", "b"})
    assert chan.clears_on_step is False
    assert chan.update(["a"]) is True
    assert not chan.is_available()
    assert chan.consume() is False
    assert chan.update(["a"]) is False
    assert chan.update([]) is False
    assert chan.update(["b", "a"]) is True
    assert chan.is_available()
    assert chan.get() is None
    assert chan.consume() is True
    assert not chan.is_available()
    assert chan.checkpoint() is MISSING


def test_named_barrier_rejects_an_unknown_name_naming_key_and_name() -> None:
    chan = keyed(NamedBarrierValue(str, {"a", "b"}), "join:a+b:c")
    with pytest.raises(InvalidUpdateError, match=r"At key 'join:a\+b:c': 'z' is not one of .*'a'"):
        chan.update(["a", "z"])
    assert chan.checkpoint() is MISSING


def test_named_barrier_checkpoint_is_a_snapshot() -> None:
    chan = NamedBarrierValue(str, {"a", "b"})
    chan.update(["a"])
    saved = chan.checkpoint()
    chan.update(["b"])
    assert saved == {"a"}
    restored = chan.from_checkpoint(saved)
    assert not restored.is_available()
    restored.update(["b"])
    assert restored.is_available()
    assert saved == {"a"}


def test_named_barrier_after_finish_opens_only_after_finish() -> None:
    chan = NamedBarrierValueAfterFinish(str, {"a", "b"})
    chan.update(["a"])
    assert chan.finish() is False
    chan.update(["b"])
    assert not chan.is_available()
    assert chan.consume() is False
    restored = chan.from_checkpoint(chan.checkpoint())
    assert restored.finish() is True
    assert restored.finish() is False
    assert restored.get() is None
    restored = restored.from_checkpoint(restored.checkpoint())
    assert restored.consume() is True
    assert not restored.is_available()
    assert restored.checkpoint() is MISSING


def test_named_barrier_after_finish_rejects_an_unknown_name() -> None:
    chan = keyed(NamedBarrierValueAfterFinish(str, {"a"}), "k")
    with pytest.raises(InvalidUpdateError, match="At key 'k': 'b'"):
        chan.update(["b"])


# --- properties: channels against plain-Python models ----------------------------------

ints = st.integers(-1000, 1000)
small_steps = st.lists(st.lists(ints, max_size=4), max_size=8)


def run(chan: Chan, steps: Sequence[Sequence[Any]]) -> Chan:
    for step in steps:
        chan.update(step)
    return chan


@given(small_steps)
def test_binop_add_on_ints_is_a_fold(steps: list[list[int]]) -> None:
    chan = run(BinaryOperatorAggregate(int, operator.add), steps)
    assert chan.get() == sum(sum(step) for step in steps)


@given(st.lists(st.lists(st.lists(ints, max_size=3), max_size=4), max_size=8))
def test_binop_add_on_lists_is_a_concatenation(steps: list[list[list[int]]]) -> None:
    chan = run(BinaryOperatorAggregate(list, operator.add), steps)
    assert chan.get() == [x for step in steps for update in step for x in update]


topic_updates = st.lists(st.one_of(ints, st.lists(ints, max_size=3)), max_size=4)


def flat(step: Sequence[Any]) -> list[Any]:
    return [x for update in step for x in (update if isinstance(update, list) else [update])]


@given(st.lists(topic_updates, max_size=8))
def test_accumulating_topic_is_the_concatenation(steps: list[list[Any]]) -> None:
    chan = run(Topic(int, accumulate=True), steps)
    assert value_of(chan) == (flat([u for step in steps for u in step]) or MISSING)


@given(st.lists(topic_updates, max_size=8))
def test_topic_holds_the_last_step(steps: list[list[Any]]) -> None:
    chan = run(Topic(int), steps)
    last = flat(steps[-1]) if steps else []
    assert value_of(chan) == (last or MISSING)


@given(st.lists(topic_updates, max_size=8))
def test_topic_not_notified_of_empty_steps_holds_the_last_non_empty_one(
    steps: list[list[Any]],
) -> None:
    chan = run(Topic(int), [step for step in steps if step])
    written = [flat(step) for step in steps if step]
    assert value_of(chan) == ((written[-1] if written else []) or MISSING)


@given(st.lists(st.lists(ints, max_size=2), max_size=8))
def test_last_value_is_the_last_single_write(steps: list[list[int]]) -> None:
    chan: Chan = LastValue(int, "x")
    expected: Any = MISSING
    for step in steps:
        if len(step) > 1:
            with pytest.raises(InvalidUpdateError, match="At key 'x'"):
                chan.update(step)
        else:
            assert chan.update(step) is bool(step)
            if step:
                expected = step[0]
        assert value_of(chan) == expected


names = st.sampled_from(["a", "b", "c"])


@given(st.lists(st.tuples(st.lists(names, max_size=3), st.booleans()), max_size=10))
def test_named_barrier_matches_a_set_model(ops: list[tuple[list[str], bool]]) -> None:
    chan = NamedBarrierValue(str, {"a", "b", "c"})
    seen: set[str] = set()
    for written, consume in ops:
        assert chan.update(written) is not set(written).issubset(seen)
        seen |= set(written)
        assert chan.is_available() is (seen == {"a", "b", "c"})
        if consume:
            assert chan.consume() is (seen == {"a", "b", "c"})
            if seen == {"a", "b", "c"}:
                seen = set()


# Each scenario: a channel factory and the updates its steps may contain (kept to what
# the channel accepts, so the properties are about values, not errors).
SCENARIOS: dict[str, tuple[Callable[[], Chan], st.SearchStrategy[list[Any]]]] = {
    "LastValue": (lambda: LastValue(int), st.lists(ints, max_size=1)),
    "LastValueAfterFinish": (lambda: LastValueAfterFinish(int), st.lists(ints, max_size=3)),
    "EphemeralValue": (lambda: EphemeralValue(int), st.lists(ints, max_size=1)),
    "EphemeralValue(guard=False)": (
        lambda: EphemeralValue(int, guard=False),
        st.lists(ints, max_size=3),
    ),
    "AnyValue": (lambda: AnyValue(int), st.lists(ints, max_size=3)),
    "Topic": (lambda: Topic(int), topic_updates),
    "Topic(accumulate=True)": (lambda: Topic(int, accumulate=True), topic_updates),
    "BinaryOperatorAggregate(int)": (
        lambda: BinaryOperatorAggregate(int, operator.add),
        st.lists(st.one_of(ints, st.builds(Overwrite, ints)), max_size=3).filter(
            lambda step: sum(isinstance(u, Overwrite) for u in step) <= 1
        ),
    ),
    "BinaryOperatorAggregate(list)": (
        lambda: BinaryOperatorAggregate(list, operator.add),
        st.lists(st.lists(ints, max_size=2), max_size=3),
    ),
    "NamedBarrierValue": (
        lambda: NamedBarrierValue(str, {"a", "b", "c"}),
        st.lists(names, max_size=3),
    ),
    "NamedBarrierValueAfterFinish": (
        lambda: NamedBarrierValueAfterFinish(str, {"a", "b", "c"}),
        st.lists(names, max_size=3),
    ),
}

# A step of a run: the writes, then optionally the loop's consume and finish notices.
Step = tuple[list[Any], bool, bool]


@st.composite
def scenario_runs(draw: st.DrawFn) -> tuple[str, list[Step], int]:
    name = draw(st.sampled_from(sorted(SCENARIOS)))
    updates = SCENARIOS[name][1]
    steps = draw(st.lists(st.tuples(updates, st.booleans(), st.booleans()), max_size=8))
    cut = draw(st.integers(0, len(steps)))
    return name, steps, cut


def apply(chan: Chan, step: Step) -> None:
    written, consume, finish = step
    chan.update(written)
    if consume:
        chan.consume()
    if finish:
        chan.finish()


def state(chan: Chan) -> tuple[Any, Any, bool]:
    return value_of(chan), chan.checkpoint(), chan.is_available()


@given(scenario_runs())
def test_checkpoint_and_restore_anywhere_does_not_change_the_outcome(
    run_: tuple[str, list[Step], int],
) -> None:
    name, steps, cut = run_
    straight = SCENARIOS[name][0]()
    resumed = SCENARIOS[name][0]()
    for i, step in enumerate(steps):
        if i == cut:
            resumed = resumed.from_checkpoint(resumed.checkpoint())
        apply(straight, step)
        apply(resumed, step)
    if cut == len(steps):
        resumed = resumed.from_checkpoint(resumed.checkpoint())
    assert state(resumed) == state(straight)
    assert resumed == straight


@given(scenario_runs())
def test_copy_anywhere_is_independent_of_the_original(run_: tuple[str, list[Step], int]) -> None:
    name, steps, cut = run_
    chan = SCENARIOS[name][0]()
    for step in steps[:cut]:
        apply(chan, step)
    before = state(chan)
    clone = chan.copy()
    assert state(clone) == before
    for step in steps[cut:]:
        apply(clone, step)
    assert state(chan) == before


@given(scenario_runs())
def test_only_channels_that_clear_on_step_change_on_an_empty_step(
    run_: tuple[str, list[Step], int],
) -> None:
    name, steps, cut = run_
    chan = SCENARIOS[name][0]()
    for step in steps[:cut]:
        apply(chan, step)
    before = state(chan)
    changed = chan.update([])
    assert changed is (state(chan) != before)
    if not chan.clears_on_step:
        assert changed is False
    else:
        # Every channel that clears does so exactly when it held something.
        assert changed is before[2]
        assert not chan.is_available()
