"""Passwords in database locations are masked in whatever the command line
prints (the command-level checks are in ``test_cli_scripting``)."""

from __future__ import annotations

import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from pregelkit.cli._secrets import Redactor

passwords = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1
)


@given(passwords)
def test_a_url_password_is_masked_however_it_is_written(password: str) -> None:
    encoded = urllib.parse.quote(password, safe="")
    url = f"postgresql://user:{encoded}@db.example.com:5432/flows?sslmode=disable"
    redactor = Redactor([url])
    assert redactor.mask(url) == "postgresql://user:***@db.example.com:5432/flows?sslmode=disable"
    if len(password) >= 4:  # a driver's message quoting it in any form
        message = f"connection to {url} failed: bad password [{password}] ({encoded})"
        masked = redactor.mask(message)
        assert password not in masked and encoded not in masked


@given(passwords.filter(lambda p: "'" not in p and "\\" not in p))
def test_a_keyword_password_is_masked(password: str) -> None:
    dsn = f"host=db.example.com user=me password='{password}' dbname=flows"
    assert Redactor([dsn]).mask(dsn) == "host=db.example.com user=me password=*** dbname=flows"


def test_query_string_and_unencoded_at_signs() -> None:
    redactor = Redactor()
    assert (
        redactor.mask("postgresql://me@h/db?sslmode=disable&password=hunter2&x=1")
        == "postgresql://me@h/db?sslmode=disable&password=***&x=1"
    )
    assert redactor.mask("postgresql://me:p@ss@h:5432/db") == "postgresql://me:***@h:5432/db"
    assert (
        redactor.mask("PGPASSWORD=hunter2 pregelkit threads") == "PGPASSWORD=*** pregelkit threads"
    )
