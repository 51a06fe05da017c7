"""The expectations of lint tests and of tests/lint_corpus: a line ending in
``# expect: PK001`` (or several codes) is where those findings belong."""

from __future__ import annotations

import re

_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>PK\d{3}(?:[ ,]+PK\d{3})*)")


def expected(source: str) -> set[tuple[int, str]]:
    """(line, code) for every finding the source's comments expect."""
    found: set[tuple[int, str]] = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            found.update((number, code) for code in re.split(r"[ ,]+", match["codes"]))
    return found
