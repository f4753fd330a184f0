"""Calls: which project helpers are interpreted inline, and with what arguments.

Small project functions that order streams (``self._fork()``, ``wait_for(s)``, ``record_event(flag,
events, idx)``) run inline with their arguments bound, up to a depth; an enable-flag wrapper's switch
condition decides whether a scope really switches streams."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.hostannotations import host_param
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of, calls_after, orders_after
from streamlint.model.flow.coarse import ends_in
from streamlint.model.flow.duckmethods import duck_method
from streamlint.model.flow.indexsyms import SYM
from streamlint.model.flow.elementsets import element_origins
from streamlint.model.flow.frames import frame_containers, returned_container
from streamlint.model.flow.effects import held_object
from streamlint.model.flow.inlinecallees import inline_callee
from streamlint.model.flow.heldaliases import held_method, held_receiver, reads_kept_on_host
from streamlint.model.flow.heldresults import held_result
from streamlint.model.flow.values import CVal, EVal, KVal, MAX_INLINE_DEPTH, NONE, State, SVal, TVal, TupVal
from streamlint.model.flow.places import global_accessor
from streamlint.model.flow.viewresults import declared_non_tensors, field_view_getter, returned_tuples, \
    shared_result_groups
from streamlint.model.streams import (
    EVENT,
    MAIN,
    STREAM,
    derived,
    is_current_stream,
    on_self,
    outside_stream_scopes,
)
from streamlint.model.syntax import contains, local_nodes, string_annotation, strip_not
from streamlint.model.tensors import META_METHODS, param_kinds, return_kind
from streamlint.model.tensorvocab import ESCAPE_METHODS, META_ATTRS, VIEW_ATTRS, VIEW_METHODS
from streamlint.model.flow.hostreads import async_host_copy_call
from streamlint.model.flow.hosthelpers import note_guessed_helper, returns_host_memory
from streamlint.model.flow.helperrecords import checking_import
from streamlint.model.flow.paramfields import declared_method
from streamlint.model.flow.metaonly import metadata_only  # noqa: F401 - (re-exported for exprs)
from streamlint.model.flow.recordreturns import declared_host
from streamlint.model.uses import bind_arguments
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ApiUse


_RELEVANT_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "record", "wait", "synchronize",
                               "record_stream"})

_RELEVANT_ROLES = frozenset({Role.DEVICE_SYNCHRONIZE, Role.TAGGED_EVENT_RECORD, Role.TAGGED_EVENT_WAIT,
                             Role.RECORD_TAGGED_STREAM, Role.OPS_RECORD, Role.OPS_WAIT, Role.WAIT_TENSOR,
                             Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT, Role.CURRENT_STREAM})


def wait_self_expr(project: Project, file: FileModel, use: ApiUse) -> cst.BaseExpression | None:
    """The call-site argument forwarded as ``npu_wait_tensor``'s ``self`` (the waited tensor); wrapper
    parameters literally named ``self`` (vllm-ascend's module-level ``npu_wait_tensor(self, dependency,
    *, enabled=True)``) are bound by the wrapper inference like any other."""
    return use.arg("self")




def current_stream_params(project: Project, file: FileModel, fn: FunctionInfo,
                          candidates: set[str]) -> frozenset[str]:
    """Stream parameters (among ``candidates``: not tensors) that every call site in the project binds to
    the caller's current stream (``mgr.offload(k, v, torch.npu.current_stream())``): inside the function
    they are the entry stream (the conditions follow the call: arguments are evaluated at each call
    site). Only asked of functions that switch streams themselves (the call-site search reads files)."""
    memo = derived(project, "current_stream_params")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = frozenset()
    result: set[str] = set()
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    params = tuple(p for p in (fn.params[1:] if method else fn.params) + fn.kwonly if p in candidates)
    switches = any(u.role in (Role.NATIVE_STREAM_CONTEXT, Role.STREAM_SWITCH)
                   for site in fn.scopes for u in project.scope_use(file, site).uses)
    sites = callers_of(project, file, fn) if params and switches else None
    if sites:
        all_params = (fn.params[1:] if method else fn.params) + fn.kwonly
        binds = [(model, site, bind_arguments(all_params, site.node, kwonly=fn.kwonly)) for model, site in sites]
        for name in params:
            if all(bound.get(name) is not None
                   and is_current_stream(project, model, site.function, bound[name])
                   and outside_stream_scopes(project, model, site)
                   for model, site, bound in binds):
                result.add(name)
    memo[id(fn)] = frozenset(result)
    return memo[id(fn)]


def event_waited_elsewhere(project: Project, file: FileModel, fn: FunctionInfo, attr: str) -> bool:
    """Does every caller of ``fn`` wait on the event attribute ``attr`` it publishes right after the call,
    before any other call (``stream.wait_event(mgr.done)``, ``mgr.done.wait()``, a project
    ``_wait_event(s, mgr.done)``; other waits may come first)? Then the join is the caller's, done before it
    can allocate again. A wait that comes later leaves the hazard in ``fn``."""
    memo = derived(project, "event_waited_elsewhere")
    if (id(fn), attr) not in memo:
        memo[(id(fn), attr)] = False
        sites = callers_of(project, file, fn)
        memo[(id(fn), attr)] = bool(sites) and all(_waits_right_after(model, site, attr) for model, site in sites)
    return memo[(id(fn), attr)]


_TAKE_METHODS = frozenset({"pop", "get", "popleft", "popitem", "setdefault"})


def container_of(held: cst.BaseExpression) -> cst.BaseExpression:
    """The container an element is taken from: ``x.events[i]``, ``x.events.pop(k)``, ``x.events.get(k)``,
    ``x.events.popleft()`` -> ``x.events``."""
    while True:
        if isinstance(held, cst.Subscript):
            held = held.value
        elif isinstance(held, cst.Call) and isinstance(held.func, cst.Attribute) \
                and held.func.attr.value in _TAKE_METHODS:
            held = held.func.value
        else:
            return held


def waited_expr(site) -> cst.BaseExpression | None:
    """What a wait call waits on, taken out of its container: ``s.wait_event(x.evs[i])``, ``x.ev.wait()``,
    ``x.evs.pop(k).synchronize()``, ``x.ev.query()`` -> ``x.evs`` / ``x.ev``; None for any other call."""
    if site.method == "wait_event" and site.node.args:
        return container_of(site.node.args[0].value)
    if site.method in ("wait", "synchronize", "query") and isinstance(site.node.func, cst.Attribute):
        return container_of(site.node.func.value)
    return None


def event_field_waited(project: Project, attr: str) -> bool:
    """Does any code of the project wait on an event field named ``attr`` (``s.wait_event(x.attr)``,
    ``x.attr.wait()``, ``x.attr[i].synchronize()``, ``x.attr.query()``, or a name bound to an element of it:
    ``for d, ev in self.attr.items(): s.wait_event(ev)``, :mod:`~streamlint.model.flow.elementsets`)? A field nobody waits on stands for no
    work anyone relies on."""
    memo = derived(project, "event_field_waited")
    if attr not in memo:
        memo[attr] = False
        for model in project.files_containing((attr.encode(),)):
            for fn in model.iter_functions():
                for site in fn.calls:
                    held = waited_expr(site)
                    if isinstance(held, cst.Attribute) and held.attr.value == attr or held is not None and any(
                            (o.field or o.holder) == attr for o in element_origins(fn.node, _waited_raw(site))):
                        memo[attr] = True  # (or an element of it, through a loop / alias / comprehension)
                        return True
    return memo[attr]


def _waited_raw(site) -> cst.BaseExpression:
    """The expression a wait call (:func:`waited_expr`) names, before taking it out of its container."""
    return site.node.args[0].value if site.method == "wait_event" else site.node.func.value


def _waits_right_after(model: FileModel, site, attr: str) -> bool:
    for node, name in calls_after(site):
        if not orders_after(name):
            return False  # other work (an allocation, maybe) before the wait
        if any((dotted(e) or "").endswith(f".{attr}") for e in [node.func] + [a.value for a in node.args]):
            return True
    return False


def node_mentions_ordering(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            name = dotted(n.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in _RELEVANT_METHODS or "event" in last or "wait" in last or "stream" in last:
                return True
        stack.extend(children(n))
    return False


def _param_test(test: cst.BaseExpression, params: tuple[str, ...]) -> tuple[str, bool] | None:
    test, positive = strip_not(test)
    if isinstance(test, cst.Name) and test.value in params:
        return test.value, positive
    return None


def switch_condition(project: Project, file: FileModel, fn: FunctionInfo,
                     roles: frozenset = apis.STREAM_SCOPE_ROLES) -> tuple[str, bool] | None:
    """(parameter, value for which the wrapper opens the real stream scope -- or calls the API of one of
    ``roles``) for enable-flag wrappers."""
    params = fn.all_params
    for site in fn.calls:
        if not any(u.role in roles for u in project.api_uses(file, site)):
            continue
        for guard in site.guards:
            found = _param_test(guard.test, params)
            if found is not None:
                return found[0], found[1] != guard.negated
        for ret in fn.returns:
            value = ret.value
            if isinstance(value, cst.IfExp):
                found = _param_test(value.test, params)
                if found is None:
                    continue
                if contains(value.body, site.node):
                    return found
                if contains(value.orelse, site.node):
                    return found[0], not found[1]
        body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
        for stmt in body:
            if contains(stmt, site.node):
                break
            if isinstance(stmt, cst.If) and stmt.orelse is None and block_returns(stmt.body):
                found = _param_test(stmt.test, params)
                if found is not None:
                    return found[0], not found[1]
    return None


def _self_switch_test(fn: FunctionInfo) -> tuple[cst.BaseExpression, bool] | None:
    """(test, value for which the scope opens) of a wrapper method that returns a null context early on a
    test of its own object (``if self._stream is None: return nullcontext()``); the caller calls it on
    ``self``, so the test reads the caller's attributes and correlates with the caller's own tests."""
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []
    for stmt in body:
        if isinstance(stmt, cst.If) and stmt.orelse is None and block_returns(stmt.body) \
                and "self." in (dotted_test(stmt.test) or ""):
            return stmt.test, False
    return None


def dotted_test(test: cst.BaseExpression) -> str | None:
    """The attribute a test reads: ``self.s`` for ``self.s``, ``not self.s``, ``self.s is None``."""
    test, _ = strip_not(test)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)):
        test = test.left
    return dotted(test) if isinstance(test, (cst.Name, cst.Attribute)) else None


def block_returns(block: cst.BaseSuite) -> bool:
    return ends_in(block, cst.Return)


def _no_device_work(value: cst.BaseExpression) -> bool:
    """A field initialiser that launches nothing: a name, an attribute, a constant, a literal."""
    stack = [value]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Call, cst.BinaryOperation, cst.Subscript, cst.Lambda)):
            return False
        stack.extend(children(n))
    return True


def plain_container(cls: ClassInfo) -> bool:
    """A project class whose construction only stores its arguments (a dataclass, a NamedTuple, an
    ``__init__`` of plain ``self.x = x`` assignments): building one holds the tensors handed in, it
    touches no device memory."""
    if "__post_init__" in cls.methods:
        return False
    init = cls.methods.get("__init__")
    if init is None:
        return not any(b.rsplit(".", 1)[-1] in ("Module", "Function") for b in cls.bases)
    body = init.node.body.body if isinstance(init.node.body, cst.IndentedBlock) else []
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr):
                v = small.value
                if isinstance(v, (cst.SimpleString, cst.ConcatenatedString)):
                    continue
                if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "__init__" \
                        and isinstance(v.func.value, cst.Call) and dotted(v.func.value.func) == "super":
                    continue
                return False
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                if not all(isinstance(t, cst.Attribute) for t in targets):
                    return False
                if small.value is not None and not _no_device_work(small.value):
                    return False
                continue
            return False
    return True


def stored_params(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> frozenset[str]:
    """The parameters a project function keeps beyond the call: assigned to an attribute or a container
    slot (``self.q = q``, ``self.slots[i] = t``), put into a container (``.append(t)``), or forwarded to
    a project function or plain container class that keeps them."""
    memo = derived(project, "stored_params")
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = frozenset()  # recursion guard
    params = set(fn.all_params) - {"self", "cls"}
    kept: set[str] = set()

    def names(expr: cst.BaseExpression | None) -> set[str]:
        if isinstance(expr, cst.Name) and expr.value in params:
            return {expr.value}
        if isinstance(expr, (cst.Tuple, cst.List)):
            return {n for el in expr.elements for n in names(el.value)}
        return set()

    stack: list[cst.CSTNode] = list(fn.node.body.body) if isinstance(fn.node.body, cst.IndentedBlock) else []
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(isinstance(t, (cst.Attribute, cst.Subscript)) for t in targets):
                kept |= names(n.value)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ESCAPE_METHODS \
                and _own_method(project, file, fn, n) is None:
            for arg in n.args:
                kept |= names(arg.value)
        stack.extend(children(n))
    if _depth < 2:
        for site in fn.calls:
            forwarded = {a.value.value for a in site.node.args if isinstance(a.value, cst.Name)} & (params - kept)
            if not forwarded:
                continue
            own = _own_method(project, file, fn, site.node)
            if own is not None:  # `bucket.append(t)` on a project object: what its method keeps
                method, mod = own
                bound = bind_arguments(method.params[1:] + method.kwonly, site.node, kwonly=method.kwonly)
                held = stored_params(project, mod, method, _depth + 1)
                kept |= {e.value for name, e in bound.items() if name in held and isinstance(e, cst.Name)} & forwarded
                continue
            bound = _kept_arguments(project, file, site, _depth + 1)
            kept |= {e.value for e in bound if isinstance(e, cst.Name)} & forwarded
    memo[id(fn)] = frozenset(kept)
    return memo[id(fn)]


def _own_method(project: Project, file: FileModel, fn: FunctionInfo, call: cst.Call) \
        -> tuple[FunctionInfo, FileModel] | None:
    """``obj.append(t)`` where the local ``obj`` holds an object of a project class with that method (made
    by its constructor, or returned by a helper annotated with the class): the class's own method, not a
    list's."""
    recv = call.func.value if isinstance(call.func, cst.Attribute) else None
    values = fn.name_assigns.get(recv.value, []) if isinstance(recv, cst.Name) else []
    site = file.call_site(values[0]) if len(values) == 1 and isinstance(values[0], cst.Call) else None
    if site is None or site.target is None:
        return None
    cls = project.symbol(site.target, file)
    if cls is None or not isinstance(cls[0], ClassInfo):
        helper = project.call_target(file, site)
        ann = helper[0].node.returns if helper is not None else None
        name = helper[1].resolve(ann.annotation, helper[0]) if ann is not None else None
        cls = project.symbol(name, helper[1]) if name else None
    method = cls[0].methods.get(call.func.attr.value) if cls is not None and isinstance(cls[0], ClassInfo) else None
    return (method, cls[1]) if method is not None and method.params[:1] == ("self",) else None


