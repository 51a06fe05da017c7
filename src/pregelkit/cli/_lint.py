"""``pregelkit lint PATH...``: the determinism lint (``pregelkit.lint``) on
files and directories. It reads the source and never imports it, so it needs
neither a database nor the workflow's dependencies."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any, TextIO

from pregelkit.cli._errors import CliError
from pregelkit.cli._options import add_command


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "lint",
        cmd_lint,
        [],
        help="find code a replay would not repeat (never imports it)",
        description="Flag, in @entrypoint bodies and Pregel nodes but not in @task bodies, "
        "reads of the clock, randomness, I/O, unordered iteration feeding tasks, mutation "
        "of the input and interrupt() in loops of unrecorded length. `# noqa: PK001` (or a "
        "bare `# noqa`) on a line drops its findings.",
    )
    p.epilog = (
        "Exit status: 0 nothing found, 1 findings, 2 a path that does not exist or a "
        "file that does not parse."
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a .py file or a directory")
    p.add_argument(
        "--format", choices=["text", "json"], default="text", help="output (default: text)"
    )


def cmd_lint(args: argparse.Namespace, out: TextIO) -> int:
    from pregelkit.lint import lint_paths

    try:
        report = lint_paths(args.paths)
    except FileNotFoundError as exc:
        raise CliError(f"{exc}: name .py files or directories that hold them") from None
    if args.format == "json" or args.json:
        document = {
            "findings": [f.as_json() for f in report.findings],
            "files": report.files,
            "errors": report.errors,
        }
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        for finding in report.findings:
            out.write(f"{finding}\n")
        for error in report.errors:
            sys.stderr.write(f"error: {error}\n")
        counts = Counter(f.code for f in report.findings)
        by_code = ", ".join(f"{code} {n}" for code, n in sorted(counts.items()))
        summary = f"{len(report.findings)} finding(s) in {report.files} file(s)"
        sys.stderr.write(summary + (f" ({by_code})" if by_code else "") + "\n")
    if report.errors:
        return 2
    return 1 if report.findings else 0
