"""Stream contexts entered through a value, and streams that exist only under a condition.

**Context factories.** A ``with`` item may call a value that, when called, gives a stream context::

    self.side_ctx = functools.partial(torch.cuda.stream, self.side)   # or lambda: torch.cuda.stream(self.side)
    ...
    with self.side_ctx():

The value is a local (of the function or an enclosing one), or a field of the caller's object (any
assignment in its class). Each binding of it is one of: ``partial(API, *args)`` where API is a stream
context (``torch.cuda.stream`` / ``torch.npu.stream``, or a project wrapper that opens one); a lambda whose
body is such a call; a project function or method (a wrapper: the call's arguments are its arguments); a
call of a project function every return of which is one of these forms (the factory made by a helper in
another module); or a null context (``contextlib.nullcontext`` / ``nullcontext()`` / a lambda returning
one). Either every binding opens the same stream context, or the null arm is chosen by a condition the
caller can test (a conditional expression ``partial(...) if C else nullcontext``, or ``if C:`` / ``else:``
in one method): the use then carries that test (:attr:`ApiUse.enabled`), and the interpreter branches the
``with`` on it like the ``enabled=`` parameter of a wrapper. A factory whose condition cannot be put in the
caller's terms is not a stream switch (precision first).

**Streams that may be None** (:func:`stream_condition`). ``torch.cuda.stream(None)`` switches nothing. A
field assigned ``torch.cuda.Stream() if C else None`` (or under ``if C:`` with ``None`` in the ``else``, or
``None`` first and the stream under ``if C:``) is a stream exactly when C holds: the scope on it is
entered only where C is true, so a fork and join guarded by C (or by a field assigned C: ``self.has_cuda =
torch.cuda.is_available()``) cover every path on which the scope really switches (correlated guards,
issue 16).

Conditions are given to the caller only in terms it can test: ``self.*`` expressions, module-level
names and calls without arguments (``torch.cuda.is_available()``), or a constructor's local stored on the
object (``self.multi = multi``); a field assigned the same expression stands for it when the caller tests
that field.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import CallSite, ClassInfo, FunctionInfo
from streamlint.model.modvalues import module_value
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.syntax import guarded_assigns, is_none, local_nodes, strip_not
from streamlint.model.uses import ApiUse, bind_arguments

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

    Test = tuple[cst.BaseExpression, bool]  # (expression the caller can evaluate, outcome under which it holds)


_MAX_DEPTH = 4


@dataclasses.dataclass(frozen=True)
class _Arm:
    """One binding of a factory: the uses it opens (empty for a null context) and where it was bound."""

    uses: tuple[ApiUse, ...]
    fn: FunctionInfo | None
    file: FileModel
    enabled: Test | None = None  # the condition (in the binding's terms) under which this arm is chosen


def factory_uses(project: Project, file: FileModel, site: CallSite) -> tuple[ApiUse, ...]:
    """The stream context a call of a factory value opens (empty: not one, or not decidable)."""
    func = site.node.func
    fn = site.function
    if not isinstance(func, (cst.Name, cst.Attribute)) or fn is None:
        return ()
    try:
        return _factory_uses(project, file, site)  # (memoised with every API use: Project.api_uses)
    except RecursionError:  # a pathological binding chain: not a stream switch
        return ()


def _factory_uses(project: Project, file: FileModel, site: CallSite) -> tuple[ApiUse, ...]:
    func, fn = site.node.func, site.function
    bindings = _bindings(file, fn, func)
    if not bindings:
        return ()
    field = isinstance(func, cst.Attribute)
    real: list[tuple[_Arm, _Binding]] = []
    null: list[tuple[_Arm, _Binding]] = []
    for binding in bindings:
        found = _arms(project, file, binding.fn, binding.value, site, 0)
        if found is None:
            return ()
        for arm in found:
            (real if arm.uses else null).append((arm, binding))
    if not real:
        return ()
    specs = {u.spec.qualname for a, _ in real for u in a.uses}
    streams = {_text(a.file, u.arg("stream")) for a, _ in real for u in a.uses}
    if len(specs) != 1 or len(streams) != 1:
        return ()  # arms opening different contexts: not one stream switch
    base = real[0][0]
    translated = [_translate_use(file, fn, real[0][1].fn, u, field) for u in base.uses]
    if any(t is None for t in translated):
        return ()
    uses = tuple(t for t in translated if t is not None)
    if not null:
        return uses
    # a null arm: the switch happens under the real arm's condition, which the caller must be able to test
    test = _choice(file, real, null)
    test = _caller_test(file, fn, real[0][1].fn, test, field) if test is not None else None
    if test is None:
        return ()
    return tuple(dataclasses.replace(u, enabled=test) for u in uses)


@dataclasses.dataclass(frozen=True)
class _Binding:
    """One assignment of a value: the expression, the function holding it, the ``if`` tests around it."""

    value: cst.BaseExpression
    fn: FunctionInfo | None
    guards: tuple[Test, ...]
    node: cst.CSTNode | None  # the assignment (a field's), whose line orders a default before its override

    def line(self, file: FileModel) -> int:
        """The assignment's first line, asked only when two bindings are ordered (a position costs the code
        generation of the statement's whole top-level class)."""
        return file.span(self.node).start_line if self.node is not None else 0


