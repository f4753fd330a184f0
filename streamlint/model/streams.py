"""Streams and events: which names hold them (typing), and which stream a scope or tag denotes (identity).

Identity: a stream is named by a *key*. ``MAIN`` is the stream current at function entry;
``tag:<tag>`` is the stream a TorchAir tag maps to (``npu_stream_switch("s")``,
``record_tagged_stream(t, "s")``); ``tag?:<code>`` a tag that is not a literal; otherwise the key of the
stream expression (its source text, or the dataflow's refinement of it). :func:`scope_stream_key` is the
one answer to "which stream does this ``with`` item switch to", :func:`tagged_stream_key` to "which
stream does this tag name"; :func:`stream_label` words a key for messages.

Typing:

A value is a *stream* when it comes from ``torch.npu.Stream()`` / ``torch.cuda.Stream()`` /
``current_stream()`` / ``default_stream()`` (directly, through an alias or a project wrapper that returns
one), an *event* when it comes from ``Event()`` / ``npu_create_tagged_event()`` / ``Stream.record_event()``,
and an *event list* / *stream list* when a ``self.*`` attribute holds a list (or list comprehension) of
those. Used by the dataflow to decide what ``x.record()`` / ``x.wait()`` / ``x.synchronize()`` mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.filefacts import CallSite, ClassInfo, FunctionInfo
from streamlint.model.lifetimes import module_variable
from streamlint.model.syntax import class_field_annotation
from streamlint.model.walk import children

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamlint.model.queries import ProjectQueries as Project
    from streamlint.model.uses import ApiUse

MAIN = "<main>"  # the stream current at function entry
UNKNOWN_STREAM = "<unknown stream>"
STREAM = "stream"
MAIN_STREAM = "main stream"  # current_stream()/default_stream() captured outside any stream scope
EVENT = "event"
STREAM_LIST = "stream list"
EVENT_LIST = "event list"

_STREAM_ROLES = frozenset({Role.STREAM_NEW, Role.CURRENT_STREAM, Role.DEFAULT_STREAM})
_EVENT_ROLES = frozenset({Role.EVENT_NEW, Role.TAGGED_EVENT_CREATE})


def derived(project: Project, name: str) -> dict:
    """A cache for facts derived from several files. It lives on the project's path index, which the
    engine replaces whenever any file changes (``Engine.set_override``), so it never goes stale."""
    return project.path_index.derived.setdefault(name, {})


def kind_of_call(project: Project, file: FileModel, call: cst.Call, _depth: int = 0) -> str | None:
    """STREAM / EVENT when a call creates or returns a stream or an event, else None."""
    site = file.call_site(call)
    if site is None:
        return None
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "record_event":
        return EVENT
    for use in project.api_uses(file, site):
        if use.role in (Role.CURRENT_STREAM, Role.DEFAULT_STREAM) and _outside_stream_scopes(project, file, site):
            return MAIN_STREAM
        if use.role in _STREAM_ROLES:
            return STREAM
        if use.role in _EVENT_ROLES:
            return EVENT
    if _depth < 3:
        target = project.call_target(file, site)
        if target is not None:
            if current_stream_getter(project, target[1], target[0]):
                return MAIN_STREAM if _outside_stream_scopes(project, file, site) else STREAM
            return returned_kind(project, target[1], target[0], _depth + 1)
    return None


def outside_stream_scopes(project: Project, file: FileModel, site: CallSite) -> bool:
    """Does a call run on the function's entry stream (inside no stream scope of its function)?"""
    return _outside_stream_scopes(project, file, site)


def _outside_stream_scopes(project: Project, file: FileModel, site: CallSite) -> bool:
    return not any(u.role in (Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT)
                   for scope in project.enclosing_scopes(file, site.scope) for u in scope.uses)


