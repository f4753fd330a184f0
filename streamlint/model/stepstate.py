"""Step state: ``self.*`` tensors the class rewrites every step (issue 16 §3).

A tensor held on ``self`` is long-lived for the stream rules (a parameter read on a side stream needs no
fork, a buffer needs no ``record_stream``) only while nothing says it changes during the step. Training and
serving code keeps much of its per-step data on the object: gradient buckets and flat grad buffers filled by
backward hooks, staging / pinned / static buffers copied into before each use, shards the optimizer step
updates, offload buffers. Such a field is written by code outside construction (another method, a hook
defined in ``__init__``) on the caller's current stream, so a side stream touching it in another method
needs the same ordering as an argument the caller just produced.

The evidence is a write, never a name: ``x.copy_(...)`` and other in-place tensor methods, ``x[...] = v``,
``x += v``, ``x.data = v``, ``out=x``, a collective writing ``x``, a rebinding ``self.x = <tensor op>``
(not the lazy first allocation under ``if self.x is None:``), where ``x`` is ``self.<field>`` or a chain
below it (``self.buckets[i].data``), also through a local alias (``buf = self.bufs[i]``, ``for b in
self.bufs:``). Writes in construction methods (``__init__``, ``setup``, ``build``, ``load*``, …, and the
methods only they call) are not per-step, but functions defined inside them (hooks) are. A write to a block
of an element (``self.kv_caches[layer][block]``: paged storage whose blocks are handed out disjointly) is no
evidence for the other blocks. Writes inside a
stream scope are another stream's (a class protocol, :mod:`~streamlint.model.flow.protocols`), not the step's.

The fact is per class (with its project bases), computed once and cached (:func:`step_writers`), and read
per storage key (:func:`step_writer`) in the key format of :func:`~streamlint.model.flow.storage.element_field_key`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst
from streamlint.model.syntax import certain_calls, contains, dominates, local_nodes, normalized_code
from streamlint.model.apis import COLLECTIVE_PARAMS, COLLECTIVES, Role, lookup
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, ClassInfo, FunctionInfo
from streamlint.model.paramrefs import parameter_reference
from streamlint.model.placement import settled_host_value
from streamlint.model.slotpools import slot_pools
from streamlint.model.streams import derived, scope_stream_key
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project

_CONSTRUCTION = re.compile(r"_*(init|setup|set_up|build|load|reset_parameters|from_|create|__setstate__|"
                           r"__post_init__|_init_weights|allocate|materialize|register)")
# in-place methods that change no tensor contents
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream", "set_", "resize_",
                         "pin_memory", "untyped_storage"})
_SUBSCRIPT = re.compile(r"\[[^\[\]]*\]")


def _path(file: FileModel, expr: cst.BaseExpression, aliases: dict[str, str]) -> str | None:
    """``self.bufs[i].data`` -> ``self.bufs[].data``; a local alias of such a chain is the chain; else None."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value in ("view", "view_as", "reshape", "narrow", "flatten", "detach", "chunk",
                                         "split", "select", "unflatten", "__getitem__"):
        expr = expr.func.value  # a view of the chain writes the chain
    root = expr
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    if not isinstance(root, cst.Name) or (root.value != "self" and root.value not in aliases):
        return None  # (the text below can only match a chain on `self` or an alias: no code generated)
    code = file.code(expr).replace(" ", "")
    while True:
        new = _SUBSCRIPT.sub("\x00", code)
        if new == code:
            break
        code = new
    code = code.replace("\x00", "[]")
    if code.endswith(".data"):
        code = code[: -len(".data")]
    root, sep, rest = code.partition(".")
    root_b, _, rest_b = code.partition("[")
    if root == "self" and sep and re.fullmatch(r"[\w.\[\]]+", rest):
        return code
    for name in (root, root_b):
        if name in aliases and re.fullmatch(r"[\w.\[\]]*", code[len(name):]):
            return aliases[name] + code[len(name):]
    return None


