"""Versioning a workflow while threads are in flight: ``patched`` and ``deprecate_patch``.

A resumed run replays its recorded task calls by position, so new code that
calls different tasks would not match the threads recorded by the old code.
``patched("id")`` lets one deployment hold both: it is True where the run is
new to this point (it records a marker in the call sequence) and False
where the thread was recorded by the code before the patch. Temporal's
``workflow.patched`` / ``deprecate_patch`` are the model.
"""

from __future__ import annotations

from pregelkit._internal._current import require_scope

__all__ = ["deprecate_patch", "patched"]


def _check(patch_id: object, what: str) -> str:
    if not isinstance(patch_id, str) or not patch_id:
        raise TypeError(
            f"{what}() takes a non-empty string id such as 'new-pricing', got {patch_id!r}"
        )
    return patch_id


def patched(patch_id: str) -> bool:
    """Whether this run takes the new code path of patch ``patch_id``.

    True for a run that reaches this point for the first time under code that
    has the patch (the decision is recorded, so its replays are True too);
    False when replaying a run recorded before the patch existed. Call it in
    the entrypoint (or a task) at the point where the code changed::

        if patched("new-pricing"):
            price = new_price(order).result()
        else:
            price = old_price(order).result()
    """
    patch_id = _check(patch_id, "patched")
    scope = require_scope("patched()")
    runner = scope.run.runner
    if runner is None:
        return True
    return bool(runner.patch_marker(scope.task, patch_id, deprecated=False))


def deprecate_patch(patch_id: str) -> None:
    """Mark that every thread recorded before patch ``patch_id`` has finished.

    Replace ``if patched(id): new() else: old()`` with ``deprecate_patch(id)``
    followed by ``new()``: runs recorded with the marker replay (the marker is
    consumed), new runs record nothing. Remove the call entirely once no thread
    recorded with the marker is in flight either.
    """
    patch_id = _check(patch_id, "deprecate_patch")
    scope = require_scope("deprecate_patch()")
    runner = scope.run.runner
    if runner is not None:
        runner.patch_marker(scope.task, patch_id, deprecated=True)
