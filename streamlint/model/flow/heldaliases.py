"""A method called through a local name of an object the class holds: ``pipeline = self._pipeline`` ...
``pipeline.on_pending_commit(step)``.

:meth:`Project.call_target` finds the method ``self._pipeline.on_pending_commit(step)`` runs when the class
constructs the field's object (``self._pipeline = PipelineState()``: ``ClassInfo.attr_types``); the same call
made through a local bound once to that field (no other binding of the name: a ``for`` / ``with`` / walrus
target rebinds it) is the same method, when the class and its project subclasses construct one project class
for the field. The flow asks it of a call it does not inline, to know what the callee does with its arguments:
a method that keeps an argument (appends it to a queue, stores it in a field) and touches it otherwise only on
the host (``len``, ``is`` tests, an attribute its class declares ``int`` / a property ``-> int``:
:func:`reads_kept_on_host`) hands it over and reads no device memory (``calls.kept_arguments``); one that keeps
it and may read it is a read on the current stream whose name dying frees nothing (:func:`held_after_call`).

Results a held object hands back from its own storage (:func:`held_call_result`): views of its buffers (slices,
literal / string-key / loop-index subscripts, view methods), never a gather (``ids[order]``), a comparison
(``ids != 0``) or a container a callee, a closure or another name may fill."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.devobjects import annotation_classes
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.metaonly import basic_index
from streamlint.model.flow.values import TVal
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.streams import derived
from streamlint.model.syntax import is_none, local_nodes
from streamlint.model.tensorvocab import ESCAPE_METHODS, VIEW_METHODS
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project


def aliased_field(fn: FunctionInfo, recv: cst.BaseExpression) -> str | None:
    """The field ``attr`` of ``self`` that the local ``recv`` is bound to, once and only to it (no other binding:
    ``for`` / ``with`` / walrus / unpacking targets rebind it too); else None."""
    if not isinstance(recv, cst.Name) or recv.value in fn.all_params or recv.value == "self":
        return None
    values = fn.name_assigns.get(recv.value, [])
    if len(values) != 1 or recv.value in other_bindings(fn):
        return None
    value = values[0]
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
        return value.attr.value
    return None


def _target_names(t: cst.BaseExpression | None) -> set[str]:
    if isinstance(t, cst.Name):
        return {t.value}
    if isinstance(t, (cst.Tuple, cst.List)):
        return {n for el in t.elements for n in _target_names(el.value)}
    return _target_names(t.value) if isinstance(t, cst.StarredElement) else set()


def other_bindings(fn: FunctionInfo) -> set[str]:
    """The names ``fn`` binds other than by ``name = value`` (``FunctionInfo.name_assigns``): loop, ``with``,
    walrus, unpacking, augmented, ``except`` / import / ``del`` / match targets, nested definitions, globals."""
    return {name for name, _node in _bindings(fn)}


def _bindings(fn: FunctionInfo) -> list[tuple[str, cst.CSTNode]]:
    memo = fn.__dict__.setdefault("_held_bindings", [])
    if memo:
        return memo[0]
    out: list[tuple[str, cst.CSTNode]] = []
    stack = list(children(fn.node.body))
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            out.append((n.name.value, n))
            continue
        if isinstance(n, cst.Lambda):
            continue
        names: set[str] = set()
        if isinstance(n, cst.For):
            names = _target_names(n.target)
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            names = _target_names(n.asname.name)
        elif isinstance(n, (cst.NamedExpr, cst.AugAssign)):
            names = _target_names(n.target)
        elif isinstance(n, cst.Assign):
            names = {x for t in n.targets if not isinstance(t.target, cst.Name) for x in _target_names(t.target)}
        elif isinstance(n, cst.ExceptHandler) and n.name is not None:
            names = _target_names(n.name.name)
        elif isinstance(n, (cst.Import, cst.ImportFrom)) and not isinstance(n.names, cst.ImportStar):
            names = {(a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name)
                      else (dotted(a.name) or "").split(".")[0]) for a in n.names}
        elif isinstance(n, cst.Del):
            names = _target_names(n.target)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            names = {item.name.value for item in n.names}
        elif isinstance(n, (cst.MatchAs, cst.MatchStar)) and n.name is not None:
            names = {n.name.value}
        elif isinstance(n, cst.MatchMapping) and n.rest is not None:
            names = {n.rest.value}
        out += [(name, n) for name in names]
        stack.extend(children(n))
    memo.append(out)
    return out


def _key_names(fn: FunctionInfo) -> frozenset[str]:
    """Names bound only as a loop's host index: ``for i in range(n)`` (a Python int) or the key of
    ``for k, v in m.items()`` / ``for k in m.keys()`` (a mapping's key): indexing by one is no gather."""
    keyish: dict[str, bool] = {}
    for name, node in _bindings(fn):
        ok = False
        if isinstance(node, cst.For) and isinstance(node.iter, cst.Call):
            call = node.iter.func
            if dotted(call) == "range" and isinstance(node.target, cst.Name):
                ok = node.target.value == name
            elif isinstance(call, cst.Attribute) and call.attr.value == "keys" and isinstance(node.target, cst.Name):
                ok = node.target.value == name
            elif isinstance(call, cst.Attribute) and call.attr.value == "items" and isinstance(node.target, cst.Tuple) \
                    and node.target.elements:
                first = node.target.elements[0].value
                ok = isinstance(first, cst.Name) and first.value == name
        keyish[name] = keyish.get(name, True) and ok
    return frozenset(n for n, ok in keyish.items() if ok and n not in fn.name_assigns and n not in fn.all_params)


def _class_chain(project: Project, sym):
    """A project class and its project base classes, up the single-base chain (cycles stopped)."""
    seen: set[int] = set()
    while sym is not None and isinstance(sym[0], ClassInfo) and id(sym[0]) not in seen:
        seen.add(id(sym[0]))
        yield sym
        bases = [project.symbol(b, sym[1]) for b in sym[0].bases]
        bases = [b for b in bases if b is not None and isinstance(b[0], ClassInfo)]
        sym = bases[0] if len(bases) == 1 else None


def _method_in(project: Project, sym, name: str) -> tuple[FunctionInfo, FileModel] | None:
    """The method ``name`` instances of the class run (its own, or a project base class's); None if unknown."""
    for cls, mod in _class_chain(project, sym):
        method = cls.methods.get(name)
        if method is not None:
            return (method, mod) if method.params[:1] == ("self",) else None
    return None


def _subclass_ctors(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> list[str] | None:
    """The classes the project subclasses of ``cls`` construct for ``self.<attr>`` (they rebind the field the
    base's methods use); None when one binds it to something else or the subclasses cannot all be searched."""
    memo = derived(project, "held_subclass_ctors")
    key = (file.path, cls.name, attr)
    if key not in memo:
        memo[key] = None
        paths = project.paths_containing((cls.name.encode(),))
        if len(paths) > MAX_CALLER_FILES:
            return None
        out: list[str] = []
        for path in paths:
            model = project.file(path)
            for sub in (model.classes.values() if model is not None else ()):
                if sub is cls or not any((found := project.symbol(b, model)) is not None and found[0] is cls
                                         for b in sub.bases if b):
                    continue
                if attr in sub.methods:
                    return None
                binds = any(a.target == f"self.{attr}" and a.function is not None and a.function.class_name == sub.name
                            for a in model.assigns)
                ctors = [c for c in (sub.attr_types.get(attr), *sub.attr_alternatives.get(attr, ())) if c]
                if binds and not ctors:
                    return None
                deeper = _subclass_ctors(project, model, sub, attr)
                if deeper is None:
                    return None
                out += ctors + deeper
        memo[key] = out
    return memo[key]


def _field_ctors(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> list[str] | None:
    """Every class ``self.<attr>`` may be constructed as, by the class or by a project subclass; None if unknown."""
    sub = _subclass_ctors(project, file, cls, attr)
    if sub is None:
        return None
    return list(dict.fromkeys(c for c in (cls.attr_types.get(attr), *cls.attr_alternatives.get(attr, ()), *sub) if c))


def held_field(fn: FunctionInfo, recv: cst.BaseExpression) -> str | None:
    """The field ``attr`` of ``self`` the receiver ``recv`` is: ``self.attr`` itself or a local alias of it
    (:func:`aliased_field`)."""
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self":
        return recv.attr.value
    return aliased_field(fn, recv)


def held_receiver(file: FileModel, site) -> bool:
    """Is the call a method call on an object the class holds in a field (``self._queue.push(x)``, or through
    a local alias ``q = self._queue; q.push(x)``)?"""
    fn, func = site.function, site.node.func
    if fn is None or not fn.class_name or not isinstance(func, cst.Attribute):
        return False
    attr = held_field(fn, func.value)
    cls = file.classes.get(fn.class_name) if attr is not None else None
    return cls is not None and attr not in cls.methods


def held_method(project: Project, file: FileModel, site) -> tuple[FunctionInfo, FileModel] | None:
    """The project method a call on a held object (:func:`held_receiver`) runs, the direct form and the aliased
    one alike: when the class (with its project subclasses) constructs one project class for the field, the
    method of that class (or of a project base class); when it constructs none, what the call graph finds
    (a declared field type); None when several classes may be there, or for any other call."""
    if not held_receiver(file, site):
        return None
    fn, func = site.function, site.node.func
    ctors = _field_ctors(project, file, file.classes[fn.class_name], held_field(fn, func.value))
    if ctors is None or len(ctors) > 1:
        return None
    if not ctors:
        return project.call_target(file, site)
    return _method_in(project, project.symbol(ctors[0], file), func.attr.value)


_HOST_TYPES = frozenset({"int", "str", "bool", "float", "bytes", "None"})


def reads_kept_on_host(project: Project, file: FileModel, fn: FunctionInfo, param: str) -> bool:
    """Does the method touch its kept argument ``param`` only on the host: keeping it (stored, queued), ``len`` /
    ``isinstance`` / ``is`` tests, and attributes its annotated class declares a host value (a field ``slot: int``,
    a property ``-> int``)? Anything else may read its tensors on the current stream."""
    ann = next((p.annotation for p in fn.node.params.params if p.name.value == param and p.annotation), None)
    ann = ann.annotation if ann is not None else None
    ann = ann.value if isinstance(ann, cst.Subscript) else ann  # `PendingCommit[Seq, T]`
    qual = file.resolve(ann, fn) if isinstance(ann, (cst.Name, cst.Attribute)) else None
    chain = list(_class_chain(project, project.symbol(qual, file))) if qual else []
    allowed: set[int] = set()
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == param \
                and _host_attr(chain, n.attr.value):
            allowed.add(id(n.value))
        elif isinstance(n, cst.Call) and dotted(n.func) in ("len", "isinstance") and n.args:
            allowed.add(id(n.args[0].value))
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ESCAPE_METHODS:
            allowed |= {id(a.value) for a in n.args}
        elif isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None and any(
                isinstance(t, (cst.Attribute, cst.Subscript)) for t in _assign_targets(n)):
            allowed |= {id(n.value)} | {id(el.value) for el in getattr(n.value, "elements", ())}  # stored
        elif isinstance(n, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in n.comparisons):
            allowed |= {id(n.left), *(id(c.comparator) for c in n.comparisons)}
    uses = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Name) and n.value == param]
    return all(id(n) in allowed for n in uses)


def _assign_targets(n) -> list:
    return [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]  # (also AugAssign, walrus)


def _kept_and_read(project: Project, file: FileModel, site, stored_params) -> list[cst.BaseExpression]:
    """The arguments of ``alias.m(x)`` that the method keeps (stores, queues) but may also read on the device
    (not :func:`reads_kept_on_host`): a read on the current stream, and the caller's name dying frees nothing."""
    found = held_method(project, file, site)
    if found is None:
        return []
    fn, mod = found
    kept = {p for p in stored_params(project, mod, fn) if not reads_kept_on_host(project, mod, fn, p)}
    bound = bind_arguments(fn.params[1:] + fn.kwonly, site.node, kwonly=fn.kwonly) if kept else {}
    return [expr for name, expr in bound.items() if name in kept and expr is not None]


def held_after_call(flow, st, call: cst.Call, out, site, stored_params) -> None:
    """After a call the flow dispatched: its result when it is a view of what a held object keeps
    (:func:`held_call_result`), and the arguments a held object's method keeps while reading them
    (:func:`_kept_and_read`; ``stored_params``: ``calls.stored_params``, which imports this module), are
    escaped: the caller's names for them dying frees nothing."""
    if isinstance(out, TVal) and out.sid in st.stores \
            and held_call_result(flow.project, flow.cfile, flow.cfn, call):
        st.stores[out.sid].escaped = True
    for expr in _kept_and_read(flow.project, flow.cfile, site, stored_params) if site is not None else ():
        if isinstance(expr, cst.Name):
            for tv in flow.tensors(st, st.env.get(expr.value)):
                if tv.sid in st.stores:
                    st.stores[tv.sid].escaped = True


def _host_attr(chain: list, attr: str) -> bool:
    """``attr`` of the class chain is declared a host value: a field ``attr: int`` or a property ``-> int``."""
    for cls, _mod in chain:
        method = cls.methods.get(attr)
        if method is not None:
            ret = method.node.returns
            return "property" in (d.rsplit(".", 1)[-1] for d in method.decorators) and ret is not None \
                and _host_type(ret.annotation)
        for stmt in cls.node.body.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                    return _host_type(small.annotation.annotation)
    return False


def _host_type(a: cst.BaseExpression) -> bool:
    return isinstance(a, cst.Name) and a.value in _HOST_TYPES or is_none(a)


# ---- results a held object hands back from its own storage

def _host_literal(e: cst.BaseExpression) -> bool:  # (a function: LibCST is imported lazily)
    """A host value: a number or string literal, an identity test (``x is None``) or a boolean of them. Any other
    comparison (``ids != 0``) may be a new device tensor."""
    if isinstance(e, cst.Comparison):
        return all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in e.comparisons)
    if isinstance(e, cst.BooleanOperation):
        return _host_literal(e.left) and _host_literal(e.right)
    return isinstance(e, (cst.Integer, cst.Float, cst.SimpleString))