def _choice(file: FileModel, real: list, null: list) -> Test | None:
    """The one test that picks the real arms over the null ones: the test of a single unguarded conditional
    expression, or the ``if`` test every real assignment of one function sits directly under, the null ones
    being its ``else`` (or an unguarded default written before)."""
    bindings = {id(b): b for _, b in real + null}
    if len(bindings) == 1:
        (binding,) = bindings.values()
        tests = {(_text(file, a.enabled[0]), a.enabled[1]) if a.enabled else None for a, _ in real}
        others = {(_text(file, a.enabled[0]), a.enabled[1]) if a.enabled else None for a, _ in null}
        if binding.guards or len(tests) != 1 or None in tests or None in others:
            return None
        (text, positive), = tests
        if any(t != text or p == positive for t, p in others):
            return None
        return real[0][0].enabled
    if any(a.enabled is not None for a, _ in real + null):
        return None
    return _statement_choice(file, [b for _, b in real], [b for _, b in null])


def _statement_choice(file: FileModel, real: list[_Binding], null: list[_Binding]) -> Test | None:
    if len({id(b.fn) for b in real + null}) != 1:
        return None
    texts = {tuple((file.code(t), p) for t, p in b.guards) for b in real}
    if len(texts) != 1:
        return None
    (guards,) = texts
    if not guards:
        return None
    outer, (text, positive) = guards[:-1], guards[-1]  # (outer tests: both arms sit under them, e.g. a `raise`)
    first = min(b.line(file) for b in real)
    for b in null:
        mine = tuple((file.code(t), p) for t, p in b.guards)
        if mine == outer and b.line(file) < first:
            continue  # a default the guarded assignment overrides
        if mine == (*outer, (text, not positive)):
            continue  # the `else` arm
        return None
    return real[0].guards[-1]


def _text(file: FileModel, expr: cst.BaseExpression | None) -> str | None:
    return file.code(expr) if expr is not None else None


def _bindings(file: FileModel, fn: FunctionInfo, func: cst.BaseExpression) -> list[_Binding]:
    """Every binding of the called value: a local of ``fn`` or of an enclosing function (a single one), or a
    field of the caller's object (every assignment in the methods of its class)."""
    if isinstance(func, cst.Name):
        owner = fn
        while owner is not None and func.value not in owner.name_assigns:
            if func.value in owner.all_params or func.value in owner.locals:
                return []  # a parameter, or a name bound by something other than an assignment
            owner = owner.parent
        if owner is None or func.value in owner.all_params:
            return []
        values = owner.name_assigns.get(func.value, [])
        if len(values) == 1:
            return [_Binding(values[0], owner, (), None)]
        found = [_Binding(value, owner, guards, node) for value, guards, node in guarded_assigns(owner.node, func.value)]
        return found if len(found) == len(values) else []  # (a binding not found by the walk: not decidable)
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = file.classes.get(fn.class_name or "")
        if cls is None or func.attr.value in cls.methods:
            return []
        return _field_bindings(file, cls.name, f"self.{func.attr.value}")
    return []


