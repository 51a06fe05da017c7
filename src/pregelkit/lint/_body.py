"""The rules applied to one scope's body (``_scopes``): one pass finds the
calls that read something unrecorded, then the names they flow into, then
the loops and mutations that depend on them."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pregelkit.lint import _rules as r
from pregelkit.lint._scopes import Module, Scope, walk_body

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SET_OPS = (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor)


@dataclass(frozen=True)
class Hit:
    rule: r.Rule
    node: ast.AST
    message: str


class BodyCheck:
    def __init__(self, module: Module, scope: Scope) -> None:
        self.module = module
        self.names = module.names
        self.scope = scope
        self.nodes = list(walk_body(scope.fn, module.task_bodies))
        self.paths: set[str] = set()
        self._find_paths()
        self.flagged: dict[ast.Call, r.Rule] = {}
        self.unordered_names: set[str] = set()
        self.tainted_names: set[str] = set()

    def hits(self) -> Iterator[Hit]:
        where = self.scope.where
        for node in self.nodes:
            if isinstance(node, ast.Call):
                rule = self._call_rule(node)
                if rule is not None:
                    self.flagged[node] = rule
                    yield Hit(rule, node, f"{_show(node.func)}() {rule.title} in {where}")
        self._flow()
        yield from self._unordered_loops(where)
        yield from self._interrupt_loops(where)
        if self.scope.kind != "helper":
            yield from self._input_mutations(where)

    # calls

    def _call_rule(self, call: ast.Call) -> r.Rule | None:
        qualified = self.names.qualify(call.func)
        if qualified is not None:
            rule = r.classify(qualified, call)
            if rule is not None:
                return rule
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr in r.PATH_IO_METHODS:
                return r.IO
            if func.attr in r.PATH_ONLY_METHODS and self._is_path(func.value):
                return r.IO
        return None

    def _find_paths(self) -> None:
        """The names bound to a ``pathlib.Path``: parameters annotated so, and
        names assigned one (in order: ``b = a / "x"`` after ``a = Path()``)."""
        fn = self.scope.fn
        if not isinstance(fn, ast.Lambda):
            for arg in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs:
                if arg.annotation is not None and self._is_path_type(arg.annotation):
                    self.paths.add(arg.arg)
        for node in self.nodes:
            if isinstance(node, ast.Assign) and self._is_path(node.value):
                self.paths.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def _is_path_type(self, expr: ast.expr) -> bool:
        return self.names.qualify(expr) in r.PATH_TYPES

    def _is_path(self, expr: ast.expr) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in self.paths
        if isinstance(expr, ast.Call):
            return self._is_path_type(expr.func)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
            return self._is_path(expr.left)
        return False

    # what flows where

    def _is_task_call(self, node: ast.AST) -> bool:
        """Whether ``node`` is a call whose result is recorded, so whose order
        matters: a task of this module, anything whose future's ``.result()``
        is taken (a task imported from elsewhere), a child workflow's
        ``.submit()``, a ``pregelkit.durable`` call (sleep, send, recv...)."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.module.task_names:
            return True
        if isinstance(func, ast.Attribute):
            if func.attr == "result" and isinstance(func.value, ast.Call):
                return True
            if func.attr == "submit":
                return True
        return (self.names.qualify(func) or "").startswith("pregelkit.durable.")

    def _feeds_tasks(self, nodes: list[ast.AST]) -> bool:
        return any(self._is_task_call(n) for root in nodes for n in _walk_local(root))

    def _is_unordered(self, expr: ast.AST) -> bool:
        if isinstance(expr, ast.Set | ast.SetComp):
            return True
        if isinstance(expr, ast.Name):
            return expr.id in self.unordered_names
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, _SET_OPS):
            return self._is_unordered(expr.left) or self._is_unordered(expr.right)
        if isinstance(expr, ast.DictComp):
            return any(self._is_unordered(g.iter) for g in expr.generators)
        if not isinstance(expr, ast.Call):
            return False
        qualified = self.names.qualify(expr.func) or ""
        if qualified in r.UNORDERED_CALLS:
            return True
        if qualified in r.ORDER_KEEPING or qualified == "builtins.dict":
            return any(self._is_unordered(a) for a in expr.args)
        if qualified in r.ORDER_KEEPING_MAPS:
            return any(self._is_unordered(a) for a in expr.args[1:])
        func = expr.func
        if isinstance(func, ast.Attribute):
            if func.attr in r.UNORDERED_METHODS:
                return True
            if func.attr in r.SET_METHODS or func.attr in ("keys", "values", "items", "copy"):
                return self._is_unordered(func.value)
            if func.attr == "fromkeys":
                return any(self._is_unordered(a) for a in expr.args)
        return False

    def _is_tainted(self, expr: ast.AST) -> bool:
        """Whether ``expr``'s value depends on something a replay does not
        see again (a task's result is recorded: a task call cuts the taint)."""
        return any(
            n in self.flagged
            or (isinstance(n, ast.Name) and n.id in self.tainted_names)
            or (isinstance(n, ast.expr) and self._is_unordered(n))
            for n in _walk_local(expr, cut=self._is_task_call)
        )

    def _flow(self) -> None:
        """The names bound to unordered collections and to unrecorded values,
        to a fixed point (flow-insensitive: a name once bound so stays so)."""
        bindings = list(_bindings(self.nodes))
        changed = True
        while changed:
            changed = False
            for target, value, iterated in bindings:
                if target in self.unordered_names or iterated:
                    pass
                elif self._is_unordered(value):
                    self.unordered_names.add(target)
                    changed = True
                if target not in self.tainted_names and self._is_tainted(value):
                    self.tainted_names.add(target)
                    changed = True

    # the loop rules

    def _unordered_loops(self, where: str) -> Iterator[Hit]:
        rule = r.UNORDERED
        for node in self.nodes:
            if isinstance(node, ast.For | ast.AsyncFor):
                if self._is_unordered(node.iter) and self._feeds_tasks(list(node.body)):
                    text = f"for loop over {_show(node.iter)} {rule.title} in {where}"
                    yield Hit(rule, node, text)
            elif isinstance(node, _COMPREHENSIONS):
                sources = [g.iter for g in node.generators if self._is_unordered(g.iter)]
                results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
                if sources and self._feeds_tasks(list(results)):
                    text = f"comprehension over {_show(sources[0])} {rule.title} in {where}"
                    yield Hit(rule, node, text)

    def _interrupt_loops(self, where: str) -> Iterator[Hit]:
        rule = r.INTERRUPT_LOOP
        for loop in self.nodes:
            if not isinstance(loop, _LOOPS) or not self._unrecorded_count(loop):
                continue
            for node in _walk_local(loop, skip_root=True):
                if isinstance(node, ast.Call) and self.names.is_api(node.func, "interrupt"):
                    yield Hit(rule, node, f"interrupt() {rule.title} in {where}")

    def _unrecorded_count(self, loop: ast.For | ast.AsyncFor | ast.While) -> bool:
        header = loop.test if isinstance(loop, ast.While) else loop.iter
        if self._is_tainted(header):
            return True
        # an exit taken on an unrecorded value
        return any(
            isinstance(n, ast.If)
            and self._is_tainted(n.test)
            and any(isinstance(s, ast.Break | ast.Return) for s in n.body + n.orelse)
            for stmt in loop.body
            for n in _walk_local(stmt, cut=lambda x: isinstance(x, _LOOPS))
        )

    # the input

    def _input_mutations(self, where: str) -> Iterator[Hit]:
        fn = self.scope.fn
        params = fn.args.posonlyargs + fn.args.args
        if not params:
            return
        param = params[0]
        immutable = _annotation_name(param.annotation) in r.IMMUTABLE_ANNOTATIONS
        aliases = {param.arg}
        # `same = inputs`, `messages = inputs["messages"]` and `for m in messages`
        # name (part of) the input
        for node in self.nodes:
            if isinstance(node, ast.Assign) and _root_name(node.value) in aliases:
                aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.For | ast.AsyncFor) and _root_name(node.iter) in aliases:
                aliases.update(_target_names(node.target))
        rebound = {name: _first_rebinding(self.nodes, name, aliases) for name in aliases}
        rule = r.MUTATION
        for node in self.nodes:
            for target, shown in _mutated(node):
                root = _root_name(target)
                if root not in aliases or getattr(node, "lineno", 0) > rebound[root]:
                    continue
                if isinstance(target, ast.Name) and (root != param.arg or immutable):
                    continue  # `x += ...` rebinds a number, a string, a tuple
                text = f"{shown} {rule.title} ('{param.arg}') in {where}"
                yield Hit(rule, node, text)


