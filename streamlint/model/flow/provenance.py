"""Stream provenance across objects: which object a stream expression held through other objects denotes.

Serving code builds one compute stream and hands it around: the engine builds the runtime and gives the scheduler
``Scheduler(runtime, compute_stream=runtime.compute_stream)``, the runtime builds its decode slots with
``create_decode_slot(..., compute_stream=self._compute_stream)`` (a factory returning a dataclass), a codec keeps
``self.stream = stream``. A method then reads ``self.runtime.decode_slots[i].compute_stream`` or
``self._compute_stream``: two texts, one stream object.

:func:`rewrite` follows a stream expression (a dotted path rooted at ``self``, a parameter or a local of a
frame function; ``[...]`` an element of a container) back to where its value is chosen, one step at a time:

- ``self.f`` of the frame's class: a property returning ``self.<path>``, or the one assignment of a field that is
  one object for the object's life (:func:`~streamlint.model.flow.ambient.stable_field`): a copy of another path
  (``self.x = other.y``, ``cast(T, x)`` is ``x``), a constructor parameter (the path is then rooted at that
  parameter of ``__init__``), or a construction whose own fields are followed in turn;
- a local assigned once (``slot = self.runtime.decode_slots[i]``) is its value;
- ``C(...).rest`` (a project class) is ``rest`` followed inside ``C``: a field ``C`` keeps from a parameter
  (``__init__``, or a dataclass field) is the argument the construction binds; a field ``C`` makes itself
  stays a field of that one constructed object;
- ``F(...).rest`` for a project factory function: every ``return`` of ``F`` must lead to the same parameter path;
- ``tuple(E for ...)[i].rest``, ``[E for ...]``, ``(E1, E2)``: every element gives the same path (one not
  naming the comprehension's own variables).

What it cannot follow is a leaf: a field the object makes itself (``self._s = torch.cuda.Stream()``, ``s or
make_stream()``), a parameter, a local, an untyped attribute. :func:`same_stream` says two paths of one frame
are one object when their leaves are equal, or when both lead to parameters of the same function and every
visible call (for a constructor: every construction of its class) binds them to paths that are one object in the
caller (at most :data:`MAX_UP` callers up). It stays unknown (False) when a call or construction may be unseen:
a class named other than in a call, an annotation or an import (handed as a factory: ``runtime=Runtime``,
``partial(mod.C, ...)``), imported anywhere under another name (``C as D``), decorated other than as a dataclass,
in a module handed on or reflected over (``getattr(vmod, kind)``), a class that builds itself (``cls(...)``) or
has a project subclass, a method handed by reference or with a base that may call it, too many sites, a bound
argument that is not a path; and when a field is rebound by name (``setattr``, ``__dict__``), a property's backing
field is rebound, or a container's elements change after it is built (``.append``, ``x[i] = ...``). Paths through elements (``[i]``) are
never a leaf of their own: ``self.slots[0].s`` and ``self.slots[1].s`` are one object only when every element
is built with the same stream. Answers are memoised per project, except those cut by :data:`MAX_UP`, the
nesting guard or a cycle in progress (they depend on where the question was asked from)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.fieldfacts import (
    MAX_SITES, _assigns, _deferred, _rebound_outside, _referenced, _unseen_base, mutated, stable_field)
from streamlint.model.flow.callers import callers_of
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import descendants

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_UP = 3  # callers (constructions) followed up from two parameter paths
MAX_STEPS = 24  # rewriting steps for one path
Path = tuple[str, tuple[str, ...]]  # (root name, segments: attribute names and "[]" for an element)
# a leaf: (kind, owner id, text): "self" (a path of the object of the class ``owner``), "obj" (of the object one
# construction call builds), "param" (rooted at a parameter of ``owner``), "local" (any other name)
Leaf = tuple[str, int, str]


def parse(text: str) -> Path | None:
    """``self.a[i].b`` -> ("self", ("a", "[]", "b")); None for anything but such a path."""
    depth, flat = 0, []
    for ch in text:
        if ch == "[":
            if depth == 0:
                flat.append("[")
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                flat.append("]")
        elif depth == 0:
            flat.append(ch)
    if depth:
        return None
    parts = re.findall(r"\[\]|\.?[A-Za-z_]\w*", "".join(flat))
    if not parts or "".join(parts) != "".join(flat) or parts[0].startswith((".", "[")):
        return None
    return parts[0], tuple("[]" if p == "[]" else p[1:] for p in parts[1:])


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``cast(T, x)`` / ``typing.cast(T, x)`` is ``x``."""
    while isinstance(expr, cst.Call) and (dotted(expr.func) or "").rsplit(".", 1)[-1] == "cast" \
            and len(expr.args) == 2:
        expr = expr.args[1].value
    return expr