def _field_bindings(file: FileModel, class_name: str, key: str) -> list[_Binding]:
    """Every ``self.<field> = value`` of the class's methods, for ``key`` (indexed once per file model)."""
    index = file.__dict__.get("_ctx_field_bindings")
    if index is None:
        index = file.__dict__["_ctx_field_bindings"] = {}
        for method in file.functions.values():
            if method.class_name is None or method.params[:1] != ("self",):
                continue
            for a in method.assigns:
                if a.value is not None and a.target.startswith("self.") and a.target.count(".") == 1:
                    guards = tuple((g.test, not g.negated) for g in a.guards)
                    index.setdefault((method.class_name, a.target), []).append(
                        _Binding(a.value, method, guards, a.node))
    return index.get((class_name, key), [])


def _class_functions(file: FileModel, class_name: str) -> list[FunctionInfo]:
    return [f for f in file.functions.values() if f.class_name == class_name and f.params[:1] == ("self",)]


def _arms(project: Project, file: FileModel, fn: FunctionInfo | None, value: cst.BaseExpression,
          site: CallSite, depth: int, params: dict[str, cst.BaseExpression] | None = None) -> list[_Arm] | None:
    """The arms a factory value may be (None: a value that is not a factory, or not known)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, cst.IfExp):
        body = _arms(project, file, fn, value.body, site, depth + 1, params)
        orelse = _arms(project, file, fn, value.orelse, site, depth + 1, params)
        if body is None or orelse is None:
            return None
        test = value.test
        return [dataclasses.replace(a, enabled=(test, True)) if a.enabled is None else a for a in body] + \
            [dataclasses.replace(a, enabled=(test, False)) if a.enabled is None else a for a in orelse]
    if _null_factory(file, fn, value):
        return [_Arm((), fn, file)]
    if isinstance(value, cst.Lambda):
        if value.params.params or value.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) \
                or value.params.kwonly_params or value.params.star_kwarg is not None:
            return None  # a lambda taking arguments: what the caller passes is not followed
        body = value.body
        if isinstance(body, cst.Call) and _null_call(file, fn, body):
            return [_Arm((), fn, file)]
        if not isinstance(body, cst.Call):
            return None
        inner = file.call_site(body)
        if inner is None or params:
            return None
        uses = tuple(dataclasses.replace(u, site=site, file=file) for u in project.api_uses(file, inner)
                     if u.role is Role.NATIVE_STREAM_CONTEXT)
        return [_Arm(uses, fn, file)] if uses else None
    if isinstance(value, cst.Call) and file.resolve(value.func, fn) == "functools.partial" and value.args \
            and not value.args[0].star and value.args[0].keyword is None:
        return _partial_arm(project, file, fn, value, site, params)
    if isinstance(value, cst.Call) and depth < _MAX_DEPTH and not params:
        return _maker_arms(project, file, fn, value, site, depth)
    if isinstance(value, (cst.Name, cst.Attribute)) and not params:
        # the API itself (`enter = torch.cuda.stream`), or a project function or method passed as the factory:
        # the call's arguments are its arguments
        qualname = file.resolve(value, fn)
        spec = apis.lookup(qualname)
        if spec is not None:
            if spec.role is not Role.NATIVE_STREAM_CONTEXT:
                return None
            return [_Arm((ApiUse(spec, site, file, bind_arguments(spec.params, site.node)),), fn, file)]
        target = project.function(qualname, file) if qualname else None
        if target is None or not _own_function(fn, value, target[0]):
            return None
        uses = tuple(u for u in project.wrapper_uses(file, dataclasses.replace(site, target=qualname))
                     if u.role is Role.NATIVE_STREAM_CONTEXT)
        return [_Arm(uses, fn, file)] if uses else None
    return None


def _own_function(fn: FunctionInfo | None, ref: cst.BaseExpression, target: FunctionInfo) -> bool:
    """A function the reference names for the caller too: a module-level function, or a method of the caller's
    own object (``self.<method>``: the method's ``self.*`` are the caller's). Another object's bound method
    (``holder.on_side``) is not followed: its fields are not the caller's."""
    if target.class_name is None:
        return True
    return isinstance(ref, cst.Attribute) and isinstance(ref.value, cst.Name) and ref.value.value == "self" \
        and fn is not None and fn.class_name == target.class_name and target.parent is None