def _aliases(file: FileModel, body: cst.CSTNode) -> dict[str, str]:
    """Local names bound to a ``self.*`` chain or an element of one (``buf = self.bufs[i]``, ``for b in
    self.bufs:``, ``for i, b in enumerate(self.bufs):``, ``for k, b in self.bufs.items():``)."""
    out: dict[str, str] = {}
    stack = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
            p = _path(file, n.value, out)
            if p is not None:
                out[n.targets[0].target.value] = p
        elif isinstance(n, cst.For):
            it, target = n.iter, n.target
            if isinstance(it, cst.Call) and dotted(it.func) == "zip" and isinstance(target, cst.Tuple) \
                    and len(target.elements) == len(it.args):
                for el, arg in zip(target.elements, it.args):
                    p = _path(file, arg.value, out)
                    if p is not None and isinstance(el.value, cst.Name):
                        out[el.value.value] = p + "[]"
                stack.extend(children(n))
                continue
            if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and it.args:
                it = it.args[0].value
                if isinstance(target, cst.Tuple) and len(target.elements) == 2:
                    target = target.elements[1].value
            elif isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in (
                    "values", "items"):
                if it.func.attr.value == "items" and isinstance(target, cst.Tuple) and len(target.elements) == 2:
                    target = target.elements[1].value
                it = it.func.value
            p = _path(file, it, out)
            if p is not None and isinstance(target, cst.Name):
                out[target.value] = p + "[]"
        stack.extend(children(n))
    return out


def _writes(file: FileModel, body: cst.CSTNode) -> list[tuple[str, cst.CSTNode]]:
    """(normalised ``self.*`` path, node) of every write to a ``self.*`` chain in ``body``."""
    aliases = _aliases(file, body)
    out: list[tuple[str, cst.CSTNode]] = []

    def add(expr: cst.BaseExpression, node: cst.CSTNode) -> None:
        p = _path(file, expr, aliases)
        if p is not None and p != "self" and "[][]" not in p:  # (a block of an element: paged storage whose
            out.append((p, node))  # blocks the scheduler hands out disjointly, `self.kv[layer][block]`)

    lazy = _lazy_allocations(file, body)
    settled = _settled_before_sync(body)
    stack = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.With) and any("stream" in file.code(item.item).lower() for item in n.items):
            continue  # a write queued on a side stream: a class protocol's (flow/protocols.py), not the step's
        if id(n) in settled:
            continue  # a write the method itself completes by synchronising the device after it
        if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None and settled_host_value(n.value):
            pass  # `self.host_copy[k] = p.to("cpu")`: host memory the host finished writing, no stream work
        elif isinstance(n, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            for t in targets:
                if (isinstance(t, cst.Subscript) or isinstance(n, cst.AugAssign)) and not (
                        isinstance(n, cst.Assign) and parameter_reference(body, n.value)):  # (paramrefs.py)
                    add(t, n)  # `self.buf[i] = v`, `self.buf += v`
                elif isinstance(t, cst.Attribute) and t.attr.value in ("data", "grad"):
                    add(t, n)  # `self.buf.data = v`: the field now holds other contents
                elif isinstance(t, cst.Attribute) and _tensor_value(n.value) and id(n) not in lazy \
                        and not _bare_allocation(n.value):
                    add(t, n)  # `self.buf = x.clone()`: a fresh tensor each call (not `torch.empty(...)`)
        elif isinstance(n, cst.Call):
            func = n.func
            name = func.attr.value if isinstance(func, cst.Attribute) else dotted(func) or ""
            last = name.rsplit(".", 1)[-1]
            if isinstance(func, cst.Attribute) and last.endswith("_") and not last.startswith("_") \
                    and last not in _NOT_WRITES:
                add(func.value, n)  # `self.buf.copy_(x)`, `b.zero_()`
            if last in COLLECTIVES:
                written = COLLECTIVES[last][0]
                names = COLLECTIVE_PARAMS.get(last, ())
                for i, arg in enumerate(a for a in n.args if a.keyword is None):
                    if i in written:
                        add(arg.value, n)
                for arg in n.args:
                    if arg.keyword is not None and arg.keyword.value in names \
                            and names.index(arg.keyword.value) in written:
                        add(arg.value, n)
            for arg in n.args:
                if arg.keyword is not None and arg.keyword.value == "out":
                    add(arg.value, n)
        stack.extend(children(n))
    return out


def _is_role(func: cst.BaseExpression, role: Role) -> bool:
    """Is ``func`` spelled as an API of the table with ``role`` (``torch.xpu.synchronize``, ``torch.npu.graph``)?"""
    spec = lookup(dotted(func))
    return spec is not None and spec.role is role


def _settled_before_sync(body: cst.CSTNode) -> set[int]:
    """The statements of ``body`` (not inside a nested function) that come before a device-wide synchronize at
    the top level of the body (``torch.npu.synchronize()``, or entering ``torch.npu.graph(g)``, which synchronises):
    the method finishes their device work itself before it returns (a startup ``capture()`` filling static
    buffers, then synchronising before the graph capture)."""
    block = getattr(body, "body", None)
    block = getattr(block, "body", block)
    if not isinstance(block, (list, tuple)):
        return set()
    flat: list[cst.CSTNode] = []
    for stmt in block:  # top-level statements, and those of a `try:` body at the top level
        flat += list(stmt.body.body) if isinstance(stmt, cst.Try) else [stmt]
    last = -1
    for i, stmt in enumerate(flat):
        if isinstance(stmt, cst.With) and any(isinstance(it.item, cst.Call) and _is_role(it.item.func, Role.GRAPH_CAPTURE)
                                              for it in stmt.items):
            last = i  # `with torch.cuda.graph(g):` synchronizes the device on entry
        elif isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                and _is_role(small.value.func, Role.DEVICE_SYNCHRONIZE) for small in stmt.body):
            last = i
    out: set[int] = set()
    stack = list(flat[:max(last, 0)])
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.Lambda)):
            continue
        out.add(id(n))
        stack.extend(children(n))
    return out