def _root(e: cst.BaseExpression, gathers: bool = False, keys: frozenset = frozenset()) -> cst.BaseExpression:
    """The name an expression's memory is reached from, through attributes, subscripts and views (``.items()``
    of a mapping too): ``self.ids[:n].unsqueeze(0)`` -> ``self``. Indexing by anything but slices, literals and
    string keys, ``keys`` (:func:`_key_names`) (``self.ids[self.order[:n]]``: a gather into a new block) stops
    there unless ``gathers`` (a receiver path: ``self.pairs[self.current].device``, objects, not tensor storage)."""
    while True:
        if isinstance(e, cst.Subscript) and not gathers and not all(_plain_index(el.slice, keys) for el in e.slice):
            return e
        if isinstance(e, (cst.Attribute, cst.Subscript)):
            e = e.value
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) \
                and e.func.attr.value in VIEW_METHODS | {"items", "values", "popitem"}:
            e = e.func.value
        else:
            return e


def _plain_index(sl: cst.BaseSlice, keys: frozenset) -> bool:
    """A slice, a literal, a string key or a loop's host index: no gather."""
    v = sl.value if isinstance(sl, cst.Index) else None
    return basic_index(sl) or isinstance(v, cst.SimpleString) or _name_in(v, keys)


def _name_in(e: cst.BaseExpression | None, names: frozenset) -> bool:
    return isinstance(e, cst.Name) and e.value in names


