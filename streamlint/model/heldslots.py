"""Tensors an object holds in its fields: where other methods use them and where they are released.

A tensor stored into a field of ``self`` (``self.blocks[req] = t``, ``self.ready.append(t)``,
``self.cache = t``) outlives the function that made it: the methods of the class that read the field use
it later, each on the stream current there (the stream scope around the read, or the stream the class's
own callers of that method run it on; the caller's current stream otherwise), and the memory goes back
to the allocator where another method drops it (``del self.blocks[req]``, ``self.blocks.pop(req)``,
``self.ready.clear()``, ``self.blocks[req] = None``, a rebinding of the field outside the constructor).
A release that first joins the streams (a host synchronisation, a stream or event wait before it in the
releasing method) is ordered after their uses; a field never released lives as long as the object.

This is the class-level half of SL301's lifetime analysis: the function-level dataflow knows where a
tensor is allocated and recorded; :func:`held_fields` says who else uses it and whether the object
frees it unordered (summarised once per class).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamlint._lazy import cst

from streamlint.model.apis import Role
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.streams import MAIN, derived, is_current_stream
from streamlint.model.syntax import local_nodes, self_attribute

# methods that build the object's state once: a field set there is not released there
_INIT_METHODS = ("__init__", "__post_init__", "setup", "build")
_RELEASE_CALLS = frozenset({"clear", "pop", "popitem", "remove", "popleft"})
_WRITE_CALLS = frozenset({"append", "extend", "insert", "setdefault", "update", "appendleft", "add"})
_HOST_ONLY = frozenset({"keys", "__len__", "__contains__", "copy"})
_JOIN_CALLS = frozenset({"synchronize", "wait_stream", "wait_event"})


@dataclass(frozen=True)
class SlotRead:
    """A method's use of what a field holds."""

    method: str
    node: cst.CSTNode  # the statement reading the field
    stream: str | None  # the stream current there ("self.copy_stream", MAIN); None: not resolved


@dataclass(frozen=True)
class Release:
    """A statement dropping what a field holds."""

    method: str
    node: cst.CSTNode
    joined: bool  # the releasing method joins streams (waits, synchronises) before it


@dataclass(frozen=True)
class HeldField:
    reads: tuple[SlotRead, ...]
    releases: tuple[Release, ...]
    recorders: frozenset[str]  # methods that read the field and record what they read on some stream

    def unjoined_release(self) -> Release | None:
        return next((r for r in self.releases if not r.joined), None) if all(
            not r.joined for r in self.releases) else None


def held_fields(project, file: FileModel, class_name: str | None) -> dict[str, HeldField]:
    """The fields of the class and how its methods use and release them (memoised per class)."""
    cls = file.classes.get(class_name or "")
    if cls is None:
        return {}
    memo = derived(project, "held_fields")  # (project-wide: it depends on other modules' wrappers and streams)
    key = (file.path, class_name)
    if key not in memo:
        memo[key] = _summarise(project, file, cls)
    return memo[key]


def _summarise(project, file: FileModel, cls: ClassInfo) -> dict[str, HeldField]:
    reads: dict[str, list[SlotRead]] = {}
    releases: dict[str, list[Release]] = {}
    recorders: dict[str, set[str]] = {}
    callers = _class_call_streams(project, file, cls)
    join_lines: dict[str, list[int]] = {}  # qualname -> the method's join lines, taken when a release asks
    for name, method in cls.methods.items():
        records = any(site.method == "record_stream" for site in method.calls)
        for stmt in _statements(method.node.body):
            released = _released(stmt) if name not in _INIT_METHODS and name != "__del__" else None
            if released is not None:
                # (a position costs the code generation of the statement: asked only for a release)
                joins = join_lines.get(method.qualname)
                if joins is None:
                    joins = join_lines[method.qualname] = _join_lines(file, method)
                joined = (bool(joins) and any(j < file.span(stmt).start_line for j in joins)) \
                    or (name in callers and _after_joins(file, callers[name][1], join_lines))
                releases.setdefault(released, []).append(Release(name, stmt, joined))
                continue
            for field in _read_fields(stmt):
                stream = _stream_at(project, file, method, stmt, callers.get(name, (MAIN, None))[0])
                reads.setdefault(field, []).append(SlotRead(name, stmt, stream))
                if records:
                    recorders.setdefault(field, set()).add(name)
    for closure in _closures(file, cls):  # a hook a method defines (`def hook(...)` in `__init__`), registered for
        for field in _recorded_fields(closure):  # autograd: it records what it reads of a field
            recorders.setdefault(field, set()).add(closure.qualname)
    fields = set(reads) | set(releases)
    return {f: HeldField(tuple(reads.get(f, ())), tuple(releases.get(f, ())), frozenset(recorders.get(f, ())))
            for f in fields}