def expr_path(expr: cst.BaseExpression) -> Path | None:
    """The path of an expression: names, attributes and subscripts (``self.slots[i].stream``)."""
    segs: list[str] = []
    expr = _strip(expr)
    while True:
        if isinstance(expr, cst.Attribute):
            segs.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            segs.append("[]")
            expr = expr.value
        else:
            break
        expr = _strip(expr)
    return (expr.value, tuple(reversed(segs))) if isinstance(expr, cst.Name) else None


def _text(root: str, segs: tuple[str, ...]) -> str:
    return root + "".join("[]" if s == "[]" else "." + s for s in segs)


def _property_path(cls: ClassInfo, name: str) -> Path | None:
    """``self.<path>`` a property ``name`` of the class returns (its only return)."""
    m = cls.methods.get(name)
    if m is None or not any(d.rsplit(".", 1)[-1] in ("property", "cached_property") for d in m.decorators) \
            or len(m.returns) != 1 or m.returns[0].value is None:
        return None
    found = expr_path(m.returns[0].value)
    return found if found is not None and found[0] == "self" else None


def record_fields(file: FileModel, cls: ClassInfo) -> tuple[str, ...] | None:
    """A dataclass's constructor parameters (its annotated fields, in order); None for other classes."""
    if "__init__" in cls.methods or not any("dataclass" in file.code(d.decorator) for d in cls.node.decorators):
        return None
    out = []
    body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else ()
    for stmt in body:
        for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()):
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                    and "ClassVar" not in file.code(small.annotation.annotation):
                out.append(small.target.value)
    return tuple(out)


class _Frame:
    """A place paths are written in: a function (its ``self``, parameters, locals), or a dataclass's generated
    constructor (``fn`` None: its fields are its parameters)."""

    __slots__ = ("file", "fn", "cls")

    def __init__(self, file: FileModel, fn: FunctionInfo | None, cls: ClassInfo | None) -> None:
        self.file, self.fn, self.cls = file, fn, cls

    def owner(self) -> int:
        return id(self.fn) if self.fn is not None else id(self.cls)

    def params(self) -> tuple[str, ...]:
        if self.fn is not None:
            skip = 1 if self.fn.class_name and (self.fn.params[:1] == ("self",) or any(
                d.rsplit(".", 1)[-1] == "classmethod" for d in self.fn.decorators)) else 0
            return self.fn.params[skip:] + self.fn.kwonly
        return record_fields(self.file, self.cls) or () if self.cls is not None else ()


def _class_of(file: FileModel, fn: FunctionInfo | None) -> ClassInfo | None:
    return file.classes.get(fn.class_name) if fn is not None and fn.class_name else None


def rewrite(project: Project, frame: _Frame, path: Path) -> tuple[Leaf, _Frame] | None:
    """The leaf ``path`` (written in ``frame``) leads to, with the frame of that leaf; None when a step fails."""
    root, segs = path
    for _ in range(MAX_STEPS):
        fn = frame.fn
        cls = _class_of(frame.file, fn) if fn is not None else frame.cls
        if root == "self" and cls is not None and (fn is None or fn.params[:1] == ("self",)):
            if not segs or segs[0] == "[]":
                return ("self", id(cls), _text(root, segs)), frame
            attr = segs[0]
            prop = _property_path(cls, attr)
            if prop is not None:
                root, segs = prop[0], prop[1] + segs[1:]
                continue
            fields = record_fields(frame.file, cls)
            if segs[1:2] == ("[]",) and mutated(project, attr):
                return ("unstable", id(cls), _text(root, segs)), frame  # (its elements change after it is built)
            if fields is not None and attr in fields and not _assigns(cls, f"self.{attr}") \
                    and not _rebound_outside(project, attr):
                frame = _Frame(frame.file, None, cls)  # (a dataclass field: its constructor's parameter)
                root, segs = attr, segs[1:]
                continue
            own = _assigns(cls, f"self.{attr}")
            if len(own) != 1 or not stable_field(project, frame.file, cls, f"self.{attr}"):
                return ("unstable", id(cls), _text(root, segs)), frame  # (rebound: not one object)
            method, value = own[0]
            step = _value_step(project, _Frame(frame.file, method, cls), value, segs[1:])
            if step is None:
                return ("self", id(cls), _text(root, segs)), frame
            if isinstance(step[0], tuple):
                return step  # type: ignore[return-value]  (a field of an object built here: a leaf)
            frame, (root, segs) = step  # type: ignore[misc]
            continue
        if root in frame.params():
            if fn is not None and root in fn.name_assigns:
                return ("unstable", frame.owner(), _text(root, segs)), frame  # (the parameter is rebound)
            return ("param", frame.owner(), _text(root, segs)), frame
        values = fn.name_assigns.get(root, []) if fn is not None else []
        if len(values) == 1 and root not in (fn.all_params if fn is not None else ()):
            step = _value_step(project, frame, values[0], segs)
            if step is not None and not isinstance(step[0], tuple):
                frame, (root, segs) = step  # type: ignore[misc]
                continue
            if step is not None:
                return step  # type: ignore[return-value]
        return ("local", frame.owner(), _text(root, segs)), frame
    return None


