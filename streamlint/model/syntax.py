"""Small read-only queries over LibCST nodes shared by the model modules."""

from __future__ import annotations

import re

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from streamlint._lazy import cst
from streamlint.model.walk import children

T = TypeVar("T")


def target_names(target: cst.BaseExpression, *, skip: frozenset[str] = frozenset()) -> list[str]:
    """The names an assignment / ``for`` target binds (``a``, ``a, (b, *c)``), in order; names in
    ``skip`` (``_``) are left out. Attribute and subscript targets bind no name."""
    if isinstance(target, cst.Name):
        return [] if target.value in skip else [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[str] = []
        for el in target.elements:
            names += target_names(el.value, skip=skip)
        return names
    return []


def field_reads(body: cst.CSTNode, names: set[str], ignore: frozenset[str]) -> set[str]:
    """The ``names`` whose fields ``body`` reads (``config.num_tokens``; not ``p.method()`` and not the
    attributes in ``ignore``): evidence that the name holds an object with fields."""
    out: set[str] = set()
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in names \
                and node.attr.value not in ignore:
            out.add(node.value.value)
        method_call = isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        stack.extend([node.func.value, *node.args] if method_call else children(node))
    return out


def class_field(cls: cst.ClassDef, attr: str) -> "cst.AnnAssign | cst.Assign | None":
    """The class-level statement that names field ``attr`` (``attr: T``, ``attr: T = v``, ``attr = v``)."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                        and small.target.value == attr:
                    return small
                if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == attr
                                                         for t in small.targets):
                    return small
    return None


def self_attribute(expr: cst.CSTNode | None) -> str | None:
    """``self.x`` -> ``x``; None for anything else (``self.x[i]``, ``self.x.y``, ``other.x``)."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def node_code(node: cst.CSTNode) -> str:
    """A node's source text rendered on its own (no file needed: a comparison key such as ``self.ev`` or ``None``)."""
    return cst.Module(body=[]).code_for_node(node)


def param_named(fn: cst.FunctionDef, name: str) -> cst.Param | None:
    """``fn``'s parameter ``name`` (positional-only, positional or keyword-only; not ``*args`` / ``**kwargs``)."""
    params = fn.params
    return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == name),
                None)


