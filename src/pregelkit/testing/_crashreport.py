"""Reading the crash checker's logs (``_crashlog``) and judging one crash:
what had been saved when the process died, and what its resume did that the
uncrashed run did not."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Crash", "Log", "findings", "load_log", "result_of"]

CALL = "__call__"
PULL = "~__pregel_pull, "
PUSH = "~__pregel_push, "


@dataclass
class Log:
    events: list[dict[str, Any]]

    @property
    def saves(self) -> list[dict[str, Any]]:
        return [e for e in self.events if "save" in e]

    @property
    def effects(self) -> list[dict[str, Any]]:
        return [e for e in self.events if "effect" in e]

    def names(self) -> dict[str, str]:
        """Task id -> a name for messages: a call's function, a node's name."""
        names = {e["start"]: f"{e['name']!r}" for e in self.events if "start" in e}
        for save in self.saves:
            if save["kind"] != "writes":
                continue
            path, task = save["path"], save["task"]
            if save["call"]:
                names[task] = f"{save['call'].split('#')[0]!r}"
                parts = path.split(", ")
                if path.startswith(PUSH) and len(parts) >= 5 and parts[-2].isdigit():
                    names[task] += f" (call {int(parts[-2])} of {parts[2]!r})"
            elif path.startswith(PULL):
                names.setdefault(task, f"{path[len(PULL) :].split(', ')[0]!r}")
        return names


def load_log(path: str) -> Log:
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return Log([])
    return Log([json.loads(line) for line in lines if line])


@dataclass
class Crash:
    mode: str
    when: str
    k: int
    total: int
    thread: str
    log: str

    @property
    def resume_log(self) -> str:
        return self.log + ".resume"

    def title(self) -> str:
        return f"durability={self.mode!r}, SIGKILL {self.when} save point {self.k} of {self.total}"


def _done(save: dict[str, Any]) -> bool:
    # imported here: the pytest plugin loads this package in every test session
    from pregelkit.pregel._plan.algo import is_done_write

    return save["kind"] == "writes" and any(is_done_write(c) for c in save["channels"])


def describe(saves: list[dict[str, Any]], names: dict[str, str]) -> list[str]:
    """One phrase per save: what it committed."""
    out: list[str] = []
    step = -1
    for save in saves:
        if save["kind"] == "checkpoint":
            step = save["step"] if isinstance(save["step"], int) else step
            out.append(f"the checkpoint of step {save['step']} ({save['source']})")
            continue
        who = names.get(save["task"]) or f"task {save['task'][:8]}"
        channels = set(save["channels"]) - {CALL}
        what = (
            "the interrupt of"
            if "__interrupt__" in channels
            else "the error of"
            if "__error__" in channels
            else "the result of"
            if _done(save)
            else "the call record of"
        )
        out.append(f"{what} {who}, step {step + 1}")
    return out


def result_of(log: Log) -> tuple[str, Any, str]:
    """How a run ended, comparable across processes: ``("value", v, repr)``
    (interrupt ids, which differ from run to run, left out, and their order),
    ``("repr", None, repr)`` for a result that does not unpickle here,
    ``("error", None, message)``, or ``("none", None, "")`` for no end."""
    for event in reversed(log.events):
        if "error" in event:
            return ("error", None, event["error"])
        if "out" in event:
            if event["out"] is not None:
                try:
                    return (
                        "value",
                        _plain(pickle.loads(bytes.fromhex(event["out"]))),
                        event["repr"],
                    )
                except Exception:
                    pass  # a class this process cannot import: compared by its repr
            return ("repr", None, event["repr"])
    return ("none", None, "")


def _plain(value: Any) -> Any:
    from pregelkit.types import Interrupt

    if isinstance(value, Interrupt):
        return ("Interrupt", _plain(value.value))
    if isinstance(value, dict):
        plain = {k: _plain(v) for k, v in value.items()}
        if isinstance(plain.get("__interrupt__"), list | tuple):
            # parallel tasks interrupt in the order they happen to run
            plain["__interrupt__"] = sorted(plain["__interrupt__"], key=repr)
        return plain
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _same(a: tuple[str, Any, str], b: tuple[str, Any, str]) -> bool:
    if a[0] == b[0] == "value":
        return bool(a[1] == b[1])
    return a[0] == b[0] and a[2] == b[2]


def findings(crash: Crash, baseline: Log, expected: tuple[str, Any, str]) -> list[str]:
    """What the resume after ``crash`` did wrong; one message, or none."""
    crashed, resumed = load_log(crash.log), load_log(crash.resume_log)
    names = {**crashed.names(), **resumed.names()}
    saved = describe(crashed.saves, names)
    wrong: list[str] = []
    got = result_of(resumed)
    if got[0] == "none":
        wrong.append("the resume did not finish (its process died?)")
    elif got[0] == "error" and expected[0] != "error":
        wrong.append(f"the resume raised {got[2]}")
    elif not _same(got, expected):
        wrong.append(f"the resume returned {got[2]}, the uncrashed run {expected[2]}")
    wrong += _ran_again(crashed, resumed, names)
    wrong += _effects_again(crashed, resumed, names, saved)
    if not wrong:
        return []
    point = describe(baseline.saves, baseline.names())[crash.k - 1]
    if crash.when == "after" and len(saved) >= crash.k:
        point = saved[crash.k - 1]
    return [
        f"{crash.title()}: {point}\n  saved by then: {_listed(saved)}\n"
        + "\n".join(f"  - {w}" for w in wrong)
    ]


def _listed(saved: list[str]) -> str:
    if not saved:
        return "nothing"
    numbered = [f"[{i}] {s}" for i, s in enumerate(saved, 1)]
    if len(numbered) > 6:
        numbered = [*numbered[:2], f"... {len(numbered) - 5} more", *numbered[-3:]]
    return ", ".join(numbered)


def _ran_again(crashed: Log, resumed: Log, names: dict[str, str]) -> list[str]:
    done = {s["task"]: s["save"] for s in crashed.saves if _done(s)}
    again: list[str] = []
    for event in resumed.events:
        task = event.get("start")
        if isinstance(task, str) and task in done:
            who = names.get(task) or f"{event['name']!r}"
            again.append(
                f"task {who} ran again on resume, though its result was committed at save "
                f"point {done.pop(task)}"
            )
    return again


def _effects_again(
    crashed: Log, resumed: Log, names: dict[str, str], saved: list[str]
) -> list[str]:
    """Effects made again on resume that a committed save had come after, in
    the task that made them (its result) or in a call it made later."""
    repeated = {(e["effect"], e["task"]) for e in resumed.effects}
    out: list[str] = []
    for i, event in enumerate(crashed.events):
        key = (event.get("effect"), event.get("task"))
        if "effect" not in event or key[1] is None or key not in repeated:
            continue
        task = key[1]
        after = next(
            (
                e
                for e in crashed.events[i + 1 :]
                if e.get("kind") == "writes"
                and ((e["task"] == task and _done(e)) or e["path"].endswith(f", {task}"))
            ),
            None,
        )
        if after is None:
            continue
        repeated.discard(key)
        who = names.get(task) or f"task {task[:8]}"
        hint = (
            ": it runs in a body that runs again on every resume (its task calls are "
            "served from their saved results); move the effect into a @task"
            if after["task"] != task
            else ""
        )
        out.append(
            f"effect {key[0]!r} (in {who}) ran again on resume, though save point "
            f"{after['save']} ({saved[after['save'] - 1]}) had committed after it{hint}"
        )
    return out