def _kept_arguments(project: Project, file: FileModel, site, _depth: int = 0) -> list[cst.BaseExpression]:
    """The argument expressions of a call that the project callee keeps (see :func:`stored_params`)."""
    if site.target is not None:
        sym = project.symbol(site.target, file)
        if sym is not None and isinstance(sym[0], ClassInfo) and plain_container(sym[0]):
            return [a.value for a in site.node.args]
    held = held_receiver(file, site)  # `self.q.push(x)` / `q = self.q; q.push(x)`: a held object's method
    found = held_method(project, file, site) if held else project.call_target(file, site)
    if found is None:
        return []
    fn, mod = found
    kept = stored_params(project, mod, fn, _depth)
    kept = {p for p in kept if reads_kept_on_host(project, mod, fn, p)} if held else kept  # (may read it too)
    if not kept:
        return []
    params = fn.params[1:] if fn.class_name and fn.params[:1] == ("self",) else fn.params
    bound = bind_arguments(params + fn.kwonly, site.node, kwonly=fn.kwonly)
    return [expr for name, expr in bound.items() if name in kept and expr is not None]


def kept_arguments(project: Project, file: FileModel, site) -> list[cst.BaseExpression]:
    return _kept_arguments(project, file, site)


def returned_argument(project: Project, fn: FunctionInfo) -> str | None:
    """The parameter a helper hands back, itself or a view of it, on every ``return`` (``return x`` /
    ``return x[1:]`` / ``return x.view(...)``, shape normalisers; never rebound in the helper): its result
    shares the caller's storage."""
    memo = derived(project, "returned_argument")
    if id(fn) not in memo:
        absent = _returns_when_absent(fn)
        found = {_argument_of(ret.value, fn.all_params) for ret in fn.returns if id(ret) not in absent}
        param = found.pop() if len(found) == 1 else None
        if param is not None and any(p != param for p in absent.values()):
            param = None
        memo[id(fn)] = param if param is not None and param not in fn.name_assigns and param not in fn.locals else None
    return memo[id(fn)]