_BARE_ALLOCATORS = frozenset({"empty", "empty_like", "new_empty", "empty_strided"})


def _bare_allocation(value: cst.BaseExpression | None) -> bool:
    """``torch.empty(n, device=d)``, ``x.new_empty(n)``: an allocation no kernel writes (its contents are
    whatever the block held): a rebinding to it is no write of the field's data."""
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    name = func.attr.value if isinstance(func, cst.Attribute) else (dotted(func) or "").rsplit(".", 1)[-1]
    return name in _BARE_ALLOCATORS


def _tensor_value(value: cst.BaseExpression | None) -> bool:
    """A value that computes a tensor (a call, arithmetic, an element): not a constant, ``None``, a name."""
    return isinstance(value, (cst.Call, cst.BinaryOperation, cst.Subscript))


def _lazy_allocations(file: FileModel, body: cst.CSTNode) -> set[int]:
    """Assignments ``self.x = ...`` under ``if self.x is None:`` (or ``not hasattr(self, "x")``, ``if not
    self.x``): the first allocation of a long-lived buffer, made once."""
    out: set[int] = set()
    stack = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.If):
            test = None  # (the test's text generated only for an If whose block assigns)
            for stmt in n.body.body if isinstance(n.body, cst.IndentedBlock) else []:
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1:
                        test = file.code(n.test).replace(" ", "") if test is None else test
                        t = file.code(small.targets[0].target).replace(" ", "")
                        field = t.split(".", 1)[-1]
                        if f"{t}isNone" in test or f"not{t}" in test or f"hasattr(self,'{field}')" in \
                                test.replace('"', "'") or f"{t}.numel()" in test or f"{t}.shape" in test:
                            out.add(id(small))
        stack.extend(children(n))
    return out


def _construction(cls: ClassInfo) -> set[str]:
    """Construction methods of the class: by name, and the methods only those call (through ``self.m()``)."""
    names = {m for m in cls.methods if _CONSTRUCTION.match(m)}
    callers: dict[str, set[str]] = {}
    for m, fn in cls.methods.items():
        for site in fn.calls:
            f = site.node.func
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self" \
                    and f.attr.value in cls.methods:
                callers.setdefault(f.attr.value, set()).add(m)
    changed = True
    while changed:
        changed = False
        for m, by in callers.items():
            if m not in names and by and by <= names:
                names.add(m)
                changed = True
    return names


def _nested_defs(node: cst.CSTNode) -> list[cst.CSTNode]:
    out, stack = [], list(children(node))
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.Lambda)):
            out.append(n)
            continue
        stack.extend(children(n))
    return out