def kind_of_value(project: Project, file: FileModel, value: cst.BaseExpression, _depth: int = 0) -> str | None:
    """Kind of an assigned value: a stream/event constructor, or a list (tuple, dict comprehension) of them."""
    if isinstance(value, cst.Call):
        return kind_of_call(project, file, value, _depth)
    element: cst.BaseExpression | None = None
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        element = value.elt
    elif isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        element = value.elements[0].value
    elif isinstance(value, cst.DictComp):  # `{name: torch.cuda.Stream() for name in names}`
        element = value.value
    if isinstance(element, cst.Call):
        inner = kind_of_call(project, file, element, _depth)
        if inner in (STREAM, MAIN_STREAM):
            return STREAM_LIST
        if inner == EVENT:
            return EVENT_LIST
    return None


def _torch_rooted(file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """Does an expression chain (``torch.get_device_module().x``, ``torch.accelerator``) start at torch?"""
    while isinstance(expr, (cst.Attribute, cst.Call, cst.Subscript)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    if not isinstance(expr, cst.Name):
        return False
    qualname = file.resolve(expr, fn) or ""
    return qualname.split(".")[0] in ("torch", "torch_npu")


def _current_stream_call(project: Project, file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """``torch.npu.current_stream()`` (an API of that role) or ``<torch device module>.current_stream(...)``
    (``torch.get_device_module().current_stream(i)``)."""
    if not isinstance(expr, cst.Call):
        return False
    site = file.call_site(expr)
    if site is not None and any(u.role is Role.CURRENT_STREAM and not u.wrappers
                                for u in project.api_uses(file, site)):
        return True
    func = expr.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "current_stream":
        return False
    if _torch_rooted(file, fn, func.value):
        return True
    # a library's torch interop module (`cutlass.torch.current_stream()`): torch's current stream, handed as that
    # library's stream type; not a project function of that name
    module = file.resolve(func.value, fn) or ""
    return "torch" in module.split(".")[1:] and project.function(f"{module}.current_stream", file) is None


def _global_names(fn: FunctionInfo) -> set[str]:
    # (walk.children: LibCST's ``children`` rebuilds every node it lists; trivia never holds a ``global``)
    names: set[str] = set()
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Global):
            names.update(n.name.value for n in node.names)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.BaseExpression)):
            stack.extend(children(node))
    return names


def declared_globals(fn: FunctionInfo) -> frozenset[str]:
    """The names ``fn`` declares ``global`` (its assignments to them set the module's variable)."""
    cached = fn.__dict__.get("_declared_globals")
    if cached is None:
        cached = fn.__dict__["_declared_globals"] = frozenset(_global_names(fn))
    return cached


def _names_current_stream(name: str) -> bool:
    words = set(name.lower().strip("_").split("_"))
    return {"current", "stream"} <= words