def _recorded_fields(closure: FunctionInfo) -> set[str]:
    """The fields whose contents the closure records: ``self.kept[k].record_stream(s)``, or the record of a local
    it bound from a read of the field (``held = self.kept[k]``; ``held.record_stream(s)``). A record of another
    value (the hook's ``output``) covers nothing the field holds."""
    bound: dict[str, set[str]] = {}
    for stmt in _statements(closure.node.body):
        if isinstance(stmt, cst.Assign):
            for t in stmt.targets:
                for name in (t.target, *(el.value for el in getattr(t.target, "elements", ()))):
                    if isinstance(name, cst.Name):
                        bound.setdefault(name.value, set()).update(_read_fields(stmt))
    out: set[str] = set()
    for site in closure.calls:
        if site.method != "record_stream" or not isinstance(site.node.func, cst.Attribute):
            continue
        recv = site.node.func.value
        while isinstance(recv, (cst.Subscript, cst.Attribute)) and self_attribute(recv) is None:
            recv = recv.value  # (`self.kept[k].data`: the field's)
        if self_attribute(recv) is not None:
            out.add(self_attribute(recv))
        elif isinstance(recv, cst.Name):
            out |= bound.get(recv.value, set())
    return out


def _closures(file: FileModel, cls: ClassInfo) -> list:
    """The functions nested in the class's methods (at any depth), whose ``self`` is the method's."""
    methods = {id(m) for m in cls.methods.values()}
    out = []
    for fn in file.functions.values():
        outer = fn.parent
        while outer is not None and id(outer) not in methods:
            outer = outer.parent
        if outer is not None and "self" not in fn.all_params:
            out.append(fn)
    return out


def _statements(body: cst.CSTNode):
    for node in local_nodes(body):
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body
        elif isinstance(node, cst.For):
            yield node  # (a loop header reads its iterable)


def _released(stmt: cst.CSTNode) -> str | None:
    """The field a statement drops the contents of, if any."""
    if isinstance(stmt, cst.Del):
        targets = stmt.target.elements if isinstance(stmt.target, cst.Tuple) else [stmt.target]
        for t in targets:
            t = t.value if isinstance(t, cst.Element) else t
            if isinstance(t, cst.Subscript) and self_attribute(t.value):
                return self_attribute(t.value)
            if self_attribute(t):
                return self_attribute(t)
        return None
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
        func = stmt.value.func
        if isinstance(func, cst.Attribute) and func.attr.value in _RELEASE_CALLS and self_attribute(func.value):
            return self_attribute(func.value)  # (a discarded pop: the value is dropped)
        return None
    if isinstance(stmt, cst.Assign):
        value = stmt.value
        empty = (isinstance(value, cst.Name) and value.value == "None") or (
            isinstance(value, (cst.Dict, cst.List)) and not value.elements and not isinstance(value, cst.Set)) or (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("dict", "list")
            and not value.args)
        for t in stmt.targets:
            target = t.target
            if isinstance(target, cst.Subscript) and self_attribute(target.value) and isinstance(value, cst.Name) \
                    and value.value == "None":
                return self_attribute(target.value)
            if self_attribute(target) and empty:
                return self_attribute(target)
    return None