def _only_called(body: cst.CSTNode, d: cst.CSTNode) -> bool:
    """A helper defined in a construction method and only called there (``def field(name, like): ...`` then
    ``field("budget", x)``): part of the construction, not a hook handed out to run at every step."""
    if not isinstance(d, cst.FunctionDef):
        return False
    name, called, refs = d.name.value, 0, 0
    stack = list(children(body))
    funcs: set[int] = {id(d.name)}
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == name:
            called += 1
            funcs.add(id(n.func))
        elif isinstance(n, cst.Name) and n.value == name and id(n) not in funcs:
            refs += 1
        stack.extend(children(n))
    return called > 0 and refs == 0


def _class_writes(file: FileModel, cls: ClassInfo) -> dict[str, list[tuple[str, cst.CSTNode]]]:
    construction = _construction(cls)
    found: dict[str, list[tuple[str, cst.CSTNode]]] = {}
    for name, fn in cls.methods.items():
        if "staticmethod" in (d.rsplit(".", 1)[-1] for d in fn.decorators) or fn.params[:1] != ("self",):
            continue
        bodies = [d for d in _nested_defs(fn.node.body) if not _only_called(fn.node.body, d)] \
            if name in construction else [fn.node.body]
        for body in bodies:
            for path, node in _writes(file, body):
                found.setdefault(path, []).append((name, node))
    pools = tuple(f"self.{f}[" for f in slot_pools(cls, construction))  # (writes at a slot its caller chose)
    return {p: w for p, w in found.items() if not p.startswith(pools)} if pools else found


def step_writers(project: Project, file: FileModel, cls: ClassInfo) -> dict[str, list[tuple[str, cst.CSTNode]]]:
    """Normalised ``self.*`` path -> [(method, write node)] of the writes outside construction, in the class
    and its project bases (three levels)."""
    memo = derived(project, "step_writers")
    if id(cls) in memo:
        return memo[id(cls)]
    memo[id(cls)] = {}
    out: dict[str, list[tuple[str, cst.CSTNode]]] = {}
    files = derived(project, "step_write_files")  # id(write node) -> (node, its file, its class)
    todo: list[tuple[ClassInfo, FileModel, int]] = [(cls, file, 0)]
    seen: set[int] = set()
    while todo:
        c, f, depth = todo.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        for path, where in _class_writes(f, c).items():
            where = [(m, node) for m, node in where if not _container_rebind(project, f, c, m, node)]
            if where:
                out.setdefault(path, []).extend(where)
                files.update((id(node), (node, f, c)) for _m, node in where)
        if depth < 3:
            for b in c.bases:
                sym = project.symbol(b, f)
                if sym is not None and isinstance(sym[0], ClassInfo):
                    todo.append((sym[0], sym[1], depth + 1))
    memo[id(cls)] = out
    return out


def _container_rebind(project: Project, file: FileModel, cls: ClassInfo, method: str, node: cst.CSTNode) -> bool:
    """``self.read_buf = make_grid(n, Holder)``: a rebinding to what a project function builds as a container of
    host objects (every return a list / tuple / dict display or comprehension whose elements are constants or
    objects made by calling a class, or a factory parameter the call binds to one): no tensor is written, the
    field holds new host slots the step fills later (through their own methods)."""
    if not (isinstance(node, (cst.Assign, cst.AnnAssign)) and isinstance(node.value, cst.Call)):
        return False
    fn = cls.methods.get(method)
    site = file.call_site(node.value)
    found = project.call_target(file, site) if site is not None and fn is not None else None
    if found is None or found[0].class_name is not None:
        return False
    g, gmod = found
    from streamlint.model.uses import bind_arguments

    bound = bind_arguments(list(g.params) + list(g.kwonly), node.value, kwonly=g.kwonly)

    def made_by_class(e: cst.BaseExpression | None) -> bool:
        if e is None:
            return False
        sym = project.symbol(file.resolve(e, fn) or "", file) if isinstance(e, (cst.Name, cst.Attribute)) else None
        return sym is not None and isinstance(sym[0], ClassInfo)

    def host_element(e: cst.BaseExpression, depth: int = 0) -> bool:
        if isinstance(e, (cst.Integer, cst.Float, cst.SimpleString)) or (
                isinstance(e, cst.Name) and e.value in ("None", "True", "False")):
            return True
        if isinstance(e, (cst.List, cst.Tuple, cst.Dict, cst.Set)):
            return depth < 4 and all(host_element(getattr(el, "value", el), depth + 1)
                                     for el in getattr(e, "elements", ()))
        if isinstance(e, (cst.ListComp, cst.DictComp, cst.SetComp)):
            inner = e.elt if not isinstance(e, cst.DictComp) else e.value
            return depth < 4 and host_element(inner, depth + 1)
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and not e.args:
            name = e.func.value
            if name in g.all_params:
                return made_by_class(bound.get(name))
            return isinstance(gmod.classes.get(name), ClassInfo)
        return False

    values = [r.value for r in g.returns]
    return bool(values) and all(v is not None and host_element(v) for v in values)