def current_stream_getter(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does a project function return the stream current at its call (``torch.npu.current_stream()``)?

    Either every value it returns is a current-stream query (``return torch.get_device_module()
    .current_stream(idx)``, or a local assigned only from one), or it is a cached getter that says so: its
    name is a current-stream name (``current_stream``, ``get_current_device_stream``), it takes no
    required argument but a device, and it keeps its cache in step with ``set_stream`` (it calls it, so
    the cache follows every stream switch). A getter that only caches the stream of its first call is
    not one: that is the stream current then (see ``flow.calls.cached_stream_getter``)."""
    memo = derived(project, "current_stream_getter")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = False
    values: list[cst.BaseExpression] = []
    cached = declared_globals(fn)
    for ret in fn.returns:
        if ret.value is None:
            continue
        if isinstance(ret.value, cst.Name) and ret.value.value in cached:
            values = []  # a module-level cache filled at the first call: the stream current then
            break
        if isinstance(ret.value, cst.Name) and ret.value.value in fn.name_assigns:
            values.extend(fn.name_assigns[ret.value.value])
        else:
            values.append(ret.value)
    result = bool(values) and all(_current_stream_call(project, file, fn, v) for v in values)
    if not result and values and _names_current_stream(fn.node.name.value):
        required = [p for p in (*fn.node.params.posonly_params, *fn.node.params.params)
                    if p.default is None and p.name.value not in ("self", "cls")]
        result = len(required) <= 1 and all(p.name.value in ("device", "device_index", "index", "idx")
                                            for p in required) and any(
            u.role is Role.SET_STREAM for site in fn.calls for u in project.api_uses(file, site))
    memo[id(fn)] = result
    return result


def _global_qualname(file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression) -> str | None:
    """``pkg.mod.G`` for a name of a module global (this module's, or imported), else None (a local)."""
    if not isinstance(expr, cst.Name):
        return None
    if fn is not None and expr.value in declared_globals(fn):
        return f"{file.module_name}.{expr.value}"
    resolved = file.resolve(expr, fn)
    if resolved is None and module_variable(file, expr.value) and not _bound_in(fn, expr.value):
        return f"{file.module_name}.{expr.value}"  # read without `global`: the module's variable all the same
    return resolved


def _bound_in(fn: FunctionInfo | None, name: str) -> bool:
    """Is ``name`` local to ``fn`` or to a function enclosing it (a parameter, an assignment, an alias)?"""
    while fn is not None:
        if name in fn.locals or name in fn.all_params or name in fn.local_aliases:
            return True
        fn = fn.parent
    return False


def _installing_loop(fn: FunctionInfo, call: cst.Call, name: str) -> cst.BaseExpression | None:
    """The container a ``for`` loop of ``fn`` around ``call`` takes ``name`` from: ``G`` in ``for s in G``,
    ``for s in G.values()``, ``for k, s in G.items()``; else None."""
    from streamlint.model.syntax import contains, local_nodes

    for node in local_nodes(fn.node.body):
        if not isinstance(node, cst.For) or not contains(node.body, call):
            continue
        it, target = node.iter, node.target
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
                and it.func.attr.value in ("items", "values"):
            if it.func.attr.value == "items":
                if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                    continue
                target = target.elements[1].value
            it = it.func.value
        if isinstance(target, cst.Name) and target.value == name and isinstance(it, cst.Name):
            return it
    return None


def _called_by_name(project: Project, name: str) -> bool:
    """Is a function of this name called somewhere in the project (``init_streams()``), not only handed away
    as a value (``Thread(target=init_streams)``: it then runs on another thread)?"""
    for path in project.paths_containing((f"{name}(".encode(),)):
        model = project.file(path) if project.may_call(path, name) else None
        if model is not None and any((site.node.func.attr.value if isinstance(site.node.func, cst.Attribute) else
                                      getattr(site.node.func, "value", None)) == name for site in model.calls):
            return True
    return False


def installed_registries(project: Project) -> frozenset[str]:
    """Module globals holding per-device streams that the project installs, every one of them, as the
    thread's current stream: a function walks the container and hands each stream to ``set_stream``
    (``for idx, s in streams.items(): with torch.cuda.device(idx): torch.cuda.set_stream(s)``) and sets
    no other stream (no restore of a previous one: not a scope), nor is it a generator (a context
    manager putting the old stream back after its ``yield``). After that call, work queued on one of
    those streams is work on the current stream of its device."""
    memo = derived(project, "installed_registries")
    if "" in memo:
        return memo[""]
    memo[""] = frozenset()
    found: set[str] = set()
    for path in project.paths_containing((b"set_stream(",)):
        model = project.file(path)
        if model is None:
            continue
        for fn in model.functions.values():
            args = [u.arg("stream") for site in fn.calls for u in project.api_uses(model, site)
                    if u.role is Role.SET_STREAM]
            if not args or fn.yields or len({model.code(a) if a is not None else "" for a in args}) != 1 \
                    or not isinstance(args[0], cst.Name) or not _called_by_name(project, fn.node.name.value):
                continue  # (an installer only handed away, a thread's target, installs on another thread)
            for site in fn.calls:
                if any(u.role is Role.SET_STREAM for u in project.api_uses(model, site)):
                    container = _installing_loop(fn, site.node, args[0].value)
                    qualname = _global_qualname(model, fn, container) if container is not None else None
                    if qualname is not None:
                        found.add(qualname)
    memo[""] = frozenset(found)
    return memo[""]


def installed_stream_getter(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """Does a project function hand back a stream of an installed registry (:func:`installed_registries`):
    every value it returns is ``G.get(key)`` / ``G[key]`` of one? ``def device_stream(idx): return
    _streams.get(idx)``: the stream the project made current on that device."""
    memo = derived(project, "installed_stream_getter")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = False
    values = [r.value for r in fn.returns]
    if not values:
        return False
    # the shape of every returned value first (this function's own syntax): only a getter of module
    # globals asks the project-wide scan of installers, which parses every file calling set_stream
    # (issue 15: every inlined project helper returning anything asked it, 11 of 17 parses of one file)
    bases = []
    for v in values:
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "get" \
                and len(v.args) == 1:
            base = v.func.value
        elif isinstance(v, cst.Subscript) and len(v.slice) == 1:
            base = v.value
        else:
            return False
        bases.append(_global_qualname(file, fn, base))
    if None in bases or not project.paths_containing((b"set_stream(",)):
        return False
    registries = installed_registries(project)
    result = bool(registries) and all(q in registries for q in bases)
    memo[id(fn)] = result
    return result


def is_current_stream(project: Project, file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression,
                      _depth: int = 0) -> bool:
    """Is ``expr`` (in ``fn``) the stream current where it is evaluated, computed outside any stream scope
    (so it is the stream of the function's caller too): ``torch.npu.current_stream(dev)``, a project
    getter of it, or a local assigned only from those."""
    if isinstance(expr, cst.Call):
        site = file.call_site(expr)
        if site is None or not _outside_stream_scopes(project, file, site):
            return False
        if fn is not None and _current_stream_call(project, file, fn, expr):
            return True
        target = project.call_target(file, site)
        return target is not None and current_stream_getter(project, target[1], target[0])
    if isinstance(expr, cst.Name) and fn is not None and _depth < 2:
        values = fn.name_assigns.get(expr.value)
        return bool(values) and all(is_current_stream(project, file, fn, v, _depth + 1) for v in values)
    return False


def returned_kind(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> str | None:
    """STREAM / EVENT when every value a (small) project function returns is one."""
    kinds: set[str | None] = set()
    for ret in fn.returns:
        value = ret.value
        if value is None:
            continue
        if isinstance(value, cst.Name) and value.value in fn.name_assigns:
            kinds |= {kind_of_value(project, file, v, _depth) for v in fn.name_assigns[value.value]}
        else:
            kinds.add(kind_of_value(project, file, value, _depth))
    kinds.discard(None)
    return kinds.pop() if len(kinds) == 1 else None


def annotation_kind(file: FileModel, fn: FunctionInfo | None, annotation: cst.BaseExpression | None) -> str | None:
    """STREAM / EVENT for an annotation naming the Stream / Event class (``x: torch.npu.Event``)."""
    if annotation is None:
        return None
    spec = apis.lookup(file.resolve(annotation, fn))
    if spec is None:
        return None
    if spec.role is Role.STREAM_NEW:
        return STREAM
    if spec.role is Role.EVENT_NEW:
        return EVENT
    return None


def attr_kind(project: Project, file: FileModel, cls: ClassInfo | None, attr: str, _depth: int = 0) -> str | None:
    """Kind of ``self.<attr>`` in a class, from its ``self.<attr> = ...`` / ``Cls.<attr> = ...``
    assignments (any method), else from a class-level field annotation."""
    if cls is None:
        return None
    cache = derived(project, "attr_kinds").setdefault(id(cls), {})
    if attr not in cache:
        cache[attr] = None
        kinds: set[str | None] = set()
        # `self.x = ...`, and class attributes initialised lazily: `Cls.x = ...` / `cls.x = ...`
        targets = {f"self.{attr}", f"{cls.name}.{attr}", f"cls.{attr}"}
        for method in cls.methods.values():
            for assign in method.assigns:
                if assign.target in targets:
                    kinds.add(kind_of_value(project, file, assign.value))
        kinds.discard(None)
        if not kinds:
            kinds.add(annotation_kind(file, None, class_field_annotation(cls.node, attr)))
            kinds.discard(None)
        getter = cls.methods.get(attr)  # `@property def compute_stream(self): return current_stream()`
        if not kinds and getter is not None and "property" in getter.decorators \
                and current_stream_getter(project, file, getter):
            kinds.add(MAIN_STREAM)
        if not kinds and not any(assign.target in targets for m in cls.methods.values() for assign in m.assigns):
            # a field a project base class sets (`self.infer_stream = current_stream()` in the base's __init__)
            kinds.add(_base_attr_kind(project, file, cls, attr, _depth))
            kinds.discard(None)
        cache[attr] = kinds.pop() if len(kinds) == 1 else None
    return cache[attr]


def _base_attr_kind(project: Project, file: FileModel, cls: ClassInfo, attr: str, depth: int) -> str | None:
    """The kind of ``self.<attr>`` the nearest project base class setting it gives (three levels at most)."""
    if depth >= 3:
        return None
    for base in cls.bases:
        sym = project.symbol(base, file)
        if sym is not None and isinstance(sym[0], ClassInfo) and sym[0] is not cls:
            kind = attr_kind(project, sym[1], sym[0], attr, depth + 1)
            if kind is not None:
                return kind
    return None


def local_kind(project: Project, file: FileModel, fn: FunctionInfo, name: str) -> str | None:
    """Kind of a local name when every assignment to it in the function gives the same kind."""
    values = fn.name_assigns.get(name)
    if not values:
        params = fn.node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name and param.annotation is not None:
                return annotation_kind(file, fn.parent, param.annotation.annotation)
        return None
    kinds = {kind_of_value(project, file, v) for v in values}
    return kinds.pop() if len(kinds) == 1 else None


def stream_label(key: str, main: str | None = None) -> str:
    """Human wording of a stream key; ``main`` is how the code names the entry stream
    (:func:`entry_stream_name`), used for ``MAIN`` instead of "the current stream"."""
    if key == MAIN:
        return f"`{main}`" if main else "the current stream"
    if key.startswith("tag:"):
        return f'stream "{key[4:]}"'
    if key.startswith("tag?:"):
        return f"the stream tagged {key[5:]}"
    if key.startswith("<stream@"):
        return "a new stream"
    if key in ("<caller's stream>", "<default stream>"):  # (flow/entryctx.py)
        return f"the {key[1:-1]}"
    return f"`{key}`"


def stream_expr(key: str, main: str | None = None, device: str = "torch.npu") -> str | None:
    """An expression for the stream of ``key`` that can be pasted into the function (for fix hints):
    the key's own text, ``main`` or ``<device>.current_stream()`` for the entry stream (``device``: the
    function's device module, :func:`~streamlint.model.devicenames.device_module`); None for a tag or a
    stream the code does not name."""
    if key == MAIN:
        return main or f"{device}.current_stream()"
    if key.startswith(("tag", "<")):
        return None
    return key


def entry_stream_name(project: Project, file: FileModel, fn: FunctionInfo | None) -> str | None:
    """How ``fn`` names the stream current at its entry (``MAIN``), as written: a local assigned only from
    it outside any stream scope (``main_stream = torch.npu.current_stream()``), else a ``self.<attr>``
    the class sets from it (``self.main_stream``) that ``fn`` uses, else such a call as written
    (``torch_npu.npu.current_stream()``); None when the function never names it."""
    if fn is None:
        return None
    memo = derived(project, "entry_stream_name")
    entry = memo.get(id(fn))
    if entry is not None and entry[0] is fn:
        return entry[1]
    name: str | None = None
    for local in fn.name_assigns:
        if is_current_stream(project, file, fn, cst.Name(local)):
            name = local
            break
    if name is None:
        cls = file.classes.get(fn.class_name or "")
        written: str | None = None
        for site in fn.calls:
            exprs = [a.value for a in site.node.args]
            if site.receiver is not None:
                exprs.append(site.receiver)
            for expr in exprs:
                text = dotted(expr) or ""
                if cls is not None and text.startswith("self.") and text.count(".") == 1 \
                        and attr_kind(project, file, cls, text[5:]) == MAIN_STREAM:
                    name = text
                    break
            if name is not None:
                break
            if written is None and _outside_stream_scopes(project, file, site) \
                    and _current_stream_call(project, file, fn, site.node):
                written = file.code(site.node)
        name = name or written
    memo[id(fn)] = (fn, name)
    return name


def tagged_stream_key(tag: str) -> str:
    """The stream a TorchAir stream tag names (``npu_stream_switch(tag)``)."""
    return f"tag:{tag}"


def scope_stream_key(file: FileModel, use: ApiUse, *,
                     constant: Callable[[cst.BaseExpression], str | None] | None = None,
                     stream: Callable[[cst.BaseExpression], str] | None = None,
                     current: Callable[[], str] | None = None) -> str:
    """The key of the stream a stream scope switches to: ``npu_stream_switch(tag)`` (directly or through
    a wrapper, which may fix the tag) → :func:`tagged_stream_key`, or ``tag?:<code>`` when the tag is not
    a literal; ``torch.npu.stream(s)`` → the key of ``s``.

    Without hooks the answer is syntactic (the source text of ``s``). The dataflow passes what it knows
    about values: ``constant(expr)`` — the string a non-literal tag written at the call holds, if any;
    ``stream(expr)`` — the key of the stream object ``s`` evaluates to; ``current()`` — the stream current
    where the scope is entered, for a wrapper that opens its scope on the current stream (the entry stream
    without the hook: no switch either way)."""
    if use.role is Role.STREAM_SWITCH:
        expr = use.value("stream_tag")
        tag = string_value(expr) if expr is not None else None
        if tag is None and expr is not None and constant is not None and use.arg("stream_tag") is not None:
            tag = constant(expr)
        if tag is not None:
            return tagged_stream_key(tag)
        return f"tag?:{file.code(expr)}" if expr is not None else "tag?:<unknown>"
    expr = use.arg("stream")
    if expr is None and "stream" in use.at_current:
        return current() if current is not None else MAIN
    if expr is None:
        inner = use.receiver_attrs.get("stream")
        if inner is not None and on_self(use) and (dotted(inner) or "").startswith("self."):
            # `with self._stream_ctx():` whose body opens `torch.cuda.stream(self._stream)`: the same object
            return stream(inner) if stream is not None else dotted(inner)
        return UNKNOWN_STREAM
    return stream(expr) if stream is not None else file.code(expr)


def on_self(use: ApiUse) -> bool:
    """The use goes through one wrapper method called on ``self``: ``self.*`` inside it is the caller's."""
    func = use.node.func
    return len(use.wrappers) == 1 and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
        and func.value.value == "self"


__all__ = [
    "MAIN",
    "UNKNOWN_STREAM",
    "scope_stream_key",
    "stream_label",
    "tagged_stream_key",
    "EVENT",
    "EVENT_LIST",
    "MAIN_STREAM",
    "installed_registries",
    "installed_stream_getter",
    "STREAM",
    "STREAM_LIST",
    "annotation_kind",
    "is_current_stream",
    "entry_stream_name",
    "stream_expr",
    "outside_stream_scopes",
    "current_stream_getter",
    "attr_kind",
    "derived",
    "kind_of_call",
    "kind_of_value",
    "local_kind",
    "on_self",
    "returned_kind",
]