def _value_step(project: Project, frame: _Frame, value: cst.BaseExpression, rest: tuple[str, ...]):
    """One step from an assigned value: (frame, path) to go on with, (leaf, frame) for a field of an object built
    by a call here, or None (nothing known)."""
    value = _strip(value)
    found = expr_path(value)
    if found is not None:
        return frame, (found[0], found[1] + rest)
    if not rest:
        return None
    if isinstance(value, (cst.Tuple, cst.List)) or isinstance(value, (cst.ListComp, cst.GeneratorExp)) \
            or isinstance(value, cst.Call) and (dotted(value.func) or "") in ("tuple", "list") \
            and len(value.args) == 1 and isinstance(value.args[0].value, (cst.GeneratorExp, cst.ListComp)):
        return _element_step(project, frame, value, rest)
    if isinstance(value, cst.Call):
        return _call_step(project, frame, value, rest)
    return None


def _targets(comp) -> set[str]:
    names: set[str] = set()
    node = comp.for_in
    while node is not None:
        for sub in descendants(node.target):
            if isinstance(sub, cst.Name):
                names.add(sub.value)
        node = node.inner_for_in
    return names


def _element_step(project: Project, frame: _Frame, value, rest: tuple[str, ...]):
    """``[E for ...][i].rest`` / ``(E1, E2)[i].rest``: what every element gives, the same for all."""
    if rest[0] != "[]" or len(rest) < 2:
        return None
    if isinstance(value, cst.Call):
        value = value.args[0].value
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        elements, hidden = [value.elt], _targets(value)
    else:
        elements, hidden = [e.value for e in value.elements if not isinstance(e, cst.StarredElement)], set()
        if not elements or len(elements) != len(value.elements):
            return None
    results = set()
    for element in elements:
        step = _value_step(project, frame, element, rest[1:])
        if step is None or isinstance(step[0], tuple):
            return None  # (an element's own field: each element is another object)
        if step[0] is not frame:
            return None
        results.add(step[1])
    if len(results) != 1:
        return None
    path = results.pop()
    if path[0] in hidden:
        return None  # (it names the comprehension's variable: each element its own)
    return frame, path


def _call_step(project: Project, frame: _Frame, call: cst.Call, rest: tuple[str, ...]):
    """``C(...).rest`` / ``factory(...).rest`` (a project class, a project function)."""
    site = frame.file.call_site(call)
    if site is None or site.target is None:
        return None
    sym = project.symbol(site.target, frame.file)
    if sym is None:
        return None
    target, tfile = sym[0], sym[1]
    active = project.derived("provenance_active")
    if id(call) in active or len(active) > 8:
        project.derived("provenance_cut")["cut"] = True
        return None  # (a construction inside its own construction, or too deep)
    active[id(call)] = True
    try:
        return _call_target_step(project, frame, call, rest, target, tfile)
    finally:
        del active[id(call)]