def forward_reference(annotation: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The annotation itself, or the expression a string annotation (a forward reference) spells, read from its text
    and never evaluated; None for a malformed one (it names nothing)."""
    if not isinstance(annotation, cst.SimpleString):
        return annotation
    try:
        text = annotation.evaluated_value
        return cst.parse_expression(text) if isinstance(text, str) else None
    except Exception:  # noqa: BLE001 - a malformed forward reference names nothing
        return None


def class_field_annotation(cls: cst.ClassDef, attr: str) -> cst.BaseExpression | None:
    """The annotation of a class-level field (dataclass style: ``ready_event: torch.npu.Event``)."""
    field = class_field(cls, attr)
    return field.annotation.annotation if isinstance(field, cst.AnnAssign) else None


def strip_not(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """``(inner, positive)`` of a test under any number of ``not``: ``not not x`` → ``(x, True)``."""
    positive = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
        positive = not positive
    return test, positive


def call_name(expr: cst.BaseExpression | None) -> str | None:
    """The name a call is made by: ``f`` of ``f(...)``, ``m`` of ``obj.m(...)``; None for anything else."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    return func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None


def is_none(expr: cst.BaseExpression | None) -> bool:
    """Is the expression the literal ``None``?"""
    return isinstance(expr, cst.Name) and expr.value == "None"


def contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """True when ``inner`` is ``outer`` or one of its descendants (nested definitions included)."""
    stack = [outer]
    while stack:
        node = stack.pop()
        if node is inner:
            return True
        stack.extend(children(node))
    return False


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and all its descendants, nested definitions included (:func:`local_nodes` stops at them)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def mentions_name(node: cst.CSTNode, *names: str) -> bool:
    """Does a ``Name`` node spelled as one of ``names`` occur in ``node`` (nested definitions included)?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name) and n.value in names:
            return True
        stack.extend(children(n))
    return False


def int_literal(e: cst.BaseExpression) -> int | None:
    """The value of an integer literal (``3``, ``-1``, ``0x10``), else None."""
    if isinstance(e, cst.Integer):
        return int(e.value, 0)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus) and isinstance(e.expression, cst.Integer):
        return -int(e.expression.value, 0)
    return None


def slice_drop(sl: cst.BaseSlice) -> str | None:
    """Which end a step-less slice with literal bounds leaves out of a sequence: ``"none"`` (``[:]``, ``[0:]``),
    ``"first"`` (``[1:]``), ``"last"`` (``[:-1]``); None for anything else (an index, a step, other bounds)."""
    if not isinstance(sl, cst.Slice) or sl.step is not None:
        return None
    lower = int_literal(sl.lower) if sl.lower is not None else 0
    upper = int_literal(sl.upper) if sl.upper is not None else None
    if sl.lower is not None and lower is None or sl.upper is not None and upper is None:
        return None
    return {(0, None): "none", (1, None): "first", (0, -1): "last"}.get((lower, upper))


_NODE_MEMO: "OrderedDict[tuple[str, int], tuple[cst.CSTNode, object]]" = OrderedDict()
_NODE_MEMO_SIZE = 8192


def node_memo(kind: str, node: cst.CSTNode, compute: Callable[[cst.CSTNode], T]) -> T:
    """``compute(node)``, kept per (``kind``, node). For syntactic facts of one function that the analysis
    asks hundreds of times: syntax trees are immutable, the memo holds a bounded number of answers (least
    recently used dropped) and each with its node, so an id is never answered for another node."""
    key = (kind, id(node))
    held = _NODE_MEMO.get(key)
    if held is not None and held[0] is node:
        _NODE_MEMO.move_to_end(key)
        return held[1]  # type: ignore[return-value]
    found = compute(node)
    _NODE_MEMO[key] = (node, found)
    while len(_NODE_MEMO) > _NODE_MEMO_SIZE:
        _NODE_MEMO.popitem(last=False)
    return found


def forget_nodes(live: "set[int]") -> None:
    """Drop what the memo holds for every node but those whose id is in ``live``. Each answer holds its node
    (and a ``local_nodes`` answer every node of the function): a tree the engine let go stayed alive here
    until 8,192 answers later (issue 15: a whole-tree run grew with the tree)."""
    for key in [key for key in _NODE_MEMO if key[1] not in live]:
        del _NODE_MEMO[key]


def memoised(kind: str, node: cst.CSTNode) -> object | None:
    """What :func:`node_memo` holds for (``kind``, node), without computing it (None: nothing held)."""
    held = _NODE_MEMO.get((kind, id(node)))
    return held[1] if held is not None and held[0] is node else None


def local_nodes(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``node`` and its descendants in lexical pre-order, without entering nested functions, classes
    or lambdas (the nested definition itself is yielded, its body is not). A function or a function body
    is walked once (:func:`node_memo`)."""
    if isinstance(node, (cst.FunctionDef, cst.IndentedBlock)):
        return node_memo("local_nodes", node, lambda n: tuple(_local_nodes(n)))
    return _local_nodes(node)


def _local_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and current is not node:
            continue
        stack.extend(reversed(children(current)))


def lexical_index(root: cst.CSTNode) -> dict[int, tuple[int, int]]:
    """id(node) -> (enter, exit) for ``root`` and all its descendants, numbered in lexical pre-order:
    ``b`` starts after ``a`` ends exactly when ``enter(b) > exit(a)`` — program order without computing
    positions (a code generation of the module)."""
    index: dict[int, tuple[int, int]] = {}
    counter = 0
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    enter: dict[int, int] = {}
    while stack:
        node, done = stack.pop()
        if done:
            index[id(node)] = (enter[id(node)], counter - 1)
            continue
        enter[id(node)] = counter
        counter += 1
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(children(node)))
    return index