def write_place(project: Project, node: cst.CSTNode) -> tuple[FileModel, ClassInfo] | None:
    """The file and class of a write :func:`step_writers` found (a base class's may be in another file)."""
    held = derived(project, "step_write_files").get(id(node))
    return (held[1], held[2]) if held is not None and held[0] is node else None


def own_steps(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, key: str) -> frozenset[str]:
    """The methods ``fn`` runs itself before any use of ``key`` (``self._fill_inputs(obs)`` then the launch that
    reads the input): their writes are ``fn``'s own, made where it calls them (on the stream current there, seen
    by the flow), not a step its caller ran before the call. All of it required, for a call ``self.m(...)``
    that is a statement of its own: it is on every path to each mention of ``key`` (or of a field it is part
    of) in ``fn`` (:func:`~streamlint.model.syntax.dominates`: an earlier straight-line statement of the
    same block, or of a block around it); each other ``self`` method ``fn`` may call before it (not one in a
    ``return`` value: ``return self._infer_batched(obs)`` leaves) names no such field and calls no ``self`` method
    but such helpers or a field holding a module function (``self._check = _check``); and no method of the class but ``fn`` and the construction calls ``m``
    (else the caller's step may run it too), but inside a scope of the same ``self.*`` stream as ``fn``'s own
    call: a call's writes follow the stream it is issued on (``infer()`` and ``calibrate()`` both run
    ``self._fill_state(s)`` under ``with torch.cuda.stream(self.graph_stream):``: neither leaves a write on the
    current stream; the stream a scope enters as the model classifies it, a field bound at construction only:
    :func:`_site_stream`), or inside a stream scope whose stream that method synchronises after the call before
    it returns (:func:`_synced_after`)."""
    parts = key.split("[", 1)[0].split(".")
    fields = {".".join(parts[:i]) for i in range(2, len(parts) + 1)}  # `self.a.b`: `self.a`, `self.a.b`
    lasts = set(parts[1:])  # (a chain whose text is a field ends with the field's last name: no text made else)
    mentions, calls = [], []
    stack: list[cst.CSTNode] = [fn.node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Attribute) and n.attr.value in lasts and normalized_code(file.code(n)) in fields:
            mentions.append(n)
        elif isinstance(n, cst.SimpleStatementLine):
            name = _self_call_statement(n)
            if name is not None:
                calls.append((name, n))
        stack.extend(children(n))
    out: set[str] = set()
    returns = [n for n in local_nodes(fn.node.body) if isinstance(n, cst.Return) and n.value is not None]
    for name, stmt in calls:
        if name in out or any(contains(stmt, m) for m in mentions) \
                or not all(dominates(fn.node, stmt, m) for m in mentions):
            continue
        before = [site.node for site in fn.calls if _self_method(site.node) not in (None, name)
                  and not dominates(fn.node, stmt, site.node) and not _returned(returns, site.node)]
        if all(_quiet_helper(file, cls, c, fields) for c in before):
            out.add(name)
    if not out:
        return frozenset()
    scopes = {name: _call_stream(project, file, cls, fn, stmt) for name, stmt in calls if name in out}
    for m in set(cls.methods) - _construction(cls) - {fn.node.name.value}:
        for site in cls.methods[m].calls:
            name = _self_method(site.node) or ""
            if name in out and (scopes.get(name) is None or _site_stream(project, file, cls, site) != scopes[name]) \
                    and not _synced_after(project, file, cls.methods[m], site):
                out.discard(name)
    return frozenset(out)


# a runtime's host synchronisation with one stream, handed its raw handle (as flow/syncops.py reads it)
_NATIVE_STREAM_SYNC = re.compile(r"(?:^|\.)(?:cuda|hip|cu|musa)StreamSynchronize$|(?:^|\.)aclrtSynchronizeStream$")