def _call_target_step(project: Project, frame: _Frame, call: cst.Call, rest: tuple[str, ...], target, tfile):
    if isinstance(target, ClassInfo):
        init = target.methods.get("__init__")
        inner = _Frame(tfile, init, target) if init is not None else _Frame(tfile, None, target)
        if init is None and record_fields(tfile, target) is None:
            return None
        found = rewrite(project, inner, ("self", rest))
        if found is None:
            return None
        (kind, _owner, text), leaf_frame = found
        if kind in ("self", "unstable"):  # a field the object makes itself: that object's own
            return ("obj" if kind == "self" else "unstable", id(call), text), frame
        if kind != "param" or leaf_frame.owner() != inner.owner():
            return None
        params = inner.params()
        kwonly = init.kwonly if init is not None else ()
        return _bound(frame, call, params, kwonly, text)
    if isinstance(target, FunctionInfo) and target.class_name is None and target.returns:
        leaves = set()
        inner = _Frame(tfile, target, None)
        for ret in target.returns:
            if ret.value is None:
                return None
            step = _value_step(project, inner, ret.value, rest)
            if step is None or isinstance(step[0], tuple):
                return None
            found = rewrite(project, step[0], step[1])
            if found is None or found[0][0] != "param" or found[1].owner() != id(target):
                return None
            leaves.add(found[0][2])
        if len(leaves) != 1:
            return None
        return _bound(frame, call, tuple(target.all_params), target.kwonly, leaves.pop())
    return None


def _bound(frame: _Frame, call: cst.Call, params: tuple[str, ...], kwonly: tuple[str, ...], text: str):
    """The path ``text`` (rooted at a parameter) in the caller's terms: the argument the call binds to it."""
    path = parse(text)
    if path is None:
        return None
    arg = bind_arguments(params, call, kwonly=kwonly).get(path[0])
    found = expr_path(arg) if arg is not None else None
    if found is None:
        return None
    return frame, (found[0], found[1] + path[1])


def _leaf(project: Project, file: FileModel, fn: FunctionInfo | None, cls: ClassInfo | None, text: str):
    memo = project.derived("provenance_leaf")
    key = (id(fn), id(cls), text)
    if key not in memo:
        cut = project.derived("provenance_cut")
        outer, cut["cut"] = cut.get("cut", False), False
        path = parse(text)
        found = rewrite(project, _Frame(file, fn, cls), path) if path is not None else None
        if cut["cut"]:
            cut["cut"] = True
            return found  # (cut by the nesting guard: not memoised)
        cut["cut"] = outer
        memo[key] = found
    return memo[key]


def same_stream(project: Project, file: FileModel, fn: FunctionInfo | None, a: str, b: str,
                _depth: int = 0, cls: ClassInfo | None = None) -> bool:
    """Do the paths ``a`` and ``b``, written in ``fn`` (or in the dataclass ``cls``'s constructor), denote one
    object (see the module docstring)?"""
    memo = project.derived("provenance_same")
    cut = project.derived("provenance_cut")
    key = (id(fn), id(cls), a, b)
    found = memo.get(key)
    if found is _BUSY:
        cut["cut"] = True  # (a cycle through the callers: unknown here, not for good)
        return False
    if found is not None:
        return found
    outer = cut.get("cut", False)
    cut["cut"] = False
    memo[key] = _BUSY
    found = _same(project, file, fn, cls, a, b, _depth)
    if cut["cut"]:
        del memo[key]  # (cut by the depth bound or a cycle: the answer depends on where it was asked from)
    else:
        memo[key] = found
    cut["cut"] = outer or cut["cut"]
    return found


_BUSY = object()


def _same(project: Project, file: FileModel, fn, cls, a: str, b: str, depth: int) -> bool:
    la = _leaf(project, file, fn, cls, a)
    if la is None or la[0][0] == "unstable":  # (False whatever `b` leads to: its leaf, which may ask project-wide
        return False  # scans for each field of a class (self_alias), is not needed)
    lb = _leaf(project, file, fn, cls, b)
    if lb is None:
        return False
    (ka, oa, ta), frame = la
    (kb, ob, tb), _ = lb
    if (ka, oa, ta) == (kb, ob, tb):
        # (two elements of one container are two objects unless built alike; a rebound field is not one object)
        return "[]" not in ta and ka != "unstable" and all(
            _settled(project, attr) for attr in parse(ta)[1][1 if ta.startswith("self") else 0:] if attr != "[]")
    if "unstable" in (ka, kb):
        return False
    if depth >= MAX_UP:
        project.derived("provenance_cut")["cut"] = True
        return False
    if ka == kb == "param" and oa == ob and _same_up(project, frame, ta, tb, depth):
        return True  # (both handed to one constructor / function: one object at every call)
    own = _Frame(file, fn, cls)
    if fn is not None and fn.node.name.value != "__init__" and id(fn) in (oa, ob) and (ka == "param" or kb == "param"):
        return _same_up(project, own, a, b, depth)  # (a parameter of this method: ask its callers)
    return False