__all__ = ["certain_calls", "contains", "dominates", "guarded_assigns", "is_none", "lexical_index", "local_nodes"]


def certain_calls(node: cst.CSTNode) -> list[cst.Call]:
    """The calls of a statement line (or expression) that run whenever it runs to its end: not those in an arm
    of ``a if c else b`` (its test runs), in an operand of ``and`` / ``or`` after the first, in a comprehension
    (only its first iterable runs: the loop may run no round), a lambda, a nested definition or an ``assert``
    (stripped under ``-O``)."""
    out: list[cst.Call] = []
    stack: list[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Assert)):
            continue
        if isinstance(n, cst.IfExp):
            stack.append(n.test)
        elif isinstance(n, cst.BooleanOperation):
            stack.append(n.left)
        elif isinstance(n, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            stack.append(n.for_in.iter)
        else:
            if isinstance(n, cst.Call):
                out.append(n)
            stack.extend(children(n))
    return out


def literal_truth(test: cst.BaseExpression) -> bool | None:
    """The truth of a test that is a literal (``True`` / ``False`` / ``None``, a number, a string, ``not`` of
    one): the one arm ``if True:`` / ``if 0:`` always takes; None for any other test."""
    negate = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negate = test.expression, not negate
    value: bool | None = None
    if isinstance(test, cst.Name) and test.value in ("True", "False", "None"):
        value = test.value == "True"
    elif (number := int_literal(test)) is not None:
        value = number != 0
    elif isinstance(test, cst.Float):
        value = float(test.value) != 0.0
    elif isinstance(test, cst.SimpleString):
        value = len(test.evaluated_value) > 0
    return None if value is None else value != negate


def forever(loop: cst.CSTNode) -> bool:
    """``while True:`` / ``while 1:``: a loop only a ``break``, a ``return`` or a ``raise`` leaves."""
    return isinstance(loop, cst.While) and literal_truth(loop.test) is True


def endless(loop: cst.CSTNode) -> bool:
    """``while True:`` (or ``while 1:``) with no ``break`` of its own: an event / worker loop that only a
    ``return`` or a ``raise`` leaves, so no path goes on after it."""
    if not forever(loop):
        return False
    stack = list(children(loop.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Break):
            return False
        if not isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node))
        elif node.orelse is not None if isinstance(node, (cst.For, cst.While)) else False:
            stack.extend(children(node.orelse))  # (a nested loop's else block breaks this one)
    return True


_STREAM_CLASS_WORD = re.compile(r"\bStream\b")


def names_stream_class(annotation_code: str) -> bool:
    """Does an annotation's text name a class ``Stream`` (``torch.cuda.Stream``, ``list[Stream]``,
    ``"torch.npu.Stream | None"``), not a class merely containing the word (``StreamWriter``, ``DataStream``)?"""
    return bool(_STREAM_CLASS_WORD.search(annotation_code))


def walked_names(it: cst.BaseExpression) -> tuple[str, ...]:
    """The collection a ``for`` walks, by name: ``xs``, ``enumerate(xs)``, ``zip(xs, ys)``, ``d.values()``."""
    if isinstance(it, cst.Name):
        return (it.value,)
    if isinstance(it, cst.Call):
        if isinstance(it.func, cst.Attribute) and isinstance(it.func.value, cst.Name) and not it.args:
            return (it.func.value.value,)
        return tuple(a.value.value for a in it.args if isinstance(a.value, cst.Name))
    return ()


def stub_body(node: cst.FunctionDef, abstract: bool = False) -> bool:
    """A body of only ``pass`` / ``...`` / a docstring (a protocol's or an abstract method's; ``abstract``:
    also ``raise`` / a bare ``return``), indented or on the ``def`` line."""
    body = node.body
    simple = (cst.Pass, cst.Raise, cst.Return) if abstract else (cst.Pass,)
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for stmt in lines:
        if not isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return False
        for small in stmt.body:
            if isinstance(small, simple) and not (isinstance(small, cst.Return) and small.value is not None):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString,
                                                                        cst.ConcatenatedString)):
                continue
            return False
    return True


