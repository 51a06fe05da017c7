"""Rewrites a copy of LangGraph's tests to import pregelkit instead.

Only module paths change: ``import langgraph.x``, ``from langgraph.x import
...`` and dotted strings naming a module (``mock.patch("langgraph.x.y")``)
become ``pregelkit.x``. Names such as ``langgraph_step`` or
``langgraph-checkpoint`` are left alone, ``RunnableConfig`` is imported from
``pregelkit.config`` instead of langchain-core, and so is everything else in the
tests: what they assert is what LangGraph asserts.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

_DOTTED = re.compile(r"(?<![\w.-])langgraph(?=\.(?!json\b)[A-Za-z_])")
# langchain-core's config type is pregelkit's (a plain dict), by another path.
_RUNNABLE_CONFIG = re.compile(
    r"^(\s*)from langchain_core\.runnables(?:\.config)? import RunnableConfig$", re.MULTILINE
)
_BARE_IMPORT = re.compile(r"^(\s*(?:from|import)\s+)langgraph\b(?![-_])", re.MULTILINE)


def rename_source(text: str) -> str:
    """The source with every ``langgraph`` module path renamed."""
    text = _RUNNABLE_CONFIG.sub(r"\1from pregelkit.config import RunnableConfig", text)
    return _BARE_IMPORT.sub(r"\1pregelkit", _DOTTED.sub("pregelkit", text))


def copy_renamed(src: Path, dest: Path) -> None:
    """Copies the tree ``src`` to ``dest``, renaming imports in ``.py`` files."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    for path in dest.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        renamed = rename_source(text)
        if renamed != text:
            path.write_text(renamed, encoding="utf-8")
