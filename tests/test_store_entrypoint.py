"""Every store through the functional API: ``entrypoint(store=...)``, the
injected ``store`` parameter of entrypoints and tasks, and ``get_store()``."""

from __future__ import annotations

from typing import Any

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.config import get_store
from pregelkit.func import entrypoint, task


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_sync_workflows_share_a_store(make_store: Any, arun: Any) -> None:
    s = make_store(index={"embed": _embed, "dims": 3, "fields": ["note"]})
    if s.is_async:
        _async_workflow(s.store, arun)
        return

    @task
    def note(user: str, text: str, store: Any) -> None:
        store.put(("notes", user), text, {"note": text})

    @entrypoint(checkpointer=InMemorySaver(), store=s.store)
    def visit(user: str, *, store: Any) -> dict[str, Any]:
        item = store.get(("visits",), user)
        count = (item.value["count"] if item else 0) + 1
        store.put(("visits",), user, {"count": count})
        note(user, f"visit {'a' * count}").result()
        assert get_store() is store
        best = store.search(("notes", user), query="aaa", limit=1)
        return {"count": count, "best": best[0].key}

    assert visit.invoke("ada", _config("t1")) == {"count": 1, "best": "visit a"}
    assert visit.invoke("ada", _config("t2")) == {"count": 2, "best": "visit aa"}
    assert visit.invoke("ada", _config("t3")) == {"count": 3, "best": "visit aaa"}
    assert s.store.get(("visits",), "ada").value == {"count": 3}


def _async_workflow(store_object: Any, arun: Any) -> None:
    @task
    async def note(user: str, text: str, store: Any) -> None:
        await store.aput(("notes", user), text, {"note": text})

    @entrypoint(checkpointer=InMemorySaver(), store=store_object)
    async def visit(user: str, *, store: Any) -> dict[str, Any]:
        item = await store.aget(("visits",), user)
        count = (item.value["count"] if item else 0) + 1
        await store.aput(("visits",), user, {"count": count})
        await note(user, f"visit {'a' * count}")
        assert get_store() is store
        best = await store.asearch(("notes", user), query="aaa", limit=1)
        return {"count": count, "best": best[0].key}

    assert arun(visit.ainvoke("ada", _config("t1"))) == {"count": 1, "best": "visit a"}
    assert arun(visit.ainvoke("ada", _config("t2"))) == {"count": 2, "best": "visit aa"}
    assert arun(visit.ainvoke("ada", _config("t3"))) == {"count": 3, "best": "visit aaa"}
    assert arun(store_object.aget(("visits",), "ada")).value == {"count": 3}


def _embed(texts: list[str]) -> list[list[float]]:
    return [[float(text.count("a")), 1.0, 0.0] for text in texts]