def _read_fields(stmt: cst.CSTNode) -> list[str]:
    """Fields whose contents a statement hands to something (not stores into them, not host bookkeeping:
    ``k in self.d``, ``len(self.d)``, ``self.d.keys()``)."""
    if isinstance(stmt, cst.For):
        roots = [stmt.iter]
    elif isinstance(stmt, cst.Assign):
        roots = [stmt.value] + [el for t in stmt.targets if isinstance(t.target, cst.Subscript) for el in t.target.slice]
        if _reference_move(stmt):  # `self.kept[k] = self.staged[k]`: the reference is stored, no kernel reads it
            roots = roots[1:]
    elif isinstance(stmt, (cst.AugAssign, cst.AnnAssign)):
        roots = [stmt.value] if stmt.value is not None else []
    elif isinstance(stmt, (cst.Expr, cst.Return)):
        roots = [stmt.value] if stmt.value is not None else []
    else:
        return []
    out: list[str] = []
    for root in roots:
        skip: set[int] = set()
        for node in local_nodes(root):
            if id(node) in skip:
                continue
            if isinstance(node, cst.Comparison) and any(isinstance(c.operator, (cst.In, cst.NotIn))
                                                        for c in node.comparisons):
                skip |= {id(n) for c in node.comparisons for n in local_nodes(c.comparator)}
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("len", "id"):
                skip |= {id(n) for n in local_nodes(node)}
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value in _HOST_ONLY | _WRITE_CALLS and self_attribute(node.func.value):
                skip |= {id(n) for n in local_nodes(node.func)}
            else:
                field = self_attribute(node)
                if field is not None and field not in out:
                    out.append(field)
    return out


def _reference_move(stmt: cst.Assign) -> bool:
    """``self.kept[k] = self.staged[k]`` / ``self.last = self.slots[i]``: a field's contents (an element, as written)
    stored as they are into another field of the object: the reference moves, no stream reads the memory. (Its
    later readers read the other field: judged there.)"""
    value = stmt.value
    base = value.value if isinstance(value, cst.Subscript) else value
    return isinstance(base, cst.Attribute) and self_attribute(base) is not None and all(
        self_attribute(t.target.value if isinstance(t.target, cst.Subscript) else t.target) is not None
        for t in stmt.targets)


def _class_call_streams(project, file: FileModel, cls: ClassInfo) -> dict[str, tuple[str | None, list]]:
    """For each method the class calls as ``self.m(...)``: (the stream current at those calls, when all agree,
    else None; those calls as (calling method, site), for :func:`_after_joins`)."""
    found: dict[str, list[tuple[str | None, FunctionInfo, object]]] = {}
    for method in cls.methods.values():
        for site in method.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                    and func.attr.value in cls.methods and cls.methods[func.attr.value] is not method:
                found.setdefault(func.attr.value, []).append(
                    (_stream_at(project, file, method, site.node, MAIN), method, site))
    out: dict[str, tuple[str | None, list]] = {}
    for name, calls in found.items():
        streams = {s for s, _, _ in calls}
        out[name] = (streams.pop() if len(streams) == 1 else None, [(m, site) for _, m, site in calls])
    return out


def _after_joins(file: FileModel, calls: list, joins: dict[str, list[int]]) -> bool:
    """Does every one of the ``self.m(...)`` calls come after a join in its calling method? (Asked for a releasing
    method only: a position costs the code generation of its statement. ``joins``: the join lines per method.)"""
    for method, site in calls:
        lines = joins.get(method.qualname)
        if lines is None:
            lines = joins[method.qualname] = _join_lines(file, method)
        if not (lines and any(j < file.span(site.node).start_line for j in lines)):
            return False
    return True


def _join_lines(file: FileModel, method: FunctionInfo) -> list[int]:
    """The lines of the method's joins (synchronise, waits), taken only when a release or a ``self`` call of the
    method asks: a position costs the code generation of its statement."""
    return [file.span(site.node).start_line for site in method.calls if site.method in _JOIN_CALLS]