def _partial_arm(project: Project, file: FileModel, fn: FunctionInfo | None, value: cst.Call, site: CallSite,
                 params: dict[str, cst.BaseExpression] | None) -> list[_Arm] | None:
    """``partial(API, *bound)``: the API called with the bound arguments, then the call's own."""
    target = value.args[0].value
    if _null_factory(file, fn, target):
        return [_Arm((), fn, file)]
    bound = [a for a in value.args[1:]]
    if any(a.star for a in bound):
        return None
    if params:  # inside a maker: its parameters stand for the maker call's arguments
        bound = [a.with_changes(value=params.get(a.value.value, a.value)) if isinstance(a.value, cst.Name) else a
                 for a in bound]
    own = list(site.node.args)
    if any(a.star for a in own):
        return None
    # a partial's keywords stay keywords: positional arguments first, as Python binds them (a call node with a
    # positional argument after a keyword is not valid, and LibCST refuses to build it)
    args = [a for a in [*bound, *own] if a.keyword is None] + [a for a in [*bound, *own] if a.keyword is not None]
    call = cst.Call(func=target, args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])
    qualname = file.resolve(target, fn) or _through_module(project, file, fn, target)
    spec = apis.lookup(qualname)
    if spec is not None:
        if spec.role is not Role.NATIVE_STREAM_CONTEXT:
            return None
        return [_Arm((ApiUse(spec, site, file, bind_arguments(spec.params, call)),), fn, file)]
    found = project.function(qualname, file) if qualname else None
    if found is None or not _own_function(fn, target, found[0]):
        return None
    synthetic = dataclasses.replace(site, node=call, target=qualname)
    uses = tuple(dataclasses.replace(u, site=site) for u in project.wrapper_uses(file, synthetic)
                 if u.role is Role.NATIVE_STREAM_CONTEXT)
    return [_Arm(uses, fn, file)] if uses else None


def _through_module(project: Project, file: FileModel, fn: FunctionInfo | None,
                    target: cst.BaseExpression) -> str | None:
    """``device_mod.stream`` where the local ``device_mod`` holds ``torch.cuda`` (modvalues.py): ``torch.cuda.stream``."""
    if not isinstance(target, cst.Attribute):
        return None
    module = module_value(project, file, fn, target.value)
    return f"{module}.{target.attr.value}" if module is not None else None


def _maker_arms(project: Project, file: FileModel, fn: FunctionInfo | None, value: cst.Call, site: CallSite,
                depth: int) -> list[_Arm] | None:
    """``make_ctx(self.side)``: a project function every return of which is a factory form; its parameters
    stand for the arguments of this call (a null arm chosen by ``stream is None`` switches nothing either
    way, so that test is dropped: ``torch.cuda.stream(None)`` is a no-op)."""
    qualname = file.resolve(value.func, fn)
    found = project.function(qualname, file) if qualname else None
    if found is None:
        return None
    maker, mod = found
    if maker.class_name is not None or any(a.star for a in value.args) or not maker.returns:
        return None
    args = bind_arguments(maker.params + maker.kwonly, value, kwonly=maker.kwonly)
    if any(p in maker.name_assigns for p in args):
        return None
    out: list[_Arm] = []
    for ret in maker.returns:
        if ret.value is None:
            return None
        choice = ret.value
        if isinstance(choice, cst.IfExp) and _none_test_on(choice.test, args):
            arms = [a for arm in (choice.body, choice.orelse)
                    for a in (_arms(project, mod, maker, arm, site, depth + 1, args) or [None])]
        else:
            arms = _arms(project, mod, maker, choice, site, depth + 1, args) or [None]
        if any(a is None for a in arms) or any(a.enabled is not None for a in arms):
            return None
        out.extend(a for a in arms if a.uses)  # (a null arm under `stream is None` switches nothing anyway)
    return [_Arm(tuple(dataclasses.replace(u, file=file) for a in out for u in a.uses), fn, file)] if out else None


def _none_test_on(test: cst.BaseExpression, args: dict[str, cst.BaseExpression | None]) -> bool:
    """``p is None`` / ``p is not None`` on a maker parameter."""
    return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
        and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)) and is_none(test.comparisons[0].comparator) \
        and isinstance(test.left, cst.Name) and test.left.value in args


def _null_factory(file: FileModel, fn: FunctionInfo | None, value: cst.BaseExpression) -> bool:
    """``contextlib.nullcontext`` (the class itself, called later); ``contextlib.suppress`` too (with or without
    exception types, it switches no stream: the ``else`` arm of a device-optional loader)."""
    if not isinstance(value, (cst.Name, cst.Attribute)):
        return False
    if file.resolve(value, fn) == "contextlib.suppress":
        return True
    spec = apis.lookup(file.resolve(value, fn))
    return spec is not None and spec.role is Role.NULL_CONTEXT


