"""Passwords never leave the process: every text the command line prints
about a database (hints, tables, JSON, errors, tracebacks of a driver whose
message quotes the connection string) goes through ``Redactor.mask``."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

MASK = "***"
_LITERAL_MIN = 4
"""Shorter passwords are masked where they stand in a URL or keyword string,
not wherever their letters occur (that would garble every message)."""

# scheme://user:PASSWORD@host (up to the last "@" before the path, should a
# password hold an unencoded "@")
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^/\s]*(?=@)")
# password=secret, password='sec ret', ?password=secret&..., PGPASSWORD=secret
_KEYWORD_PASSWORD = re.compile(
    r"(?P<head>\b(?:pg)?pass(?:word)?\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&;'\"]+)", re.IGNORECASE
)


def passwords_in(location: str) -> list[str]:
    """The passwords written in a database location, raw and percent-decoded,
    so a driver's echo of either form is caught."""
    found: list[str] = []
    for match in _URL_PASSWORD.finditer(location):
        found.append(location[match.end("head") : match.end()])
    for match in _KEYWORD_PASSWORD.finditer(location):
        value = location[match.end("head") : match.end()]
        if value.startswith("'") and value.endswith("'") and len(value) >= 2:
            value = value[1:-1].replace("\\'", "'").replace("\\\\", "\\")
        found.append(value)
    decoded = [urllib.parse.unquote(p) for p in found]
    return sorted({p for p in found + decoded if p}, key=len, reverse=True)


class Redactor:
    """Masks URL and keyword passwords, and the literal passwords of the
    locations it was given wherever they appear."""

    def __init__(self, locations: Iterable[str] = ()) -> None:
        self.secrets: list[str] = []
        for location in locations:
            self.add(location)

    def add(self, location: str) -> None:
        for secret in passwords_in(location):
            if secret not in self.secrets:
                self.secrets.append(secret)
        self.secrets.sort(key=len, reverse=True)

    def mask(self, text: str) -> str:
        text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
        text = _KEYWORD_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
        for secret in self.secrets:
            if len(secret) >= _LITERAL_MIN:
                text = text.replace(secret, MASK)
        return text
