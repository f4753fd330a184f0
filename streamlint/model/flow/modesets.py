"""Two sides of a race whose tests need disjoint members of one batch's mode enum (issue 16, [correlated-guard]).

:mod:`~streamlint.model.flow.phaseguards` reads the phase a mode test names by its words (``is_decode()``); a mode
the words do not settle (``is_context_parallel_extend()``, which also admits a mixed batch) or a test of a part only
one mode's batches carry (``batch.cp_meta is not None``) names no phase there. This module reads what the project
says instead, and gives each side, per enum class, the set of members its tests allow for the batch object the race
rests on (the name :func:`~streamlint.model.flow.batchguards.batch_guard` found both sides testing):

- a mode test ``batch.<path>.is_x()`` (no argument): the one project definition of ``is_x``, a method of an
  ``Enum`` class whose body is one ``return`` of ``self == E.M`` / ``self is E.M`` / ``self in (E.M, ...)``, their
  ``or`` (a union), ``and`` (an intersection of the parts it reads; a negated part is read as no constraint),
  ``X if flag else False`` (X's members: it is true only where X is), ``False``, or another such method of the class;
- ``batch.<path> == E.M`` / ``is E.M`` / ``in (E.M, ...)``;
- a presence test ``batch.f is not None``: ``f`` holds a value only where the project puts one, and every statement
  putting one (``x.f = v``, v not None) must sit in ``if`` arms whose tests allow only some members for ``x`` (the
  union over the statements); a keyword ``f=`` of any call, a ``setattr``, too many files: no constraint;
- a call of a project function handed the object (``can_split(n, batch)``) that returns ``True`` only in one
  ``if T: return True`` (every other ``return`` giving ``False``): T's constraint on that parameter.

The sides are exclusive when some enum class gets two disjoint sets (a context-parallel prefill gather, allowed for
EXTEND or MIXED batches, and a decode-only reader, DECODE or IDLE), and no loop of the reader's function holds both
sides (:func:`~streamlint.model.flow.phaseguards._loop_carried`). The race then needs one batch in two modes at
once: low. Anything not read (a method defined twice, a body of another shape, a mode stored elsewhere) adds no
constraint, so a side with none keeps the race's confidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.phaseguards import _conjuncts, _disjuncts, _loop_carried, _negating
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.syntax import contains, descendants as _walk, local_nodes, node_memo
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 2  # helpers and presence tests followed from one side's test
Sets = dict[str, frozenset]  # "path:enum class" (the mode's path below the object) -> the members allowed


def _root(expr: cst.BaseExpression) -> str | None:
    text = dotted(expr)
    return text.split(".")[0] if text else None


def _rest(expr: cst.BaseExpression) -> str:
    """The path below the object's name (``batch.mode`` -> ``mode``): two attributes of one enum class are two
    modes (a mode and the mode saved before a change), kept apart."""
    return (dotted(expr) or "").partition(".")[2]


def _member(expr: cst.BaseExpression) -> tuple[str, str] | None:
    """``E.M`` -> (E, M)."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return expr.value.value, expr.attr.value
    return None


def _compared(conj: cst.Comparison) -> tuple[str, frozenset] | None:
    """(E, members) of ``x == E.M`` / ``x is E.M`` / ``x in (E.M1, E.M2)``, one enum class throughout."""
    if len(conj.comparisons) != 1:
        return None
    op, right = conj.comparisons[0].operator, conj.comparisons[0].comparator
    if isinstance(op, (cst.Equal, cst.Is)):
        found = _member(right)
        return (found[0], frozenset((found[1],))) if found else None
    if isinstance(op, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)) and right.elements:
        parts = [_member(e.value) for e in right.elements]
        if all(parts) and len({p[0] for p in parts}) == 1:
            return parts[0][0], frozenset(p[1] for p in parts)
    return None


def _enum_method(project: Project, name: str):
    """(class info, method) of the one project definition of ``name``, a method of an Enum class, else None."""
    memo = project.derived("modesets_methods")
    if name not in memo:
        found = []
        paths = project.paths_containing((f"def {name}(".encode(),))
        for path in paths if len(paths) <= MAX_CALLER_FILES else ():
            model = project.file(path)
            for fn in model.iter_functions() if model is not None else ():
                if fn.node.name.value == name:
                    cls = model.classes.get(fn.class_name or "")
                    found.append((cls, fn) if cls is not None and any(b.endswith("Enum") for b in cls.bases) else None)
        memo[name] = found[0] if len(found) == 1 and len(paths) <= MAX_CALLER_FILES else None
    return memo[name]