def _null_call(file: FileModel, fn: FunctionInfo | None, call: cst.Call) -> bool:
    return _null_factory(file, fn, call.func)


def guarded_method_uses(project: Project, file: FileModel, site: CallSite,
                        uses: tuple[ApiUse, ...]) -> tuple[ApiUse, ...]:
    """``with self._on_side():`` where the object's own method (no argument but ``self``) returns ``ctx if C else
    nullcontext()`` at every return: the stream context the wrapper opens is entered only where C holds, C
    evaluated at the call (``self.side``: correlated with a fork ``if self.side:`` before it). The uses carry C
    (:attr:`ApiUse.enabled`) when the caller can test it; otherwise they are returned as they are. A project
    subclass overriding the method (``AlwaysOverlap._on_side`` returning the stream context unconditionally) may
    be what ``self`` is: then (or when the subclasses cannot be searched) the uses stay as they are."""
    func, fn = site.node.func, site.function
    if not uses or any(u.enabled is not None for u in uses) or site.node.args or fn is None \
            or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return uses
    cls = file.classes.get(fn.class_name or "")
    method = cls.methods.get(func.attr.value) if cls is not None else None
    if method is None or method.params != ("self",) or method.kwonly or not method.returns \
            or _overridden(project, file, cls, func.attr.value):
        return uses
    tests = set()
    for ret in method.returns:
        v = ret.value
        if not isinstance(v, cst.IfExp) or not isinstance(v.body, cst.Call) or not isinstance(v.orelse, cst.Call):
            return uses
        null_body, null_else = _null_call(file, method, v.body), _null_call(file, method, v.orelse)
        if null_body == null_else:
            return uses
        tests.add((file.code(v.test), null_else))
        chosen = (v.test, null_else)
    if len(tests) != 1:
        return uses
    test = _caller_test(file, fn, method, chosen, True)
    return tuple(dataclasses.replace(u, enabled=test) for u in uses) if test is not None else uses


def _overridden(project: Project, file: FileModel, base: ClassInfo, method: str, depth: int = 0) -> bool:
    """Does a project class deriving (transitively) from ``base`` define ``method``? True when unsure."""
    paths = project.paths_containing((base.name.encode(),))
    if depth > 4 or len(paths) > MAX_CALLER_FILES:
        return True
    for path in paths:
        model = project.file(path)
        for cls in (model.classes.values() if model is not None else ()):
            if cls is base or not any(b and (project.symbol(b, model) or (None,))[0] is base for b in cls.bases):
                continue
            if method in cls.methods or _overridden(project, model, cls, method, depth + 1):
                return True
    return False


def _translate_use(file: FileModel, caller: FunctionInfo, owner: FunctionInfo | None, use: ApiUse,
                   field: bool) -> ApiUse | None:
    """The use with its stream argument in the caller's terms (None: it names something the caller cannot)."""
    expr = use.bind.get("stream")
    if expr is None:
        return use if use.wrappers else None
    if owner is None or not field and _binds_in(caller, owner):
        return use  # a local factory of the caller (or of an enclosing function): the same names
    if expr in _args_of(use.site.node):
        return use  # passed by the caller itself (`with self.enter(self.side):`)
    moved = _in_caller_terms(owner, expr)
    if moved is None:
        return None
    bind = dict(use.bind)
    bind["stream"] = moved
    return dataclasses.replace(use, bind=bind)


def _args_of(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args]


def _binds_in(caller: FunctionInfo, owner: FunctionInfo) -> bool:
    fn: FunctionInfo | None = caller
    while fn is not None:
        if fn is owner:
            return True
        fn = fn.parent
    return False


