"""The one exception the command line reports as the user's mistake."""

from __future__ import annotations


class CliError(Exception):
    """A mistake the user can fix: printed without a traceback, exit status 2."""
