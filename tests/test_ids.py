"""Checkpoint timestamps: the fast formatter writes what datetime writes; a
task call's id hashed from its caller's prefix is the id it always had."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from pregelkit._internal import _ids
from pregelkit._internal._ids import id_prefix, task_id, task_id_after, utc_now_iso


@pytest.mark.parametrize(
    "ns",
    [
        1_795_658_131_953_800_123,  # a fraction
        1_795_658_131_000_000_999,  # a whole second: isoformat leaves the fraction out
        1_795_658_131_000_001_000,  # one microsecond
        1_795_658_131_999_999_999,  # the last microsecond of a second (floor, not round)
        946_684_799_999_999_000,  # the second before 2000-01-01
    ],
)
def test_utc_now_iso_is_datetime_isoformat(monkeypatch: pytest.MonkeyPatch, ns: int) -> None:
    monkeypatch.setattr(_ids, "_second", (-1, ""))
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    expected = datetime.fromtimestamp(ns // 1_000_000_000, UTC).replace(
        microsecond=ns // 1000 % 1_000_000
    )
    assert utc_now_iso() == expected.isoformat()
    assert utc_now_iso() == expected.isoformat()  # the cached second gives the same text


def test_utc_now_iso_follows_the_clock_across_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ids, "_second", (-1, ""))
    now = [1_795_658_131_500_000_000]
    monkeypatch.setattr(time, "time_ns", lambda: now[0])
    first = utc_now_iso()
    now[0] += 1_000_000_000
    second = utc_now_iso()
    assert first == "2026-11-26T01:55:31.500000+00:00"
    assert second == "2026-11-26T01:55:32.500000+00:00"
    assert datetime.fromisoformat(second) > datetime.fromisoformat(first)


@pytest.mark.parametrize(
    "parts",
    [
        ("", "3", "__pregel_push", "~__pregel_pull, main"),
        ("outer:1f2e|inner", "12", "__pregel_push", "~__pregel_push, ~a, 0000000002"),
        ("ns", "0", "é", "x"),
    ],
)
def test_a_calls_id_from_its_callers_prefix_is_its_task_id(parts: tuple[str, ...]) -> None:
    """Task ids are saved: the ids of a task's calls, hashed from a prefix
    made once per caller, are the ids ``task_id`` gives the same parts."""
    prefix = id_prefix(b"1ef0c5a2-3b4d-6e7f-8a9b-0c1d2e3f4a5b", *parts)
    for idx in (0, 1, 9, 10, 12345):
        assert task_id_after(prefix, str(idx)) == task_id(
            b"1ef0c5a2-3b4d-6e7f-8a9b-0c1d2e3f4a5b", *parts, str(idx)
        )