def _synced_after(project: Project, file: FileModel, m: FunctionInfo, site: CallSite) -> bool:
    """Does ``m`` finish the device work of the call ``site`` before it returns: on every path from the call to
    the method's end, a later statement synchronises the stream of the ``self.*`` scope the call is issued in
    (``cudaStreamSynchronize`` handed that field's ``cuda_stream``, directly or through a local bound to it, or
    ``field.synchronize()``) or the device, the field not rebound in ``m`` but before the call, no ``return`` /
    ``raise`` on the way. Its writes then leave nothing pending, on whatever stream the field held."""
    key = None
    for use in project.enclosing_scopes(file, site.scope):
        api = next((u for u in use.uses if u.role in (Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT)), None)
        if api is not None:
            key = normalized_code(scope_stream_key(file, api))
            break
    if key is None or not re.fullmatch(r"self(\.\w+)+", key) or any(
            a.target == key and not dominates(m.node, a.node, site.node) for a in m.assigns):
        return False
    handles = {f"{key}.cuda_stream", f"{key}.npu_stream"}
    names = {n for n, vs in m.name_assigns.items() if vs and all(normalized_code(file.code(v)) in handles for v in vs)}

    def syncs(line: cst.CSTNode) -> bool:
        for call in certain_calls(line):
            func = dotted(call.func) or ""
            if _is_role(call.func, Role.DEVICE_SYNCHRONIZE) or normalized_code(func) == f"{key}.synchronize":
                return True
            if _NATIVE_STREAM_SYNC.search(func) and any(
                    normalized_code(file.code(x)) in handles or isinstance(x, cst.Name) and x.value in names
                    for a in call.args for x in local_nodes(a.value)):
                return True
        return False

    def walk(block: list[cst.CSTNode]) -> bool | None:  # True: synced; False: a path leaves first; None: not yet
        at = next((i for i, st in enumerate(block) if contains(st, site.node)), None)
        if at is None:
            return False
        inner = getattr(block[at], "body", None)
        if isinstance(block[at], (cst.With, cst.For, cst.While)) and isinstance(inner, cst.IndentedBlock) \
                and contains(inner, site.node):
            found = walk(list(inner.body))
            if found is not None:
                return found
        elif not isinstance(block[at], cst.SimpleStatementLine):
            return False  # (a branch or a try: not followed)
        for st in block[at + 1:]:
            if any(isinstance(n, (cst.Return, cst.Raise)) for n in local_nodes(st)):
                return False
            if isinstance(st, cst.SimpleStatementLine) and syncs(st):
                return True
            if any(isinstance(n, (cst.Break, cst.Continue)) for n in local_nodes(st)):
                return None
        return None

    return walk(list(getattr(m.node.body, "body", ()))) is True


def _site_stream(project: Project, file: FileModel, cls: ClassInfo, site: CallSite | None) -> str | None:
    """The ``self.*`` stream field the innermost stream scope around a call enters, as the model classifies the
    scope (:func:`~streamlint.model.streams.scope_stream_key`: ``with torch.cuda.stream(self.graph_stream):`` ->
    ``self.graph_stream``; ``with self._stream_timer(self.graph_stream):`` enters none), when that field is one
    stream object for the object's life: bound in construction methods only, never rebound in a step (a field
    that rotates, ``self.cur = self.streams[self.tick % 2]``, names another stream on each step); else None."""
    for use in project.enclosing_scopes(file, site.scope if site is not None else None):
        for api in use.uses:
            if api.role in (Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT):
                key = normalized_code(scope_stream_key(file, api))
                return key if re.fullmatch(r"self(\.\w+)+", key) and _fixed_field(cls, key) else None
    return None


def _fixed_field(cls: ClassInfo, key: str) -> bool:
    """Is every binding in the class of the field ``key`` (or of a field it is part of) made in a construction
    method, and is there one?"""
    construction = _construction(cls)
    bound = [(m, a.target) for m, f in cls.methods.items() for a in f.assigns
             if a.target == key or key.startswith(a.target + ".")]
    return bool(bound) and all(m in construction for m, _ in bound) and any(t == key for _, t in bound)