def held_elements(fn: FunctionInfo) -> tuple[bool, ...] | None:
    """For a helper returning tuples (or ``None``): which elements are on every return an attribute of
    a parameter or of ``self`` (``return module.lora_a, module.lora_b, info``): storage the object holds,
    not a fresh allocation of the call."""
    tuples = returned_tuples(fn)
    if tuples is None:
        return None
    shapes = [[_held(el, fn) for el in elements] for elements in tuples]
    if not shapes or len({len(s) for s in shapes}) != 1:
        return None
    return tuple(all(col) for col in zip(*shapes))


def _held(e: cst.BaseExpression, fn: FunctionInfo) -> bool:
    if not isinstance(e, cst.Attribute):
        return False
    root = e
    while isinstance(root, cst.Attribute):
        root = root.value
    return isinstance(root, cst.Name) and (root.value in fn.all_params or root.value == "self") \
        and root.value not in fn.name_assigns


def _returns_when_absent(fn: FunctionInfo) -> dict[int, str]:
    """Returns under ``if <param> is None:`` (the optional-output idiom ``out=None``: a fresh result only
    when the caller gives no buffer) -> that parameter. A call that passes a tensor never takes them."""
    found: dict[int, str] = {}
    for node in local_nodes(fn.node.body):
        if isinstance(node, cst.If) and isinstance(node.test, cst.Comparison) and len(node.test.comparisons) == 1 \
                and isinstance(node.test.comparisons[0].operator, cst.Is) and isinstance(node.test.left, cst.Name) \
                and node.test.left.value in fn.all_params and dotted(node.test.comparisons[0].comparator) == "None":
            for ret in fn.returns:
                if id(ret) not in found and contains(node.body, ret):
                    found[id(ret)] = node.test.left.value
    return found


