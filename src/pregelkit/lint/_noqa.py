"""``# noqa`` comments: bare, a finding on that line is dropped; with codes
(``# noqa: PK001,PK003``), only those. The same syntax as flake8's."""

from __future__ import annotations

import io
import re
import tokenize

_NOQA = re.compile(
    r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
_ALL: frozenset[str] = frozenset({"*"})


def suppressions(source: str) -> dict[int, frozenset[str]]:
    """Line number -> the codes ``# noqa`` drops there (``{"*"}``: all)."""
    found: dict[int, frozenset[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = _NOQA.search(token.string)
            if match is None:
                continue
            codes = match.group("codes")
            line = token.start[0]
            found[line] = (
                frozenset(c.upper() for c in re.split(r"[,\s]+", codes) if c) if codes else _ALL
            )
    except (tokenize.TokenError, SyntaxError):
        pass  # the source parsed (ast) but does not tokenize: keep what was found
    return found


def suppressed(codes: frozenset[str] | None, code: str) -> bool:
    return codes is not None and (codes is _ALL or code in codes)