def _loop_names(fn: FunctionInfo) -> set[str]:
    """Loop names of ``fn`` bound to the elements of something ``self`` holds (``for k, t in self.d.items()``)."""
    out: set[str] = set()
    stack = list(children(fn.node.body))
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, cst.For) and _name_in(_root(n.iter, False, _key_names(fn)), frozenset({"self"})):
            targets = [n.target] if isinstance(n.target, cst.Name) else [
                el.value for el in getattr(n.target, "elements", ())]
            out |= {t.value for t in targets if isinstance(t, cst.Name)}
        stack.extend(children(n))
    return out


def _own(e: cst.BaseExpression | None, roots: set[str], locals_: dict | None = None,
         keys: frozenset = frozenset()) -> bool:
    """``e`` is storage the object holds (``self.ids[:n]``, a loop name over its fields) or a host value."""
    if e is None or _host_literal(e) or isinstance(e, (cst.Dict, cst.List, cst.Tuple)) \
            and not getattr(e, "elements", ()):
        return True
    if isinstance(e, cst.Name):
        return e.value in ("None", "True", "False") or e.value in roots or locals_ is not None and e.value in locals_ and all(
            not isinstance(v, cst.Name) and _own(v, roots, None, keys) for v in locals_[e.value])  # `n = self.n`
    if isinstance(e, cst.IfExp):
        return _own(e.body, roots, locals_, keys) and _own(e.orelse, roots, locals_, keys)
    root = _root(e, False, keys)
    return root is not e and isinstance(root, cst.Name) and root.value in roots