def _body_members(project: Project, cls, expr: cst.BaseExpression, depth: int) -> frozenset | None:
    """The members of ``cls`` for which the enum method's returned ``expr`` is true, None when not read."""
    name = cls.node.name.value
    if isinstance(expr, cst.Name) and expr.value == "False":
        return frozenset()
    if isinstance(expr, cst.Comparison) and isinstance(expr.left, cst.Name) and expr.left.value == "self":
        found = _compared(expr)
        return found[1] if found is not None and found[0] == name else None
    if isinstance(expr, cst.IfExp) and isinstance(expr.orelse, cst.Name) and expr.orelse.value == "False":
        return _body_members(project, cls, expr.body, depth)
    if isinstance(expr, cst.BooleanOperation):
        if isinstance(expr.operator, cst.Or):
            parts = [_body_members(project, cls, d, depth) for d in _disjuncts(expr)]
            return frozenset().union(*parts) if all(p is not None for p in parts) else None
        parts = [p for p in (_body_members(project, cls, c, depth) for c in _conjuncts(expr)) if p is not None]
        return frozenset.intersection(*parts) if parts else None
    if isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) \
            and dotted(expr.func.value) == "self" and depth < MAX_DEPTH:
        method = cls.methods.get(expr.func.attr.value)
        return _method_body(project, cls, method, depth + 1) if method is not None else None
    return None


def _method_body(project: Project, cls, fn, depth: int) -> frozenset | None:
    body = [s for s in fn.node.body.body if not (isinstance(s, cst.SimpleStatementLine) and isinstance(
        s.body[0], cst.Expr) and isinstance(s.body[0].value, cst.SimpleString))] \
        if isinstance(fn.node.body, cst.IndentedBlock) else []
    stmt = body[0].body[0] if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) else None
    if not isinstance(stmt, cst.Return) or stmt.value is None:
        return None
    return _body_members(project, cls, stmt.value, depth)


def _conj_sets(project: Project, model, conj: cst.BaseExpression, name: str, depth: int) -> Sets:
    """What one conjunct of a test allows for the object ``name`` (module docstring)."""
    if isinstance(conj, cst.BooleanOperation) and isinstance(conj.operator, cst.Or):
        parts = [_conj_sets(project, model, d, name, depth) for d in _disjuncts(conj)]
        common = set(parts[0]).intersection(*parts[1:])
        return {c: frozenset().union(*(p[c] for p in parts)) for c in common}
    if _negating(conj):
        return {}
    if isinstance(conj, cst.Call) and isinstance(conj.func, cst.Attribute) and not conj.args:
        if _root(conj.func.value) != name:
            return {}
        found = _enum_method(project, conj.func.attr.value)
        members = _method_body(project, found[0], found[1], 0) if found is not None else None
        return {f"{_rest(conj.func.value)}:{found[0].node.name.value}": members} if members is not None else {}
    if isinstance(conj, cst.Comparison) and len(conj.comparisons) == 1:
        right = conj.comparisons[0].comparator
        if isinstance(conj.comparisons[0].operator, cst.IsNot) and isinstance(right, cst.Name) \
                and right.value == "None":
            left = dotted(conj.left)
            parts = left.split(".") if left else []
            return _presence(project, parts[1], depth + 1) if len(parts) == 2 and parts[0] == name else {}
        found = _compared(conj) if _root(conj.left) == name else None
        return {f"{_rest(conj.left)}:{found[0]}": found[1]} if found is not None else {}
    if isinstance(conj, cst.Call) and depth < MAX_DEPTH:
        return _helper_sets(project, model, conj, name, depth + 1)
    return {}


def _tests_sets(project: Project, model, fn: cst.FunctionDef, node: cst.CSTNode, name: str, depth: int) -> Sets:
    """What the tests of the ``if`` statements of ``fn`` whose body holds ``node`` allow for ``name``."""
    ifs = node_memo("phaseguards_ifs", fn, lambda f: tuple(n for n in local_nodes(f) if isinstance(n, cst.If)))
    out: dict[str, frozenset] = {}
    for n in ifs:
        if contains(n.body, node):
            for conj in _conjuncts(n.test):
                for cls, members in _conj_sets(project, model, conj, name, depth).items():
                    out[cls] = out[cls] & members if cls in out else members
    return out