def _call_stream(project: Project, file: FileModel, cls: ClassInfo, fn: FunctionInfo, stmt: cst.CSTNode
                 ) -> str | None:
    site = next((s for s in fn.calls if contains(stmt, s.node)), None)
    return _site_stream(project, file, cls, site)


def _plain_callable(cls: ClassInfo, name: str) -> bool:
    """``self._check = _check``: a field every binding of which in the class is a function of a module (a name
    or a dotted name not on ``self``, no lambda, no call): called, it is handed no ``self`` implicitly and can
    reach the object's fields only through its arguments (:func:`_quiet_helper` requires that none is ``self``)."""
    values = [(a.value, m) for m in cls.methods.values() for a in m.assigns if a.target == f"self.{name}"]

    def module_function(v: cst.BaseExpression, m: FunctionInfo) -> bool:
        root = (dotted(v) or "self").split(".")[0] if isinstance(v, (cst.Name, cst.Attribute)) else "self"
        return root not in ("self", "cls", "None") and root not in m.all_params and root not in m.name_assigns

    return bool(values) and all(module_function(v, m) for v, m in values)


def _returned(returns: list[cst.Return], call: cst.Call) -> bool:
    """Is ``call`` in the value of a ``return`` of the function (``return self._infer_batched(obs)``): the
    function leaves once it has run, no later statement follows it."""
    return any(contains(r.value, call) for r in returns)


def _self_method(call: cst.Call) -> str | None:
    f = call.func
    if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self":
        return f.attr.value
    return None


def _self_call_statement(stmt: cst.SimpleStatementLine) -> str | None:
    """``self.m(...)`` (or ``x = self.m(...)``) as a whole statement line: ``m``."""
    if len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
    return _self_method(value) if isinstance(value, cst.Call) else None


def _quiet_helper(file: FileModel, cls: ClassInfo, call: cst.Call, fields: set[str], depth: int = 0) -> bool:
    """The call ``self.m(...)`` runs a method of the class (not a base's) whose body names none of ``fields`` and
    calls no ``self`` method but such quiet helpers (two levels down: ``self._check(rc)`` on a native copy's
    return code), or a field holding a module function that is not handed the object itself
    (``self._stage(self, obs)`` reaches every field)."""
    name = _self_method(call) or ""
    m = cls.methods.get(name)
    if m is None:
        return _plain_callable(cls, name) and not any(
            isinstance(a.value, cst.Name) and a.value.value == "self" for a in call.args)
    code = normalized_code(file.code(m.node))
    return not any(re.search(rf"{re.escape(f)}\b", code) for f in fields) and all(
        _self_method(site.node) is None or depth < 2 and _self_method(site.node) != name
        and _quiet_helper(file, cls, site.node, fields, depth + 1) for site in m.calls)


def step_writer(project: Project, file: FileModel, fn: FunctionInfo, key: str, mode: str,
                quiet: Callable[[cst.CSTNode], bool] | None = None) -> str | None:
    """The method that rewrites the long-lived storage ``key`` (``self.flat``, ``self.buckets[].data``) every
    step, when ``fn``'s class has one other than ``fn`` itself and the methods ``fn`` calls itself
    (:func:`own_steps`), in eager / CUDA code (the path ``mode``); None when nothing says it changes.
    ``quiet(write)``: a write that leaves nothing on the caller's stream (``flow/quietwrites.py``: a rebinding to
    an object whose construction queues no device work, a write its method waits for; the answer is memoised
    with it, so always pass the same one)."""
    if mode not in ("eager", "cuda") or not key.startswith("self.") or fn.class_name is None:
        return None
    cls = file.classes.get(fn.class_name)
    if cls is None:
        return None
    own = fn.node.name.value
    memo = derived(project, "step_writer")  # (asked per access of a field: a fact of the class, method and key)
    mkey = (id(cls), own, key)
    held = memo.get(mkey)
    if held is None or held[0] is not cls:  # (the class is kept with its answer: an id is never reused under it)
        mine = own_steps(project, file, cls, fn, key) | {own}
        memo[mkey] = held = (cls, _other_writer(step_writers(project, file, cls), key, mine, quiet))
    return held[1]