def normalized_code(code: str) -> str:
    """Source text compared as text: without spaces, with one kind of quote (``x["a"]`` == ``x['a']``)."""
    return code.replace('"', "'").replace(" ", "")


# statements and expressions that may run a part of themselves on some paths only
_BRANCHING = ("If", "For", "While", "Try", "TryStar", "Match", "IfExp", "BooleanOperation", "Lambda", "FunctionDef",
              "ClassDef", "ListComp", "SetComp", "DictComp", "GeneratorExp", "Else", "ExceptHandler", "Finally")


def _split(root: cst.CSTNode, a: cst.CSTNode, b: cst.CSTNode) -> tuple[list, list, int]:
    """The ancestries of ``a`` and ``b`` below ``root`` and the length of their common part (0 when either is not
    found, or they share nothing)."""
    pa, pb = ancestry(root, a), ancestry(root, b)
    if pa is None or pb is None:
        return [], [], 0
    k = 0
    while k < min(len(pa), len(pb)) and pa[k] is pb[k]:
        k += 1
    return pa, pb, k


def dominates(root: cst.CSTNode, first: cst.CSTNode, later: cst.CSTNode) -> bool:
    """Is every path from ``root``'s entry to ``later`` through ``first`` (syntactically: ``first`` is reached
    unconditionally from the block that holds both, in a statement before ``later``'s, or in the same
    statement)? False when either is not found."""
    pa, pb, k = _split(root, first, later)
    if k == 0:
        return False
    common = pa[k - 1]
    if k < len(pa) and type(common).__name__ in _BRANCHING \
            and not (pa[k] is getattr(common, "test", None) or pa[k] is getattr(common, "iter", None)):
        return False  # (`first` in a branch or a loop body of the statement that holds both)
    if any(type(n).__name__ in _BRANCHING for n in pa[k:]):
        return False  # (`first` runs on some paths only from the common part)
    body = getattr(common, "body", None)
    if k < len(pa) and k < len(pb) and isinstance(body, (list, tuple)):
        at = next((i for i, n in enumerate(body) if n is pa[k]), None)
        bt = next((i for i, n in enumerate(body) if n is pb[k]), None)
        if at is not None and bt is not None:
            return at <= bt
    return True  # (the same statement: the flow's clock already put `first` first)


_PARENTS: dict[int, tuple[cst.CSTNode, dict[int, cst.CSTNode]]] = {}  # id(root) -> (root kept alive, parent map)