def _argument_of(e: cst.BaseExpression | None, params: tuple[str, ...]) -> str | None:
    while True:
        if isinstance(e, cst.Name):
            return e.value if e.value in params and e.value not in ("self", "cls") else None
        if isinstance(e, cst.Subscript):
            e = e.value
        elif isinstance(e, cst.Attribute) and e.attr.value in VIEW_ATTRS:
            e = e.value
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in VIEW_METHODS:
            e = e.func.value
        else:
            return None


def _relevant(project: Project, file: FileModel, fn: FunctionInfo, _depth: int = 0) -> bool:
    """Does a helper order streams, switch streams or record lifetimes (directly or one level down)?"""
    memo = derived(project, "relevant")
    key = (id(fn), _depth)  # (the answer depends on the depth left for callees)
    if key in memo:
        return memo[key]
    memo[key] = False  # recursion guard
    result = global_accessor(fn)
    for site in () if result else fn.calls:
        if site.method in _RELEVANT_METHODS or async_host_copy_call(site.node, site.method):
            # (a helper queuing a device-to-host copy hands back a pending host tensor; any non-blocking
            # copy is a transfer queued on the caller's stream, work an event recorded there must follow)
            result = True
            break
        if any(u.role in _RELEVANT_ROLES for u in project.api_uses(file, site)):
            result = True
            break
        if _depth < 2:
            found = project.call_target(file, site)
            if found is not None and found[0] is not fn and _relevant(project, found[1], found[0], _depth + 1):
                result = True
                break
    memo[key] = result
    return result