def _stream_at(project, file: FileModel, fn: FunctionInfo, node: cst.CSTNode, outside: str | None) -> str | None:
    """The stream current at ``node`` in ``fn``: the innermost stream scope around it, else ``outside``."""
    # (positions asked only with a stream scope in the method: each costs the code generation of its statement)
    sites = [site for site in fn.scopes if any(u.role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH)
                                               for u in project.scope_use(file, site).uses)]
    if not sites:
        return outside
    span = file.span(node)
    best = None
    for site in sites:
        ws = file.span(site.with_node)
        if ws.start_line <= span.start_line and span.end_line <= ws.end_line and (
                best is None or file.span(best.with_node).start_line <= ws.start_line):
            best = site
    if best is None:
        return outside
    use = next(u for u in project.scope_use(file, best).uses
               if u.role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH))
    expr = use.arg("stream") if use.role is Role.NATIVE_STREAM_CONTEXT else None
    if expr is None:
        return None
    return stream_text(project, file, fn, expr)


def result_fields(project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> frozenset[str]:
    """The fields of the object its own callers keep ``fn``'s result in (``moved, done = self._copy(g)``
    ... ``self.ready[g] = (moved, done)``; through methods that return the call). Callers that use the
    result themselves are judged by their own flow; empty when the class never calls ``fn``."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or cls.methods.get(fn.node.name.value) is not fn or _depth > 3:
        return frozenset()
    out: set[str] = set()
    seen = 0
    for method in cls.methods.values():
        for site in method.calls:
            func = site.node.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and func.value.value == "self" and func.attr.value == fn.node.name.value) or method is fn:
                continue
            seen += 1
            stmt = _statement_of(method, site.node)
            if isinstance(stmt, cst.Return) and stmt.value is site.node:
                kept = result_fields(project, file, method, _depth + 1)
            elif isinstance(stmt, cst.Assign) and stmt.value is site.node:
                names = {n.value for t in stmt.targets for n in local_nodes(t.target) if isinstance(n, cst.Name)}
                kept = _stored_fields(method, names)
            else:
                kept = frozenset()
            out |= kept
    return frozenset(out) if seen else frozenset()


def _statement_of(method: FunctionInfo, call: cst.Call) -> cst.CSTNode | None:
    for stmt in _statements(method.node.body):
        if isinstance(stmt, (cst.Return, cst.Assign)) and stmt.value is call:
            return stmt
    return None


def _stored_fields(method: FunctionInfo, names: set[str]) -> frozenset[str]:
    """Fields a method stores one of ``names`` into (``self.f[k] = (a, b)``, ``self.f.append(a)``, ``self.f = a``)."""
    out: set[str] = set()
    for stmt in _statements(method.node.body):
        if isinstance(stmt, cst.Assign):
            if any(isinstance(n, cst.Name) and n.value in names for n in local_nodes(stmt.value)):
                for t in stmt.targets:
                    target = t.target.value if isinstance(t.target, cst.Subscript) else t.target
                    if self_attribute(target):
                        out.add(self_attribute(target))
        elif isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
            func = stmt.value.func
            if isinstance(func, cst.Attribute) and func.attr.value in _WRITE_CALLS and self_attribute(func.value) \
                    and any(isinstance(n, cst.Name) and n.value in names
                            for a in stmt.value.args for n in local_nodes(a.value)):
                out.add(self_attribute(func.value))
    return frozenset(out)


def stream_text(project, file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression,
                _depth: int = 0) -> str | None:
    """A stream expression as the dataflow names it across methods: a field of ``self`` (``self.side``), the
    current stream (MAIN), a local assigned once from one of those; None otherwise."""
    if is_current_stream(project, file, fn, expr):
        return MAIN
    if isinstance(expr, cst.Name):
        values = fn.name_assigns.get(expr.value, [])
        if len(values) == 1 and values[0] is not None and _depth < 4:  # (bounded: `a, b = b, a`)
            return stream_text(project, file, fn, values[0], _depth + 1)
        return None
    if self_attribute(expr):
        return file.code(expr)
    return None


__all__ = ["HeldField", "Release", "SlotRead", "held_fields", "result_fields", "stream_text"]
