"""The determinism lint's precision on tests/lint_corpus: 30 workflows in
the style of LangGraph's functional-API documentation (written for this
project, pregelkit imports), each line of a real hazard marked by hand
``# expect: PKnnn``. A finding on an unmarked line is a false positive.

docs/guides/testing.md shows the table and the figures: this test checks
they are still what the lint finds."""

from __future__ import annotations

import re
from pathlib import Path

from pregelkit.lint import lint_source

from lint_expect import expected

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "lint_corpus"
GUIDE = ROOT / "docs" / "guides" / "testing.md"


def _codes(found: set[tuple[int, str]]) -> str:
    return " ".join(sorted(code for _, code in found)) or "-"


def _measure() -> tuple[list[str], int, int, int]:
    """The guide's table rows, and the true positives, false positives and misses."""
    rows = []
    tp = fp = fn = 0
    for path in sorted(CORPUS.glob("wf*.py")):
        source = path.read_text(encoding="utf-8")
        found = {(f.line, f.code) for f in lint_source(source, path.name)}
        marked = expected(source)
        tp += len(found & marked)
        fp += len(found - marked)
        fn += len(marked - found)
        rows.append(f"| `{path.stem}` | {_codes(marked)} | {_codes(found)} |")
    return rows, tp, fp, fn


def test_the_corpus_has_30_workflows() -> None:
    assert len(list(CORPUS.glob("wf*.py"))) == 30


def test_precision_is_at_least_95_percent_and_the_guide_says_what_it_is() -> None:
    rows, tp, fp, fn = _measure()
    assert tp / (tp + fp) >= 0.95, (tp, fp)
    guide = GUIDE.read_text(encoding="utf-8")
    shown = [line for line in guide.splitlines() if re.match(r"\| `wf\d\d", line)]
    assert shown == rows
    assert f"precision **{tp}/{tp + fp}** ({100 * tp / (tp + fp):.0f}%)" in guide
    assert f"recall {tp}/{tp + fn} ({100 * tp / (tp + fn):.0f}%)" in guide
