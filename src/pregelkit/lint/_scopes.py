"""Where the rules apply: the bodies that run on every replay. Those are
``@entrypoint`` functions, Pregel nodes (functions given to ``add_node`` or
to a ``NodeBuilder``'s ``.do``) and the module's own functions they call by
name; ``@task`` bodies are not, since their results are recorded."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from pregelkit.lint._names import Names

Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


@dataclass
class Scope:
    fn: Function
    # "entrypoint", "node" or "helper"
    kind: str
    name: str
    called_from: str = ""

    @property
    def where(self) -> str:
        if self.kind == "helper":
            return f"function '{self.name}' (called from {self.called_from})"
        return f"{self.kind} '{self.name}'"


@dataclass
class Module:
    """What the rules need to know about the linted module as a whole."""

    names: Names
    scopes: list[Scope] = field(default_factory=list)
    # names that call a task when called: `@task` functions and `x = task(f)`
    task_names: set[str] = field(default_factory=set)
    # function definitions that are task bodies (never linted)
    task_bodies: set[ast.AST] = field(default_factory=set)


def find_scopes(tree: ast.Module) -> Module:
    nodes = list(ast.walk(tree))
    module = Module(Names(tree, nodes))
    names = module.names
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    wrapped_tasks: set[str] = set()  # f in `x = task(f)`
    entry_names: list[str] = []
    node_refs: list[ast.expr] = []
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defs.setdefault(node.name, []).append(node)
            if any(names.is_api(d, "task") for d in node.decorator_list):
                module.task_names.add(node.name)
                module.task_bodies.add(node)
            elif any(names.is_api(d, "entrypoint") for d in node.decorator_list):
                module.scopes.append(Scope(node, "entrypoint", node.name))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            wrapped = _wrapped_function(node.value, names, "task")
            if wrapped is not None:
                module.task_names.update(t.id for t in node.targets if isinstance(t, ast.Name))
                if isinstance(wrapped, ast.Name):
                    wrapped_tasks.add(wrapped.id)
        if isinstance(node, ast.Call):
            wrapped = _wrapped_function(node, names, "entrypoint")
            if isinstance(wrapped, ast.Name):
                entry_names.append(wrapped.id)
            node_refs.extend(_node_functions(node, names))
    for name in wrapped_tasks:
        module.task_bodies.update(defs.get(name, []))
    for name in entry_names:
        module.scopes.extend(Scope(fn, "entrypoint", name) for fn in defs.get(name, []))
    for ref in node_refs:
        if isinstance(ref, ast.Lambda):
            module.scopes.append(Scope(ref, "node", f"<lambda> at line {ref.lineno}"))
        elif isinstance(ref, ast.Name):
            module.scopes.extend(Scope(fn, "node", ref.id) for fn in defs.get(ref.id, []))
    module.scopes = [s for s in module.scopes if s.fn not in module.task_bodies]
    _add_helpers(module, tree)
    return module


def _wrapped_function(call: ast.Call, names: Names, api: str) -> ast.expr | None:
    """``f`` in ``task(f)`` or ``task(retry_policy=...)(f)`` (``api``: "task")."""
    if isinstance(call.func, ast.Call) and names.is_api(call.func, api) and call.args:
        return call.args[0]
    if names.is_api(call.func, api) and len(call.args) == 1:
        return call.args[0]
    return None


def _node_functions(call: ast.Call, names: Names) -> Iterator[ast.expr]:
    """The functions a call makes Pregel nodes of: ``graph.add_node("name", f)``,
    ``graph.add_node(f)``, ``NodeBuilder()...do(f)``."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return
    if func.attr == "add_node":
        action = [k.value for k in call.keywords if k.arg == "action"]
        yield from action or call.args[1:2] or call.args[:1]
    elif func.attr == "do" and _built_by_node_builder(func.value, names):
        yield from call.args[:1]


def _built_by_node_builder(expr: ast.expr, names: Names) -> bool:
    while isinstance(expr, ast.Call | ast.Attribute):
        if isinstance(expr, ast.Call):
            if (names.qualify(expr.func) or "").endswith("NodeBuilder") or (
                isinstance(expr.func, ast.Name) and expr.func.id == "NodeBuilder"
            ):
                return True
            expr = expr.func
        else:
            expr = expr.value
    return False


def _add_helpers(module: Module, tree: ast.Module) -> None:
    """The module-level functions a scope calls by name run on every replay too."""
    top = {
        s.name: s
        for s in tree.body
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s not in module.task_bodies
    }
    seen = {id(s.fn) for s in module.scopes}
    queue = list(module.scopes)
    while queue:
        scope = queue.pop()
        for node in walk_body(scope.fn, module.task_bodies):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            fn = top.get(node.func.id)
            if fn is None or id(fn) in seen or node.func.id in module.task_names:
                continue
            seen.add(id(fn))
            caller = scope.called_from if scope.kind == "helper" else scope.where
            helper = Scope(fn, "helper", fn.name, caller)
            module.scopes.append(helper)
            queue.append(helper)


def walk_body(fn: Function, skip: set[ast.AST]) -> Iterator[ast.AST]:
    """Every node of ``fn``'s body (its default values and decorators are not
    run by a replay), not entering the functions in ``skip`` (task bodies)."""
    stack: list[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else list(reversed(fn.body))
    while stack:
        node = stack.pop()
        if node in skip:
            continue
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