def _own_container(fn: FunctionInfo, name: str) -> bool:
    """The local ``name`` is bound once to a container (a dict, a list, a record class called with keywords)
    filled only with the object's own storage and host values, also by ``name[k] = v`` / ``name[k].append(v)``."""
    values = fn.name_assigns.get(name, [])
    if len(values) != 1 or not isinstance(values[0], (cst.Call, cst.Dict)) or name in fn.all_params:
        return False
    roots = {"self", name} | _loop_names(fn)
    built = values[0]
    items = [el.value for el in built.elements] if isinstance(built, cst.Dict) else [a.value for a in built.args]
    if isinstance(built, cst.Call) and not all(a.keyword is not None for a in built.args):
        return False
    stack, stored = list(children(fn.node.body)), list(items)

    def at(e: cst.BaseExpression | None) -> bool:  # (``name``, or a part reached from it)
        return e is not None and _name_in(_root(e, True), frozenset({name}))

    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if any(isinstance(x, cst.Name) and x.value == name for x in local_nodes(n)):
                return False  # a closure may write into it
            continue
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr)) and at(n.value) \
                and not all(isinstance(t, cst.Subscript) and at(t) for t in _assign_targets(n)):
            return False  # another name for it (or a part of it) may fill it
        if isinstance(n, (cst.For, cst.WithItem)) and at(getattr(n, "iter", None) or getattr(n, "item", None)):
            return False
        if isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Subscript) and at(t.target) for t in n.targets):
            stored.append(n.value)
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and at(n.func.value):
            if n.func.attr.value in ("append", "update"):
                stored += [a.value for a in n.args]
            elif n.func.attr.value not in ("items", "values", "keys", "get", "pop", "popitem"):
                return False  # `kwargs.setdefault(k, fresh)`, `kwargs["l"].extend(...)`: stores it does not follow
        if isinstance(n, cst.Call) and any(at(a.value) for a in n.args):
            return False  # handed to a callee, which may fill it (`fill_cu_lens(kwargs, lens)`)
        stack.extend(children(n))
    return all(_own(v, roots, fn.name_assigns, _key_names(fn)) for v in stored)


