"""Tables for a person: columns measured in terminal cells (``顧客-42`` takes
four of them and still aligns), fitted to the terminal's width by cutting
the widest cuttable columns with ``…``, never a column whose values are
short by nature (a status, a step, a time).

``rich`` lays them out (it measures East Asian wide characters and
combining marks, and shares out the width); it is the ``cli`` extra, so it
is imported here, never by ``import pregelkit``. Every cell is escaped
first (``_render.clean``) and handed over as ``Text``, so an escape
sequence or ``[bold]`` markup in a thread id prints as its characters.
"""

from __future__ import annotations

import io
import os
from collections.abc import Collection, Sequence
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pregelkit.cli._render import clean

GAP = 2
"""Spaces between two columns."""


def terminal_width(out: TextIO, wide: bool) -> int | None:
    """The width tables fit in: ``None`` (whole values) with ``--wide`` or
    when ``out`` is not a terminal (a pipe or a file gets every character, as
    ``ps`` does; set ``COLUMNS`` to cut there too), else ``COLUMNS`` or the
    terminal's own width."""
    if wide:
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not out.isatty():
        return None
    try:
        return os.get_terminal_size(out.fileno()).columns or None
    except (OSError, ValueError):
        return None


def render_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    width: int | None,
    cut: Collection[str],
    indent: str = "",
) -> str:
    """The table as text: a header, a dashed rule under each column, the
    rows. Columns named in ``cut`` may be cut to fit ``width`` (``None``:
    never cut); trailing spaces are dropped."""
    cells = [[clean(str(c)) for c in row] for row in rows]
    natural = [
        max([cell_len(h)] + [cell_len(row[i]) for row in cells]) for i, h in enumerate(headers)
    ]
    least = [
        min(size, max(cell_len(h), 4)) if h in cut else size for h, size in zip(headers, natural)
    ]
    gaps = GAP * (len(headers) - 1)
    smallest = sum(least) + gaps
    # narrower than the columns that are never cut (and a few cells of the
    # others): wider than the terminal, which wraps it, rather than a
    # column dropped
    room = sum(natural) + gaps if width is None else max(width - len(indent), smallest)
    table = Table(box=None, padding=(0, GAP, 0, 0), pad_edge=False, show_edge=False)
    for header, size, floor in zip(headers, natural, least):
        table.add_column(
            # the rule is part of the header, cropped with its column
            Text(f"{header}\n{'-' * size}", no_wrap=True, overflow="crop"),
            no_wrap=header not in cut,
            min_width=floor,
        )
    for row in cells:
        table.add_row(*(Text(c, no_wrap=True, overflow="ellipsis") for c in row))
    # rich may cut a column below its minimum, then widen it back, a cell or
    # two past the width: ask again for that much less (never so little that
    # rich would have to cut a column that is not to be cut)
    fixed = sum(size for h, size in zip(headers, natural) if h not in cut) + gaps
    asked = room
    for _ in range(4):
        lines = _lines(table, asked)
        over = max(map(cell_len, lines)) - room
        if over <= 0 or asked - over < fixed + sum(h in cut for h in headers):
            break
        asked -= over
    return "".join(indent + line + "\n" for line in lines)


def _lines(table: Table, width: int) -> list[str]:
    buffer = io.StringIO()
    # plain text: no colour, no style, whatever the terminal or environment says
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    console.print(table, crop=False)
    return [line.rstrip() for line in buffer.getvalue().splitlines()]


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    out: TextIO,
    *,
    wide: bool = False,
    cut: Collection[str] = (),
    indent: str = "",
) -> None:
    """Write the table to ``out``, fitted to its terminal (see ``terminal_width``)."""
    out.write(render_table(headers, rows, terminal_width(out, wide), cut, indent))