def _same_up(project: Project, frame: _Frame, a: str, b: str, depth: int) -> bool:
    """Are the paths ``a`` and ``b`` (rooted at parameters of the frame's function, or at its ``self``) one object
    at every call of the function, in the caller's terms?"""
    sites = _call_sites(project, frame)
    if not sites:
        return False
    params, kwonly = frame.params(), frame.fn.kwonly if frame.fn is not None else ()
    for model, site in sites:
        caller = site.function
        if caller is None:
            return False
        up = []
        for text in (a, b):
            path = parse(text)
            if path is not None and path[0] == "self" and frame.fn is not None and frame.fn.node.name.value != "__init__":
                receiver = expr_path(site.receiver) if site.receiver is not None else None
                step = (None, (receiver[0], receiver[1] + path[1])) if receiver is not None else None
            else:
                step = _bound(_Frame(model, caller, None), site.node, params, kwonly, text)
            if step is None:
                return False
            up.append(_text(*step[1]))
        if not same_stream(project, model, caller, up[0], up[1], depth + 1):
            return False
    return True


def _settled(project: Project, attr: str) -> bool:
    """Is the attribute ``attr`` of an object the analysis did not type assigned only while objects are built:
    on no receiver but ``self``, and by every class only in its ``__init__``? (A path read later names the
    object it held when copied.)"""
    memo = project.derived("provenance_settled")
    if attr not in memo:
        memo[attr] = False
        paths = project.paths_containing((f"self.{attr} =".encode(), f"self.{attr}=".encode()))
        ok = not _rebound_outside(project, attr) and len(paths) <= MAX_CALLER_FILES and _backing_settled(project, attr)
        for path in paths if ok else ():
            model = project.file(path)
            ok = model is not None and all(
                m.node.name.value == "__init__" for c in model.classes.values() for m in c.methods.values()
                for a in m.assigns if a.target == f"self.{attr}")
            if not ok:
                break
        memo[attr] = ok
    return memo[attr]