def _hands_back_own(fn: FunctionInfo, siblings: list[FunctionInfo]) -> bool:
    """Every ``return`` of the method hands back storage its object holds: ``self.buf[:n]``, a container built of
    such views (``kwargs = Args(input_ids=self.ids[:q].unsqueeze(0), ...); return kwargs``), or the same method of
    another object it holds (``return self.pairs[i].device.get_args(...)``) when its sibling definitions (the other
    classes the receiver may be) all hand back their own storage."""
    returns = [r.value for r in fn.returns if r.value is not None and not is_none(r.value)]
    if not returns:
        return False
    for value in returns:
        if isinstance(value, cst.Name) and _own_container(fn, value.value):
            continue
        if not isinstance(value, cst.Name) and _own(value, {"self"}, None, _key_names(fn)):
            continue
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == fn.node.name.value and _delegate(fn, value.func.value):
            others = [m for m in siblings if m is not fn]
            if others and all(_hands_back_own(m, []) for m in others):
                continue
        return False
    return True


def _declared_classes(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> list | None:
    """The project classes of ``attr: A | B`` (``Union[A, B]``, ``Optional[A]``) declared in the class body."""
    for stmt in cls.node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                return annotation_classes(project, file, None, small.annotation.annotation) or None
    return None


def held_call_result(project: Project, file: FileModel, fn: FunctionInfo, call: cst.Call) -> bool:
    """``self.io.get_args(...)`` (or through a local alias of ``self.io``) where every class the field may hold
    (declared ``io: A | B``, or constructed) defines the method and each hands back its own storage: the result
    is the held object's, so the caller's name for it dying frees nothing."""
    func = call.func
    if fn is None or not fn.class_name or not isinstance(func, cst.Attribute):
        return False
    recv = func.value
    if func.attr.value == fn.node.name.value and _delegate(fn, recv) and any(call is r.value for r in fn.returns):
        # `return self.pairs[i].device.get_args(...)` in `get_args`: the same method of an object it holds
        others = [m for m in _definitions(project, func.attr.value) if m is not fn]
        return bool(others) and all(_hands_back_own(m, []) for m in others)
    attr = held_field(fn, recv)
    cls = file.classes.get(fn.class_name) if attr is not None else None
    if cls is None or attr in cls.methods:
        return False
    classes = _declared_classes(project, file, cls, attr)
    if classes is None:
        ctors = _field_ctors(project, file, cls, attr)
        classes = [project.symbol(c, file) for c in ctors or ()]
    found = [_method_in(project, c, func.attr.value) for c in classes]
    if not found or any(f is None for f in found):
        return False
    methods = [f[0] for f in found]
    return all(_hands_back_own(m, methods) for m in methods)


def _definitions(project: Project, name: str) -> list[FunctionInfo]:
    """The project's methods named ``name`` (at most a few files hold one; else none: no guess)."""
    memo = derived(project, "held_definitions")
    if name not in memo:
        paths = project.paths_containing((f"def {name}(".encode(),))
        out: list[FunctionInfo] = []
        for path in paths if paths and len(paths) <= 3 else ():
            model = project.file(path)
            out += [f for f in model.functions.values() if f.node.name.value == name and f.class_name
                    and f.params[:1] == ("self",)] if model is not None else []
        memo[name] = out
    return memo[name]


def _delegate(fn: FunctionInfo, recv: cst.BaseExpression) -> bool:
    root = _root(recv, True)
    if isinstance(root, cst.Name) and root.value not in ("self",) and root.value not in fn.all_params:
        values = fn.name_assigns.get(root.value, [])
        root = _root(values[0], True) if len(values) == 1 else root
    return isinstance(root, cst.Name) and root.value == "self"


__all__ = ["aliased_field", "held_call_result", "held_after_call", "held_field", "held_method", "held_receiver",
           "reads_kept_on_host"]
