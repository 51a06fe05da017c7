"""The lint as a flake8 plugin (entry point ``flake8.extension``, code ``PK``):
``flake8 --select PK`` reports the same findings as ``pregelkit lint``, and
flake8 applies ``# noqa`` itself."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from pregelkit.lint import lint_tree


class Plugin:
    name = "pregelkit-lint"
    version = "0.1.0"

    def __init__(self, tree: ast.Module, filename: str = "<string>") -> None:
        self.tree = tree
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type[Plugin]]]:
        for finding in lint_tree(self.tree, self.filename):
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)