def _helper_sets(project: Project, model, call: cst.Call, name: str, depth: int) -> Sets:
    """What a project function handed ``name`` needs of it to return True (one ``if T: return True``)."""
    try:
        found = project.function(model.resolve(call.func, None), model)
    except Exception:  # (a shape the resolver does not expect: no callee)
        return {}
    if found is None:
        return {}
    fn, home = found
    bound = bind_arguments(fn.params + fn.kwonly, call, kwonly=fn.kwonly)
    param = next((p for p, e in bound.items() if isinstance(e, cst.Name) and e.value == name), None)
    returns = [n for n in local_nodes(fn.node) if isinstance(n, cst.Return)]
    true = [r for r in returns if isinstance(r.value, cst.Name) and r.value.value == "True"]
    if param is None or len(true) != 1 or any(
            r is not true[0] and not (isinstance(r.value, cst.Name) and r.value.value == "False") for r in returns):
        return {}
    test = next((n.test for n in local_nodes(fn.node) if isinstance(n, cst.If) and contains(n.body, true[0])
                 and not any(isinstance(s, cst.If) and s is not n and contains(n.body, s) and contains(s, true[0])
                             for s in local_nodes(n.body))), None)
    if test is None:
        return {}
    out: dict[str, frozenset] = {}
    for conj in _conjuncts(test):
        for cls, members in _conj_sets(project, home, conj, param, depth).items():
            out[cls] = out[cls] & members if cls in out else members
    return out


def _presence(project: Project, field: str, depth: int) -> Sets:
    """What every statement storing a value in ``<x>.field`` needs of ``x`` (the union over them)."""
    if depth > MAX_DEPTH:
        return {}
    memo = project.derived("modesets_presence")
    if field in memo:
        return memo[field]
    memo[field] = {}
    paths = project.paths_containing((field.encode(),))
    out: dict[str, frozenset] | None = None
    seen = 0
    for path in paths if len(paths) <= MAX_CALLER_FILES else ():
        model = project.file(path)
        if model is None:
            return {}
        for fn in model.iter_functions():
            for node in local_nodes(fn.node):
                if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value == field \
                        or isinstance(node, cst.Call) and dotted(node.func) == "setattr" and not _other_name(node, field):
                    return {}  # (set at a construction, or by name: not read)
                if not isinstance(node, cst.Assign) or isinstance(node.value, cst.Name) and node.value.value == "None":
                    continue
                for t in node.targets:
                    if isinstance(t.target, cst.Attribute) and t.target.attr.value == field:
                        seen += 1
                        obj = dotted(t.target.value)
                        sets = _tests_sets(project, model, fn.node, node, obj, depth) if obj else {}
                        out = sets if out is None else {c: out[c] | sets[c] for c in set(out) & set(sets)}
                        if not out:
                            return {}
    if out and seen != _stores(project, paths, field):
        return {}  # (a store outside every function, or of another form: not read)
    memo[field] = out or {}
    return memo[field]


def _other_name(call: cst.Call, field: str) -> bool:
    """Does ``setattr(obj, "name", v)`` name, as a literal, another attribute than ``field``?"""
    name = call.args[1].value if len(call.args) > 1 else None
    return isinstance(name, cst.SimpleString) and name.value.strip("'\"") != field


def _stores(project: Project, paths, field: str) -> int:
    """The statements of the files ``paths`` storing a value other than None in some ``<x>.field``."""
    count = 0
    for path in paths:
        for node in _walk(project.file(path).module):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
                [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign)) else []
            value = getattr(node, "value", None)
            if any(isinstance(t, cst.Attribute) and t.attr.value == field for t in targets) and not (
                    isinstance(value, cst.Name) and value.value == "None"):
                count += 1
    return count


def exclusive_modes(project: Project, producer: tuple, reader: tuple, name: str, site: cst.CSTNode | None) -> bool:
    """Do the two sides, each (file model, function node, node), under tests of the object ``name``, need
    disjoint members of one enum class (module docstring), no loop of the reader's function holding both?"""
    mine = _tests_sets(project, *producer, name, 0)
    theirs = _tests_sets(project, *reader, name, 0) if mine else {}
    return any(c in theirs and not mine[c] & theirs[c] for c in mine) and not _loop_carried(reader[1], site, reader[2])


__all__ = ["exclusive_modes"]