def _backing_settled(project: Project, attr: str) -> bool:
    """Is every property ``attr`` of a project class a read of fields that are settled too (``compute_stream``
    returning ``self._compute_stream``, which ``reset()`` may rebind)? A property returning anything else (a
    stream it makes, a lookup) is not one object."""
    paths = project.paths_containing((f"def {attr}(".encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return False
    for path in paths:
        model = project.file(path)
        if model is None:
            return False
        for c in model.classes.values():
            m = c.methods.get(attr)
            if m is None or not any(d.rsplit(".", 1)[-1] in ("property", "cached_property") for d in m.decorators):
                continue
            found = _property_path(c, attr)
            if found is None or not found[1] or any(
                    seg != "[]" and not _settled(project, seg) for seg in found[1] if seg != attr):
                return False
    return True


def _call_sites(project: Project, frame: _Frame) -> list | None:
    """Every call of the frame's function (every construction of its class, for a constructor), or None when
    one may be unseen."""
    fn, file = frame.fn, frame.file
    cls = frame.cls if fn is None else _class_of(file, fn)
    if fn is None or fn.node.name.value == "__init__":
        if cls is None or _unseen_construction(project, file, cls):
            return None
        sites = callers_of(project, file, fn) if fn is not None else _record_sites(project, file, cls)
    else:
        name = fn.node.name.value
        if fn.parent is not None or name.startswith("__") or _referenced(project, name, file.path) \
                or cls is not None and _unseen_base(project, file, cls, name):
            return None
        sites = callers_of(project, file, fn)
        if sites and any(site.function is not None and _deferred(project, site.function, site) for _m, site in sites):
            return None
    return sites if sites and len(sites) <= MAX_SITES else None


def _record_sites(project: Project, file: FileModel, cls: ClassInfo) -> list | None:
    """The ``C(...)`` constructions of a dataclass ``C`` (it has no ``__init__`` of its own)."""
    paths = project.paths_containing((f"{cls.name}(".encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return None
    sites = []
    for path in paths:
        model = project.file(path)
        for site in (model.calls if model is not None else ()):
            if site.target is None or (dotted(site.node.func) or "").rsplit(".", 1)[-1] != cls.name:
                continue
            sym = project.symbol(site.target, model)
            if sym is not None and sym[0] is cls:
                sites.append((model, site))
    return sites or None


_SELF_BUILT = re.compile(r"\bcls\s*\(|type\(self\)\s*\(|self\.__class__\s*\(")
_VALUE_USE = r"(?<![\w]){name}\b(?![ \t]*[\(\.\w])"  # (`[ \t]`: a name at the end of a line is a value)
_AS_IMPORT = r"(?<![\w.]){name}\s+as\s+\w"


def _unseen_construction(project: Project, file: FileModel, cls: ClassInfo) -> bool:
    """May the class be built where no ``C(...)`` shows it: named as a value (``runtime=C``, ``factories[k] = C``,
    ``partial(C, ...)``) rather than in a call, an annotation or an import; built by itself (``cls(...)``,
    ``type(self)(...)``); derived from by a project class (its ``super().__init__`` binds the parameters)?"""
    from streamlint.model.accelerators import direct_subclasses

    memo = project.derived("provenance_unseen_ctor")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = True
    name = cls.name
    # (a module whose text has no such spelling has none in its classes, their text a part of it at most less
    # indented: no generation of the class's code then)
    if (file.classes.get(name) is not cls or _SELF_BUILT.search(file.source.text)) \
            and _SELF_BUILT.search(file.code(cls.node)) or direct_subclasses(project, file, cls):
        return True
    if any("dataclass" not in file.code(d.decorator) for d in cls.node.decorators):
        return True  # (a class decorator may register it in a table, wrap it, replace it)
    paths = project.paths_containing((name.encode(),))
    if len(paths) > MAX_CALLER_FILES or _module_reflected(project, file):
        return True
    alias = re.compile(_AS_IMPORT.format(name=re.escape(name)).encode())
    if any(alias.search(project.file_bytes(path) or b"") for path in paths):
        return True  # (imported under another name, `C as D`: its constructions `D(...)` are not seen as C's)
    if record_fields(file, cls) is not None and any(
            re.search(rb"(?<![\w.])replace\s*\(|dataclasses\.replace\s*\(", project.file_bytes(path) or b"") for path in paths):
        return True  # (`dataclasses.replace(slot, compute_stream=s)` builds one with other fields, unseen)
    use = re.compile(_VALUE_USE.format(name=re.escape(name)).encode())
    for path in paths:
        data = project.file_bytes(path) or b""
        for m in use.finditer(data):
            line_start = data.rfind(b"\n", 0, m.start()) + 1
            before = re.sub(rb"(?:\w+\s*\.\s*)+$", b"", data[line_start:m.start()])  # (`mod.C`: from `mod`)
            line = data[line_start:data.find(b"\n", m.end()) if data.find(b"\n", m.end()) >= 0 else len(data)]
            stripped = before.rstrip()
            in_string = (before.count(b'"') - before.count(b'\\"')) % 2 or before.count(b"'") % 2
            annotation = re.search(rb"(\w|\])\s*:$|->$|\w\s*\[$|\|$", stripped) and before.count(b"{") <= before.count(b"}")
            if b"#" in before or in_string or annotation \
                    or line.lstrip().startswith((b"from ", b"import ", b"class ", b"@")):
                continue  # (a comment, a string, an annotation, an import, the class line)
            if re.match(rb"\s*(\)|,)", data[m.end():m.end() + 2]) and re.search(rb"\b(isinstance|issubclass)\(", before):
                continue  # (an instance test)
            if stripped.endswith((b"(", b",")) and _in_annotation(data, m.start()):
                continue
            memo[id(cls)] = True
            return True
    memo[id(cls)] = False
    return False


def _module_reflected(project: Project, file: FileModel) -> bool:
    """Is the class's module reached other than by ``mod.name`` / ``from mod import name``: the module object
    handed on or reflected over (``getattr(vmod, kind)``, ``vars(mod)``, ``import_module``, ``globals()``), where
    a construction of its classes is not seen? Byte level; True when too many files name the module."""
    parts = file.path.replace("\\", "/").rsplit("/", 2)
    mod = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
    if mod == "__init__" and len(parts) > 1:
        mod = parts[-2]
    own = project.file_bytes(file.path) or b""
    if re.search(rb"\bglobals\s*\(|\bsys\.modules\b|\bvars\s*\(\s*\)", own):
        return True
    paths = project.paths_containing((mod.encode(),))
    if len(paths) > MAX_CALLER_FILES:
        return True
    esc = re.escape(mod).encode()
    bind = re.compile(rb"^[ \t]*(?:import[ \t]+((?:\w+\.)*)" + esc + rb"\b(?:[ \t]+as[ \t]+(\w+))?"
                      rb"|from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*?|[^\n]*?)(?<![\w.])" + esc
                      + rb"\b(?![ \t]*\.)(?:[ \t]+as[ \t]+(\w+))?)", re.M)
    for path in paths:
        data = project.file_bytes(path) or b""
        if re.search(rb"\bimport_module\s*\(|\b__import__\s*\(", data):
            return True
        for m in bind.finditer(data):
            if m.group(1) is not None and m.group(2) is None:
                use = re.escape(m.group(1)) + esc  # (`import pkg.mod`: used as `pkg.mod`)
            else:
                use = re.escape(m.group(2) or m.group(3) or mod.encode())
            for u in re.finditer(rb"(?<![\w.])" + use + rb"\b(?![ \t]*\.)", data):
                line = data[data.rfind(b"\n", 0, u.start()) + 1:u.start()]
                if not line.lstrip().startswith((b"from ", b"import ", b"#")) and b"#" not in line:
                    return True  # (the module itself as a value: `getattr(vmod, ...)`, `f(vmod)`)
    return False


def _in_annotation(data: bytes, pos: int) -> bool:
    """Inside the brackets of an annotation (``Optional[Union[A, C]]``, ``Dict[str, C]``)."""
    depth = 0
    for i in range(pos - 1, max(-1, pos - 200), -1):
        ch = data[i:i + 1]
        if ch in (b"]", b")"):
            depth += 1
        elif ch in (b"[", b"("):
            if depth == 0:
                return ch == b"["
            depth -= 1
        elif ch == b"\n":
            return False
    return False


def self_alias(project: Project, file: FileModel, cls: ClassInfo | None, chain: str,
               fn: FunctionInfo | None = None) -> str | None:
    """The ``self.<field>`` of ``cls`` that the path ``chain`` (``self.runtime.decode_slots[i].stream``, read in
    the method ``fn`` of ``cls``, or in any method; a local of ``fn`` too) provably denotes, else None (also when
    two fields do)."""
    if cls is None or chain.count(".") < 2 and "[" not in chain and (fn is None or chain.startswith("self.")):
        return None
    memo = project.derived("provenance_alias")
    key = (id(cls), id(fn), chain)
    if key in memo:
        return memo[key]
    memo[key] = None
    method = fn if fn is not None and fn.params[:1] == ("self",) and fn.parent is None else next(
        (m for m in cls.methods.values() if m.params[:1] == ("self",) and m.parent is None), None)
    if method is None or parse(chain) is None or fn is None and not chain.startswith("self."):
        return None
    fields = sorted({a.target for m in cls.methods.values() for a in m.assigns
                     if a.target.startswith("self.") and a.target.count(".") == 1 and "[" not in a.target})
    found = [f for f in fields[:48] if f != chain and same_stream(project, file, method, chain, f)]
    memo[key] = found[0] if len(found) == 1 else None
    return memo[key]


def param_alias(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> str | None:
    """The ``self.<field>`` of the method's object that its stream parameter ``name`` is at every call (each
    caller binds it to a path that is that field of the receiver), else None."""
    cls = file.classes.get(fn.class_name or "")
    if cls is None or fn.params[:1] != ("self",) or fn.parent is not None:
        return None
    return self_alias(project, file, cls, name, fn)


def held_alias(interp, key: str) -> str | None:
    """An earlier stream key of the function ``interp`` runs that names the same object as ``key`` (both paths
    through held objects, neither a field of the object itself: ``self.verifier.stream`` and
    ``self.verifier.runtime.compute_stream``), so that one stream keeps one name; else None."""
    seen = interp.__dict__.setdefault("_held_keys", [])
    if key in seen:
        return None
    found = next((k for k in seen if same_stream(interp.project, interp.file, interp.fn, k, key)), None)
    if found is None and len(seen) < 16:
        seen.append(key)
    return found


__all__ = ["held_alias", "param_alias", "expr_path", "parse", "record_fields", "rewrite", "same_stream", "self_alias"]
