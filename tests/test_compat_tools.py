"""The compatibility harness (tools/compat): the rename, the sorting of
LangGraph's tests into scopes, and the missing-name placeholders."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools" / "compat"
sys.path.insert(0, str(TOOLS))

from classify import classify  # noqa: E402
from rename import rename_source  # noqa: E402
from report import _short  # noqa: E402


def test_rename_touches_module_paths_only() -> None:
    source = textwrap.dedent(
        """\
        from langgraph.types import Command
        import langgraph.pregel as pregel
        from langgraph import errors
        from langchain_core.runnables import RunnableConfig
        mocker.patch("langgraph.pregel._loop.sleep")
        meta = {"langgraph_step": 1, "pkg": "langgraph-checkpoint", "file": "langgraph.json"}
        """
    )
    assert rename_source(source) == textwrap.dedent(
        """\
        from pregelkit.types import Command
        import pregelkit.pregel as pregel
        from pregelkit import errors
        from pregelkit.config import RunnableConfig
        mocker.patch("pregelkit.pregel._loop.sleep")
        meta = {"langgraph_step": 1, "pkg": "langgraph-checkpoint", "file": "langgraph.json"}
        """
    )


def test_classify_by_what_each_test_reaches(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "helpers.py").write_text("from langchain_core.messages import AIMessage\n")
    (tests / "test_mod.py").write_text(
        textwrap.dedent(
            """\
            from langgraph.graph import StateGraph
            from langgraph.func import entrypoint
            from langgraph.pregel._loop import PregelLoop
            from langchain_core.runnables import RunnableConfig
            from tests.helpers import AIMessage

            import pytest

            @pytest.fixture(autouse=True)
            def reset():
                from langgraph.channels._private import cache

            def build():
                return StateGraph(dict)

            def test_graph():
                build()

            def test_func(config: RunnableConfig):
                entrypoint()

            def test_private(mocker):
                mocker.patch("langgraph.pregel._algo.x")

            def test_helper():
                AIMessage

            def test_patches_a_private_method(monkeypatch, saver):
                monkeypatch.setattr(saver, "_load_checkpoint_tuple", lambda v: v)

            def test_patches_public_and_dunder(monkeypatch, saver):
                monkeypatch.setattr(saver, "serde", None)
                setattr(saver, "__doc__", "")

            class TestBox:
                def test_loop(self):
                    PregelLoop
            """
        )
    )
    found = classify(tests)
    assert found[("tests/test_mod.py", "test_graph")].out_of_scope == "StateGraph (langgraph.graph)"
    assert found[("tests/test_mod.py", "test_func")].out_of_scope is None
    # every test reaches the autouse fixture, and with it a private module
    assert found[("tests/test_mod.py", "test_func")].private == [
        "langgraph.channels._private.cache"
    ]
    assert "langgraph.pregel._algo.x" in found[("tests/test_mod.py", "test_private")].private
    assert found[("tests/test_mod.py", "test_helper")].out_of_scope == "needs langchain-core"
    assert "patches attribute _load_checkpoint_tuple" in (
        found[("tests/test_mod.py", "test_patches_a_private_method")].private
    )
    assert found[("tests/test_mod.py", "test_patches_public_and_dunder")].private == [
        "langgraph.channels._private.cache"  # from the autouse fixture only
    ]
    assert "langgraph.pregel._loop.PregelLoop" in (
        found[("tests/test_mod.py", "TestBox::test_loop")].private
    )


def test_missing_names_fail_only_where_used(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """\
        import missing_names
        from pregelkit.checkpoint import memory
        from pregelkit.types import Command, NoSuchName
        from pregelkit.no_such_module import Thing
        from langchain_core.embeddings import Embeddings

        class Fake(Embeddings):
            def embed_query(self, text):
                return [0.0]

        assert Fake().embed_query("x") == [0.0]
        assert memory.InMemorySaver and Command
        assert not isinstance(1, NoSuchName)
        try:
            Thing()
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": _only_pregelkit(tmp_path), "PATH": ""},
    )
    assert out.stdout.strip() == "missing: pregelkit.no_such_module.Thing"


def _only_pregelkit(where: Path) -> str:
    """A path with pregelkit and its runtime dependencies and nothing else
    installed (run with ``-S``): the compat run's pregelkit side has no
    langchain-core, and the test environment does (langgraph-sdk, the
    server tests' client, requires it)."""
    import cloudpickle
    import typing_extensions
    import wrapt
    import xxhash

    import pregelkit

    for module in (cloudpickle, typing_extensions, wrapt, xxhash, pregelkit):
        source = Path(str(module.__file__))
        if source.name == "__init__.py":
            source = source.parent
        (where / source.name).symlink_to(source)
    return f"{TOOLS}:{where}"


def test_failure_reasons_do_not_carry_a_runs_ids_or_addresses() -> None:
    """docs/compat.md stays the same between runs with the same results."""
    reason = (
        "AssertionError: assert 'seed' not in [('8088ef43-8703-4150-9eed-e73dd32685af', 'w1')] "
        "at <object at 0x7f3a2b1c>\nmore lines"
    )
    assert _short(reason) == (
        "AssertionError: assert 'seed' not in [('<uuid>', 'w1')] at <object at 0x…>"
    )
    assert len(_short("x" * 500)) == 158 and _short("x" * 500).endswith("…")