def _in_caller_terms(owner: FunctionInfo, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """An expression of method ``owner`` as another method of the same object can write it: ``self.*`` as is,
    a module-level name as is, a local the method also stores on the object (``self.s = s``) as that field."""
    text = dotted(expr)
    if text is None:
        return None
    head = text.split(".", 1)[0]
    if head == "self":
        return expr
    if head in owner.all_params or head in owner.locals or head in owner.name_assigns:
        if "." in text:
            return None
        return _stored_as(owner, head)
    return expr


def _stored_as(owner: FunctionInfo, name: str) -> cst.BaseExpression | None:
    """The ``self.<field>`` target an unguarded ``self.<field> = name`` of ``owner`` stores ``name`` in."""
    for a in owner.assigns:
        if a.target.startswith("self.") and a.target.count(".") == 1 and not a.guards \
                and isinstance(a.value, cst.Name) and a.value.value == name:
            target = _target_node(a.node, a.target)
            if target is not None:
                return target
    return None


def _target_node(node: cst.CSTNode, target: str) -> cst.BaseExpression | None:
    targets = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        targets = [node.target]
    elif isinstance(node, cst.BaseExpression):
        targets = [node]
    for t in targets:
        if dotted(t) == target:
            return t
    return None


def _caller_test(file: FileModel, caller: FunctionInfo, owner: FunctionInfo | None, test: Test,
                 field: bool) -> Test | None:
    """The binding's condition as the caller can test it (None: it cannot). A local binding of the caller (or of
    a function enclosing it) is tested as written; a field's, written in another method (or in the enclosing
    constructor, whose locals are gone when the caller runs later), through ``self.*`` or module-level names,
    a constructor's local by the field it is stored in, a module-level expression by the field assigned it
    when the caller tests that field."""
    expr, inner = strip_not(test[0])
    positive = test[1] if inner else not test[1]
    if owner is None or not field and _binds_in(caller, owner):
        return expr, positive
    if isinstance(expr, cst.Name) and (expr.value in owner.all_params or expr.value in owner.name_assigns):
        stored = _stored_as(owner, expr.value)
        return (stored, positive) if stored is not None and _set_once(file, caller, stored) else None
    if not _caller_writable(owner, expr) or not _set_once(file, caller, expr):
        return None
    alias = _field_alias(file, caller, expr)
    return (alias if alias is not None else expr), positive


def _set_once(file: FileModel, caller: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """Is a ``self.<field>`` test assigned at most once in its class? (A flag another method sets again
    (``set_overlap(on)``) no longer says what the factory built from it switches.) Other tests: True."""
    text = dotted(expr)
    if text is None or not text.startswith("self.") or text.count(".") != 1 or not caller.class_name:
        return True
    return sum(a.target == text for f in _class_functions(file, caller.class_name) for a in f.assigns) <= 1


def _caller_writable(owner: FunctionInfo, expr: cst.BaseExpression) -> bool:
    """Every name of ``expr`` is ``self`` or a name not bound in ``owner`` (a module-level name)."""
    for node in local_nodes(expr):
        if isinstance(node, cst.Name) and node.value != "self" and (
                node.value in owner.all_params or node.value in owner.locals or node.value in owner.name_assigns):
            if not _is_attr_name(expr, node):
                return False
    if isinstance(expr, cst.Name):
        return expr.value not in owner.all_params and expr.value not in owner.locals
    return True


def _is_attr_name(root: cst.CSTNode, name: cst.Name) -> bool:
    """Is ``name`` the attribute part of an ``a.name`` in ``root`` (not a variable)?"""
    for node in local_nodes(root):
        if isinstance(node, cst.Attribute) and node.attr is name:
            return True
    return False


def _field_alias(file: FileModel, caller: FunctionInfo, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``self.<field>`` when the class assigns that field only ``expr`` (by its text) and the caller (or an
    enclosing function) tests it: ``self.has_cuda = torch.cuda.is_available()``."""
    if not caller.class_name:
        return None
    text = file.code(expr)
    if text.startswith("self."):
        return None
    by_field: dict[str, list] = {}
    for method in _class_functions(file, caller.class_name):
        for a in method.assigns:
            if a.target.startswith("self.") and a.target.count(".") == 1:
                by_field.setdefault(a.target, []).append(a)
    mentioned = _tested_texts(caller)
    for target, assigns in by_field.items():
        if target in mentioned and all(a.value is not None and file.code(a.value) == text and not a.guards
                                       for a in assigns):
            node = _target_node(assigns[0].node, target)
            if node is not None:
                return node
    return None


def _tested_texts(fn: FunctionInfo) -> set[str]:
    """The texts of the ``if`` / conditional tests of ``fn`` and of the functions enclosing it (and their
    ``not`` / ``and`` / ``or`` operands)."""
    out: set[str] = set()
    f: FunctionInfo | None = fn
    while f is not None:
        for node in local_nodes(f.node.body):
            test = node.test if isinstance(node, (cst.If, cst.IfExp, cst.While)) else None
            stack = [test] if test is not None else []
            while stack:
                t = stack.pop()
                out.add(dotted(t) or "")
                if isinstance(t, cst.UnaryOperation):
                    stack.append(t.expression)
                elif isinstance(t, cst.BooleanOperation):
                    stack.extend((t.left, t.right))
        f = f.parent
    out.discard("")
    return out


def stream_condition(project: Project, file: FileModel, fn: FunctionInfo | None,
                     expr: cst.BaseExpression | None) -> Test | None:
    """The condition under which the stream ``expr`` (a field ``self.s``, or a local) is not None, in the terms
    of ``fn``; None when it always is a stream, or when the condition is not known."""
    if fn is None or expr is None:
        return None
    memo = project.derived("stream_conditions")
    key = (id(fn), file.code(expr))
    found = memo.get(key)
    if found is None or found[0] is not fn:  # (the function kept with its answer: an id is never reused here)
        found = memo[key] = (fn, _stream_condition(file, fn, expr))
    return found[1]


def _stream_condition(file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression) -> Test | None:
    text = dotted(expr)
    field = text is not None and text.startswith("self.") and text.count(".") == 1
    if field and fn.class_name in file.classes:
        bindings = _field_bindings(file, fn.class_name, text)
    elif isinstance(expr, cst.Name):
        bindings = _bindings(file, fn, expr)
    else:
        return None
    if not bindings:
        return None
    nulls = [b for b in bindings if is_none(b.value)]
    real = [b for b in bindings if not is_none(b.value)]
    if not nulls and len(real) == 1 and isinstance(real[0].value, cst.IfExp) and not real[0].guards:
        choice = real[0].value
        if is_none(choice.orelse) and not is_none(choice.body):
            test: Test | None = (choice.test, True)
        elif is_none(choice.body) and not is_none(choice.orelse):
            test = (choice.test, False)
        else:
            return None
    elif nulls and real and not any(isinstance(b.value, cst.IfExp) for b in real):
        test = _statement_choice(file, real, nulls)
    else:
        return None
    return _caller_test(file, fn, real[0].fn, test, field) if test is not None else None


def uncorrelated_optional(project: Project, file: FileModel, fn: FunctionInfo | None, key: str) -> bool:
    """Is stream ``key`` (``self.s``, or a local) possibly None where ``fn`` uses it, with no condition known to
    tie that to a test (:func:`stream_condition`), while ``fn`` guards an ordering on it (``if flag:
    s.wait_stream(cur)``)? Then a race on the path that skipped the guarded ordering assumes the stream exists
    there: a finding is medium at most (``torch.cuda.stream(None)`` switches nothing)."""
    if fn is None or not key.replace(".", "").replace("_", "").isalnum():
        return False
    field = key.startswith("self.") and key.count(".") == 1
    if field and fn.class_name in file.classes:
        bindings = _field_bindings(file, fn.class_name, key)
    elif "." not in key:
        bindings = _bindings(file, fn, cst.Name(key))
    else:
        return False
    if not any(is_none(b.value) or isinstance(b.value, cst.IfExp) and (is_none(b.value.body) or is_none(b.value.orelse))
               for b in bindings):
        return False
    expr = cst.Attribute(cst.Name("self"), cst.Name(key[5:])) if field else cst.Name(key)
    if stream_condition(project, file, fn, expr) is not None:
        return False  # correlated: the interpreter branches the scope on that condition
    # the tests around the scopes on the stream: an ordering under those same tests runs whenever the scope does
    scoped = [{(file.code(g.test), g.negated) for g in s.guards} for s in fn.scopes
              if any(dotted(a.value) == key for c in s.calls for a in c.args)]
    f: FunctionInfo | None = fn
    while f is not None:
        for site in f.calls:
            if site.guards and site.method in ("wait_stream", "wait_event", "record_event") \
                    and isinstance(site.node.func, cst.Attribute) and (
                        dotted(site.node.func.value) == key
                        or site.method == "wait_stream" and any(dotted(a.value) == key for a in site.node.args)):
                mine = {(file.code(g.test), g.negated) for g in site.guards}
                if not scoped or any(not mine <= around for around in scoped):
                    return True
        f = f.parent
    return False


__all__ = ["factory_uses", "guarded_method_uses", "stream_condition", "uncorrelated_optional"]