def _other_writer(writers: dict[str, list[tuple[str, cst.CSTNode]]], key: str, mine: frozenset[str],
                  quiet: Callable[[cst.CSTNode], bool] | None = None) -> str | None:
    """The first method not in ``mine`` among ``writers`` of ``key``, a part of it or a whole it is part of (a
    rebinding of a whole: ``self.engine = Engine(n)`` for ``self.engine.slot``), for a write ``quiet`` does not
    clear."""
    for path, where in writers.items():
        if path == key or path.startswith((key + ".", key + "[")) or key.startswith((path + ".", path + "[")):
            method = next((m for m, node in where if m not in mine and not (quiet is not None and quiet(node))), None)
            if method is not None:
                return method
    return None


def forked_elsewhere(file: FileModel, fn: FunctionInfo, stream: str) -> bool:
    """Another method of ``fn``'s class makes this ``self.*`` stream wait (``stream.wait_stream(...)``,
    ``stream.wait_event(...)``): the class orders it in a fork step of its own
    (``_wait_for_previous_optim_step()``), which its caller runs before ``fn`` (an order unknowable here)."""
    cls = file.classes.get(fn.class_name or "") if stream.startswith("self.") else None
    if cls is None:
        return False
    wanted = stream.replace('"', "'").replace(" ", "")
    return any(site.method in ("wait_stream", "wait_event") and isinstance(site.node.func, cst.Attribute)
               and file.code(site.node.func.value).replace('"', "'").replace(" ", "") == wanted
               for method in cls.methods.values() if method is not fn for site in method.calls)


def forks_for_callers(file: FileModel, fn: FunctionInfo, stream: str) -> bool:
    """Another method of ``fn``'s class makes this ``self.*`` stream wait for the current stream
    (``self._stream.wait_stream(torch.cuda.current_stream())``): a fork step the object's users run before
    ``fn`` (``maybe_sync_shared_experts_stream()`` before ``forward()``), so what they produced on their current
    stream before that call is ordered before the stream's work in ``fn``. The order of the calls is the
    caller's, unseen here: an argument read on the stream is then no finding (precision first). Construction
    methods (``__init__`` and what only they call) run once, not before every call: they fork nothing."""
    cls = file.classes.get(fn.class_name or "") if stream.startswith("self.") else None
    if cls is None:
        return False
    steps = _fork_steps(file, cls)
    wanted = _norm(stream)
    return any(name != fn.node.name.value for name in steps.get(wanted, ()))


_norm = normalized_code


def _fork_steps(file: FileModel, cls: ClassInfo) -> dict[str, set[str]]:
    """Per ``self.*`` stream text, the methods of ``cls`` that are its fork steps (computed once per class)."""
    held = getattr(cls, "_fork_steps", None)
    if held is not None:
        return held
    steps: dict[str, set[str]] = {}
    construction = _construction(cls)
    for name, method in cls.methods.items():
        if name in construction:
            continue
        entered = {_norm(file.code(scope.item)) for scope in method.scopes}
        for site in method.calls:
            func = site.node.func
            if site.method != "wait_stream" or not isinstance(func, cst.Attribute) or not site.node.args:
                continue
            arg = site.node.args[0].value
            text = _norm(file.code(func.value))
            if isinstance(arg, cst.Call) and (dotted(arg.func) or "").rsplit(".", 1)[-1] == "current_stream" \
                    and not any(text in item for item in entered):  # (a method running work on the stream
                steps.setdefault(text, set()).add(name)  # itself is no dedicated fork step)
    cls._fork_steps = steps  # type: ignore[attr-defined]
    return steps
    wanted = stream.replace('"', "'").replace(" ", "")
    for method in cls.methods.values():
        if method is fn or any(wanted in file.code(scope.item).replace('"', "'").replace(" ", "")
                               for scope in method.scopes):
            continue  # (a method running work on the stream itself is no dedicated fork step)
        for site in method.calls:
            func = site.node.func
            if site.method != "wait_stream" or not isinstance(func, cst.Attribute) or not site.node.args \
                    or file.code(func.value).replace('"', "'").replace(" ", "") != wanted:
                continue
            arg = site.node.args[0].value
            if isinstance(arg, cst.Call) and (dotted(arg.func) or "").rsplit(".", 1)[-1] == "current_stream":
                return True
    return False


__all__ = ["forks_for_callers", "forked_elsewhere", "own_steps", "step_writer", "step_writers", "write_place"]