def _walk_local(
    root: ast.AST, cut: Callable[[ast.AST], bool] | None = None, skip_root: bool = False
) -> Iterator[ast.AST]:
    """``root`` and what it contains, not entering nested functions, nor the
    nodes for which ``cut`` (a predicate) is true."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node is not root or not skip_root:
            if cut is not None and cut(node):
                continue
            yield node
        if node is not root and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _bindings(nodes: list[ast.AST]) -> Iterator[tuple[str, ast.AST, bool]]:
    """(name, the value it is bound to, whether it is bound to an element of
    that value) for every simple binding in the scope."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in _target_names(target):
                    yield name, node.value, False
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            if node.value is not None:
                for name in _target_names(node.target):
                    yield name, node.value, False
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            for name in _target_names(node.target):
                yield name, node.iter, True
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            for name in _target_names(node.optional_vars):
                yield name, node.context_expr, False


def _target_names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _target_names(element)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _mutated(node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """What a statement or call changes in place, and how to show it:
    assignment targets that are items or attributes, augmented-assignment
    targets, mutating methods' receivers."""
    if isinstance(node, ast.Assign | ast.Delete):
        for target in node.targets:
            for element in _element_targets(target):
                verb = "del " if isinstance(node, ast.Delete) else ""
                yield element, f"{verb}{_show(element)}" + ("" if verb else " = ...")
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        for element in _element_targets(node.target):
            yield element, f"{_show(element)} = ..."
    elif isinstance(node, ast.AugAssign):
        op = _AUG_OPS.get(type(node.op), "op")
        yield node.target, f"{_show(node.target)} {op}= ..."
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in r.INPUT_MUTATORS
    ):
        receiver = node.func.value
        # a method call on the parameter itself changes it, as an item's would
        yield ast.Subscript(value=receiver, slice=ast.Constant(None)), _show(node.func) + "()"


_AUG_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitOr: "|", ast.BitAnd: "&"}


def _element_targets(target: ast.AST) -> Iterator[ast.AST]:
    if isinstance(target, ast.Subscript | ast.Attribute):
        yield target
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _element_targets(element)


def _root_name(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Subscript | ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _first_rebinding(nodes: list[ast.AST], name: str, aliases: set[str]) -> int:
    """The first line that binds ``name`` to something other than the input
    (a copy): later changes are the copy's."""
    lines = [
        node.lineno
        for node in nodes
        if isinstance(node, ast.Assign)
        and _root_name(node.value) not in aliases
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    ]
    return min(lines, default=1 << 30)


def _annotation_name(annotation: ast.expr | None) -> str | None:
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split("[")[0]
    return None


def _show(expr: ast.AST) -> str:
    text = ast.unparse(expr)
    return text if len(text) <= 40 else text[:37] + "..."


def check(module: Module, scope: Scope) -> Iterator[Hit]:
    yield from BodyCheck(module, scope).hits()