class Calls:
    """Inlining of project helpers and wrapper activation (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``anchor``, ``depth``, ``fn``, ``frames``, ``inline_stack``, ``next_id``, ``project``,
    ``single``. It asks control (block, unpack); exprs (ev); orderings (render); storage (referenced, tensors).
    """

    def helper_call(self, st: State, e: cst.Call, method: str | None, target: str | None, found) -> object:
        """:meth:`dispatch_call` of a call that may run the project helper ``found``; a new tensor the generic call
        rule made of it with no evidence in the helper's code is a guess (:func:`.hosthelpers.note_guessed_helper`)."""
        first_id = self.next_id
        return note_guessed_helper(self, st, e, found, self.dispatch_call(st, e, method, target), first_id)

    def declared_result(self, st: State, fn: FunctionInfo, result: object, mod: FileModel | None = None) -> object:
        """The result of a project helper that was not inlined, shaped by what its code says: declared
        non-tensors and the object's own tensors (:func:`declared_non_tensors`, :func:`held_elements`,
        heldresults.py) are no fresh allocation of the call."""
        if not isinstance(result, TVal):
            return result
        if self.returns_host(fn, mod):
            return None  # every `return` builds host values (a layout policy of ints, a flag): no tensor
        if mod is not None and returns_host_memory(self.project, mod, fn):
            return self.host_tensor(st)  # a staged host buffer, a `torch.frombuffer` of file bytes (hosthelpers.py)
        memo = derived(self.project, "held_result")
        if id(fn) not in memo:
            memo[id(fn)] = held_result(fn, mod.classes.get(fn.class_name or "") if mod is not None else None)
        held = memo[id(fn)]
        if held is not None and st.stores.get(result.sid) is not None:
            st.stores[result.sid].escaped = True  # the object keeps it: the caller's name dying frees nothing
        if held == "kept":
            return None  # complete object state (a cache hit, or filled by a transfer the host waited for)
        declared, held = declared_non_tensors(fn), held_elements(fn)
        if declared is not None and held is not None and len(declared) != len(held):
            declared = None
        skip = [a or b for a, b in zip(declared or held or (), held or declared or ())]
        groups = shared_result_groups(fn)
        if groups is not None and skip and len(groups) != len(skip):
            groups = None
        if not any(skip) and groups is None:
            return result
        items = self.unpack(st, result, len(skip) or len(groups or ()))
        if groups is not None:  # views of one block the helper allocated: one storage, as if inlined
            items = [self.new_tensor(st, items[g].sid, items[g].vid) if g is not None and isinstance(items[g], TVal)
                     else item for item, g in zip(items, groups)]
        return TupVal(tuple(None if other else item for item, other in zip(items, skip or [False] * len(items))))

    def caller_context(self, S, earlier, s: str) -> str | None:
        """A race seen inside an inlined helper that its own analysis cannot see: the helper accesses, on
        the side stream its caller made current (it did not switch), what was accessed before the call.
        Then the caller's name for the tensor (reported at the caller's call); any other race inside the
        helper is the helper's own, reported there. (Not on the entry stream: an earlier helper's
        side-stream work met there is the callers' sequence, seen where the caller uses it.)"""
        time, stream = self.inline_entry
        if s != stream or stream == MAIN or earlier.time > time or self.inner is None:
            return None
        return next((n for n, v in self.outer_envs[0].items() if isinstance(v, TVal) and v.sid == S.sid),
                    S.name or "tensor")

    def inline_target(self, site) -> tuple[FunctionInfo, FileModel] | None:
        if self.depth >= MAX_INLINE_DEPTH:
            return None
        func = site.node.func
        found, built = inline_callee(self.project, self.cfile, self.cfn, site)
        if found is None:
            return None
        fn, mod = found
        if id(fn) in self.inline_stack or fn is self.fn:
            return None
        if built is None and fn.class_name is not None and fn.params[:1] == ("self",):
            # methods of this object (self.method(...)), of an object it holds (self.exchange.dispatch(...))
            # or of a parameter typed with a project class
            if not (isinstance(func, cst.Attribute) and fn.node.name.value == func.attr.value
                    and (isinstance(func.value, cst.Name)
                         and (func.value.value == "self" or self.annotated_method(func) is not None)
                         or held_object(func.value))):
                return None
        if not _relevant(self.project, mod, fn) and not field_view_getter(fn):  # (a getter of field views: its
            return None  # result is the field, not a fresh allocation)
        return fn, mod

    def annotated_method(self, func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
        """``plan.record()`` where ``plan: SchedulePlan`` is a parameter annotated with a project class (or
        unannotated, calling a method only that class defines: flow/duckmethods.py)."""
        return self.declared_method(func) or (duck_method(self.project, self.cfile, self.cfn, func)
                                               if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                               else None)

    def declared_method(self, func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
        return declared_method(self.project, self.cfile, self.cfn, func)  # (paramfields.py)

    def _bind_rest(self, st: State, e: cst.Call, fn: FunctionInfo, params: tuple[str, ...], env: dict) -> None:
        """An inlined helper's ``*args`` / ``**kwargs``: the call's extra arguments (an empty tuple when none)."""
        for star, keyword in ((fn.node.params.star_arg, False), (fn.node.params.star_kwarg, True)):
            if not isinstance(star, cst.Param):
                continue
            if any(a.star == ("**" if keyword else "*") for a in e.args):  # the call unpacks: unknown
                env[star.name.value] = KVal(star.name.value, opaque=True)
            else:
                extra = [a.value for a in e.args if a.keyword is not None and a.keyword.value not in params + fn.kwonly] \
                    if keyword else [a.value for a in e.args if a.keyword is None][len(params):]
                env[star.name.value] = TupVal(tuple(self.ev(st, x) for x in extra))

    def inline(self, st: State, e: cst.Call, fn: FunctionInfo, mod: FileModel) -> object:
        params = fn.params[1:] if fn.class_name and fn.params[:1] == ("self",) else fn.params
        bound = bind_arguments(params + fn.kwonly, e, kwonly=fn.kwonly)
        env: dict[str, object] = {}
        args_from = self.next_id  # storages made by the arguments (`helper(x.clone())`): temporaries of the call
        if fn.class_name and fn.params[:1] == ("self",):
            receiver = e.func.value if isinstance(e.func, cst.Attribute) else None
            env["self"] = KVal(self.render(st, receiver)) if receiver is not None else KVal("self")
        for p in fn.node.params.params + fn.node.params.kwonly_params + fn.node.params.posonly_params:
            name = p.name.value
            if name == "self":
                continue
            expr = bound.get(name)
            if expr is not None:
                v = self.ev(st, expr)
                if (v is None and isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript))) or (
                        isinstance(v, TVal) and host_param(p)):  # `dtype: torch.dtype`: no tensor, whatever the caller's guess
                    v = KVal(self.render(st, expr) if v is None else name, opaque=v is not None)
                elif v is None and isinstance(expr, cst.Call) and param_kinds(self.project, mod, fn).get(name) == STREAM:
                    v = KVal(self.render(st, expr), opaque=True)  # `wait(m.side())`: as `m.side().wait_stream` here
                env[name] = v
                env.update({SYM + name: ix} if (ix := self.index_sym(st, expr)) is not None else {})  # indexsyms.py
            elif p.default is not None:
                d = p.default
                if isinstance(d, cst.Name) and d.value in ("True", "False", "None"):
                    env[name] = NONE if d.value == "None" else CVal(d.value == "True")
                elif isinstance(d, (cst.SimpleString, cst.Integer)):
                    env[name] = CVal(string_value(d) if isinstance(d, cst.SimpleString) else d.value)
        self._bind_rest(st, e, fn, params, env)
        handed = frame_containers(st, bound, env, fn.node)  # the helper's own names for containers (frames.py)
        saved_env, saved_stack, saved_single, saved_anchor = st.env, list(st.stack), self.single, self.anchor
        first_id = self.next_id
        if not self.depth:
            self.inline_floor = first_id  # storages numbered above it are the inlined helpers' own
            self.inline_entry = (self.clock, st.cur)  # what the caller made before, the stream it made current
        st.env = env
        self.depth += 1
        self.single = True
        self.inline_stack.append(id(fn))
        self.frames.append((mod, fn))
        self.outer_envs.append(saved_env)  # the callers' names still hold their tensors while the helper runs
        try:
            out = self.block(fn.node.body.body, [st])  # (lines, or a one-line body's small statements)
        finally:
            self.outer_envs.pop()
            self.frames.pop()
            self.inline_stack.pop()
            self.single = saved_single
            self.depth -= 1
        result_state = out[0] if out else st
        ret = result_state.ret if result_state.done else None
        if result_state is not st:  # single mode never forks; keep the caller's object
            st.__dict__.update(result_state.__dict__)
        pending = self.mark_exit(st, fn, mod, ret)  # host tensors handed back still pending (hostreads.py)
        st.env, st.stack, st.done, st.ret, st.flow = saved_env, saved_stack, False, None, None
        self.list_return = (id(e), returned_container(fn, st.held, st.stores))  # `return outs` (frames.py; control.assign)
        st.held = handed.leave(st.held)
        st.env.update(pending)
        self.anchor = saved_anchor
        declared = return_kind(mod, fn)  # `-> torch.cuda.Stream`, `-> int`: the helper's declared result
        if declared == STREAM and not isinstance(ret, SVal):
            ret = SVal(self.render(st, e))
        elif declared == EVENT and not isinstance(ret, EVal):
            ret = EVal(self.render(st, e))
        elif (declared_host(self.project, mod, fn) or self.returns_host(fn, mod)) and isinstance(ret, TVal):
            ret = None
        kept = ({tv.sid for tv in self.tensors(st, ret)} if isinstance(ret, (TVal, TupVal)) else set()) \
            | set(self.list_return[1])
        for sid, S in st.stores.items():
            if sid > first_id and S.kind == "local" and sid not in kept and not S.escaped \
                    and not self.referenced(st, sid):
                S.dead = True  # the helper's temporaries die when it returns (reported by the helper itself)
        for sid in range(args_from, first_id + 1):  # an argument no name holds dies when the call returns
            S = st.stores.get(sid)
            if S is not None and S.kind == "local" and sid not in kept and not S.escaped:
                self.free(st, sid, "call end", e)
        return ret

    def activation(self, st: State, use: ApiUse) -> tuple[cst.BaseExpression | None, bool] | None:
        """(call-site expression, value for which the wrapper really switches), or None if unconditional.
        A None expression means a constant: ``positive`` then says whether the switch happens."""
        if use.enabled is not None:  # a context factory with a null arm (model/ctxfactories.py)
            return use.enabled
        if not use.wrappers:
            return None
        site = self.cfile.call_site(use.node)
        found = self.project.call_target(self.cfile, site) if site is not None else None
        if found is None:
            return None
        wfn, wmod = found
        cond = switch_condition(self.project, wmod, wfn)
        if cond is None:
            return _self_switch_test(wfn) if on_self(use) else None
        param, positive = cond
        params = wfn.params[1:] if wfn.class_name and wfn.params[:1] == ("self",) else wfn.params
        bound = bind_arguments(params + wfn.kwonly, use.node, kwonly=wfn.kwonly)
        expr = bound.get(param)
        if expr is None:
            for p in (*wfn.node.params.params, *wfn.node.params.kwonly_params):
                if p.name.value == param and isinstance(p.default, cst.Name) and p.default.value in ("True", "False"):
                    return None, (p.default.value == "True") == positive
            return None
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return None, (expr.value == "True") == positive
        return expr, positive