def _parents(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """The parent of every node below ``root`` (by id), built once per root (the last few roots are kept: the
    questions come function by function)."""
    hit = _PARENTS.get(id(root))
    if hit is not None and hit[0] is root:
        return hit[1]
    parent: dict[int, cst.CSTNode] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        for c in children(n):
            parent[id(c)] = n
            stack.append(c)
    if len(_PARENTS) >= 16:
        _PARENTS.pop(next(iter(_PARENTS)))
    _PARENTS[id(root)] = (root, parent)
    return parent


def ancestry(root: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``root`` down to ``node`` (both included), or None when ``node`` is not below ``root``."""
    parent = _parents(root)
    path = [node]
    while path[-1] is not root:
        up = parent.get(id(path[-1]))
        if up is None:
            return None
        path.append(up)
    return path[::-1]


def same_with(root: cst.CSTNode, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Are ``a`` and ``b`` inside one ``with`` statement below ``root`` (the innermost ``with`` holding each is
    the same; a wait before that statement orders both)?"""
    pa, pb = ancestry(root, a), ancestry(root, b)
    wa = next((n for n in reversed(pa or ()) if isinstance(n, cst.With)), None)
    wb = next((n for n in reversed(pb or ()) if isinstance(n, cst.With)), None)
    return wa is not None and wa is wb

def other_arms(root: cst.CSTNode, a: cst.CSTNode, b: cst.CSTNode) -> "cst.If | None":
    """The ``if`` statement below ``root`` with ``a`` and ``b`` in different arms (``a`` in its body and ``b``
    in an ``elif`` / ``else`` arm, or the other way round: no path runs both, and a statement before that ``if``
    reaches both), or None."""
    pa, pb, k = _split(root, a, b)
    if k == 0 or k >= len(pa) or k >= len(pb) or not isinstance(pa[k - 1], cst.If):
        return None
    arms = [arm for arm in (pa[k - 1].body, pa[k - 1].orelse) if arm is not None]
    inside = any(pa[k] is arm for arm in arms) and any(pb[k] is arm for arm in arms)
    return pa[k - 1] if inside else None


def string_annotation(annotation: cst.BaseExpression) -> cst.BaseExpression:
    """A forward reference (``handle: 'AsyncHandle'``, ``x: "pkg.mod.Cls"``, the form code uses for names
    imported under ``TYPE_CHECKING``) as the dotted name it spells; any other annotation unchanged. Built
    from the string's text, never evaluated; a string that is not a dotted name stays a string."""
    if not isinstance(annotation, cst.SimpleString):
        return annotation
    try:
        text = annotation.evaluated_value
    except Exception:  # (a malformed literal: no name)
        return annotation
    parts = text.strip().split(".") if isinstance(text, str) else []
    if not parts or not all(p.isidentifier() for p in parts):
        return annotation
    expr: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def guarded_assigns(fn: cst.FunctionDef, name: str) -> list[tuple[cst.BaseExpression, tuple, cst.Assign]]:
    """Every plain ``name = value`` statement of ``fn``'s own body (not of a nested def / class): (value, the
    ``if`` tests around it as (test, holds) pairs, the statement). ``if C: ctx = partial(torch.cuda.stream, s)``
    / ``else: ctx = suppress``: the ``else`` arm's test is (C, False). A binding inside a loop, ``with`` or
    ``try`` keeps the ``if`` tests around it only."""
    out: list[tuple[cst.BaseExpression, tuple, cst.Assign]] = []

    def walk(stmts, guards: tuple) -> None:
        for stmt in stmts:
            if isinstance(stmt, cst.SimpleStatementLine):
                out.extend((small.value, guards, small) for small in stmt.body if isinstance(small, cst.Assign)
                           and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                           and small.targets[0].target.value == name)
            elif isinstance(stmt, cst.If):
                walk_if(stmt, guards)
            elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                for block in _blocks(stmt):
                    walk(block, guards)

    def walk_if(node: cst.If, guards: tuple) -> None:
        walk(_stmts(node.body), (*guards, (node.test, True)))
        if isinstance(node.orelse, cst.If):
            walk_if(node.orelse, (*guards, (node.test, False)))
        elif isinstance(node.orelse, cst.Else):
            walk(_stmts(node.orelse.body), (*guards, (node.test, False)))

    walk(_stmts(fn.body), ())
    return out


def _stmts(suite: cst.BaseSuite) -> list:
    return list(suite.body) if isinstance(suite, cst.IndentedBlock) else []


def _blocks(stmt: cst.CSTNode) -> list[list]:
    """The statement lists of a compound statement (``for`` / ``while`` / ``with`` / ``try`` and their
    ``else`` / ``except`` / ``finally`` blocks)."""
    out = []
    for part in (getattr(stmt, "body", None), getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None)):
        if isinstance(part, cst.BaseSuite):
            out.append(_stmts(part))
        elif isinstance(part, (cst.Else, cst.Finally)):
            out.append(_stmts(part.body))
    out.extend(_stmts(handler.body) for handler in getattr(stmt, "handlers", ()) or ())
    return out
