"""Wrapper inference: a project function that forwards to a stream API, recognised by its definition.

Covers the families of domain.md §1.16: an ``enabled=`` flag choosing the real scope or
``nullcontext()``, the same over native streams, a leading switch flag returning a fake context manager,
and mode-dispatching wrappers keyed on a mode argument. Never by name: the same name may wrap
``torchair.scope.npu_stream_switch`` in one project and ``torch.npu.stream`` in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import ApiSpec, Role
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.filefacts import FunctionInfo, Guard
from streamlint.model.syntax import contains
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries

# Roles a wrapper can forward to. Calls such as print() inside a helper do not make it a wrapper.
_FORWARDABLE = frozenset(Role) - {
    Role.GRAPH_BREAK, Role.IS_COMPILING, Role.COMPILER_DISABLE, Role.CONTEXT_MANAGER_DECORATOR,
    Role.REORDERABLE_LOGGING, Role.NULL_CONTEXT, Role.TORCH_COMPILE, Role.CACHE_COMPILE,
    Role.GET_NPU_BACKEND, Role.COMPILER_CONFIG,
}
_SCOPE_ROLES = apis.NO_BREAK_SCOPE_ROLES | apis.STREAM_SCOPE_ROLES | {Role.GRAPH_CAPTURE}
MAX_WRAPPER_STATEMENTS = 14


@dataclass(frozen=True)
class ParamSource:
    """Where an API argument comes from inside the wrapper: one of its parameters, or a constant."""

    param: str | None
    constant: cst.BaseExpression | None = None
    receiver: cst.BaseExpression | None = None  # an attribute of the wrapper's own object (``self._stream``)
    # the stream current where the wrapper is called (``torch.cuda.stream(torch.cuda.current_stream(dev))``
    # inside it, outside any stream scope of its own): a scope on it switches nothing
    current: bool = False


@dataclass(frozen=True)
class Variant:
    spec: ApiSpec
    param_map: dict[str, ParamSource]
    modes: frozenset[str] | None  # None: every execution path
    mode_param: str | None  # the wrapper parameter the mode test reads
    via: tuple[str, ...]  # inner wrappers traversed
    # the wrapper's own call that forwards (None: declared in the settings); its other stream calls are the
    # wrapper's own code, checked where it stands
    call: "cst.Call | None" = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class WrapperSpec:
    qualname: str
    variants: tuple[Variant, ...]
    enable_params: tuple[str, ...]


def infer_wrapper(project: "ProjectQueries", fn: FunctionInfo, file: FileModel, *, declared_switch: bool = False,
                  declared_wait: bool = False) -> WrapperSpec | None:
    qualname = f"{file.module_name}.{fn.qualname}"
    params = fn.all_params
    receiver = _receiver(fn)
    if declared_switch or declared_wait:
        spec = apis.SPECS["torchair.scope.npu_stream_switch" if declared_switch else "torchair.scope.npu_wait_tensor"]
        own = [p for p in params if p != receiver]
        mapping = {api_p: ParamSource(own[i]) for i, api_p in enumerate(spec.params) if i < len(own)}
        return WrapperSpec(qualname, (Variant(spec, mapping, None, None, ()),), ())
    if fn.statement_count > MAX_WRAPPER_STATEMENTS or fn.has_loop:
        return None
    if fn.class_name is not None and fn.node.name.value in ("forward", "__call__", "__init__"):
        return None  # a module's forward / constructor is the model itself, never a forwarding helper
    returned = [r.value for r in fn.returns if r.value is not None]
    yielding_withs = {id(s.item) for s in fn.scopes if fn.yields and _contains_yield(s.with_node)}
    last_yield = _last_yield(file, fn)
    variants: list[Variant] = []
    enable: set[str] = set()
    for site in fn.calls:
        uses = project.api_uses(file, site)
        if not uses:
            continue
        forwarded = any(contains(r, site.node) for r in returned) or any(
            id(s.item) in yielding_withs and site.node in s.calls for s in fn.scopes
        )
        for use in uses:
            if use.role not in _FORWARDABLE:
                continue
            switch = None
            if use.role is Role.SET_STREAM and last_yield is not None:
                # a context manager that makes its argument the current stream before it yields (and puts the
                # old one back after): a stream scope on that argument, like `with torch.cuda.stream(s): yield`
                if file.span(site.node).start_line > last_yield:
                    continue  # the restore after the yield
                switch = _scope_spec(use.spec)
                if switch is None:
                    continue
            at_current = () if _sets_stream(project, file, fn) else use.at_current
            mapping = {p: ParamSource(None, current=True) for p in at_current}
            for api_param, expr in use.bind.items():
                if expr is None:
                    continue
                base = _base_name(expr)
                if use.role is Role.NATIVE_STREAM_CONTEXT and api_param == "stream" \
                        and _current_here(project, file, fn, expr, params):
                    mapping[api_param] = ParamSource(None, current=True)
                elif base is not None and base in params and base != receiver and base in fn.name_assigns:
                    mapping[api_param] = ParamSource(None, None)  # rebound inside: not the caller's value
                elif base is not None and base in params and base != receiver:
                    mapping[api_param] = ParamSource(base)
                elif _is_constant(expr):
                    mapping[api_param] = ParamSource(None, expr)
                elif base is not None and base == receiver and isinstance(expr, cst.Attribute):
                    mapping[api_param] = ParamSource(None, None, expr)
                elif (viewed := _viewed_param(project, file, fn, expr, receiver)) is not None:
                    mapping[api_param] = ParamSource(viewed)  # `torch.cuda.stream(as_torch_stream(stream))`: the
                    # caller's stream under another form (model/streamviews.py)
                elif base is not None and fn.parent is not None and base not in fn.name_assigns \
                        and (base in fn.parent.all_params or base in fn.parent.name_assigns):
                    mapping[api_param] = ParamSource(None, expr)  # (life's shim) a closure over the enclosing
                    # function's names (``self.side``): what it names where the enclosing function calls it
                else:
                    mapping[api_param] = ParamSource(None, None)
            if not forwarded and switch is None:
                if use.role in _SCOPE_ROLES or fn.statement_count > 8:
                    continue
                # statement-form wrappers: every argument must come from the wrapper's parameters
                if not mapping or any(src.param is None and src.constant is None for src in mapping.values()):
                    continue
            modes, mode_param = _modes_from_guards(site.guards, params)
            if use.modes is not None:
                modes = use.modes if modes is None else modes & use.modes
            for guard in site.guards:
                name = _flag_name(guard.test)
                if name in params and name != mode_param:
                    enable.add(name)
            variants.append(Variant(switch or use.spec, mapping, modes, mode_param, use.wrappers, site.node))
    if not variants:
        return None
    return WrapperSpec(qualname, tuple(variants), tuple(sorted(enable)))


def local_def(file: FileModel, fn: FunctionInfo | None,
              func: cst.BaseExpression) -> tuple[FunctionInfo, FileModel] | None:
    """The function a call of a bare name defined with ``def`` inside an enclosing function denotes
    (``@contextmanager def _on(s): ...`` then ``with _on(side):``), when the name is bound by nothing else."""
    if not isinstance(func, cst.Name):
        return None
    while fn is not None:
        if func.value in fn.locals or func.value in fn.all_params:
            found = file.functions.get(f"{fn.qualname}.<locals>.{func.value}")
            return (found, file) if found is not None and func.value not in fn.name_assigns \
                and func.value not in fn.all_params else None
        fn = fn.parent
    return None


def _last_yield(file: FileModel, fn: FunctionInfo) -> int | None:
    """The line of the last ``yield`` of a ``@contextmanager`` generator (None: not one): a ``set_stream``
    before it makes the body's stream current (an early ``if s is None: yield; return`` included), one
    after it (``finally: set_stream(prev)``) puts the caller's back."""
    if not fn.yields or not any(d.rsplit(".", 1)[-1] == "contextmanager" for d in fn.decorators):
        return None
    return max(file.span(y).start_line for y in fn.yields)


def _scope_spec(spec: ApiSpec) -> ApiSpec | None:
    """The stream context of the API family of a ``set_stream`` (``torch.cuda.set_stream`` ->
    ``torch.cuda.stream``)."""
    head, _, last = spec.qualname.rpartition(".")
    scope = apis.SPECS.get(f"{head}.stream") if last == "set_stream" else None
    return scope if scope is not None and scope.role is Role.NATIVE_STREAM_CONTEXT else None


def _receiver(fn: FunctionInfo) -> str | None:
    """The bound receiver of a method (``self`` / ``cls``), never an ordinary parameter that happens to
    be called ``self`` — torchair's own ``npu_wait_tensor(self, dependency)`` is a module function."""
    if fn.class_name is None or "<locals>" in fn.qualname or not fn.params:
        return None
    if any(d.endswith("staticmethod") for d in fn.decorators):
        return None
    return fn.params[0]


def mode_of_test(test: cst.BaseExpression) -> tuple[str | None, frozenset[str], bool] | None:
    """For a mode comparison (``x == "ge_graph"``, ``x != "eager"``, ``x in ("a", "b")``):
    (compared name, the execution paths named, whether equality holds in the true branch)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        left, right = test.left, comp.comparator
        literal = string_value(right) if string_value(right) is not None else string_value(left)
        other = left if string_value(right) is not None else right
        op = comp.operator
        if literal is not None and literal in apis.MODE_LITERALS:
            if isinstance(op, (cst.Equal, cst.Is)):
                return dotted(other), frozenset({apis.MODE_LITERALS[literal]}), True
            if isinstance(op, (cst.NotEqual, cst.IsNot)):
                return dotted(other), frozenset({apis.MODE_LITERALS[literal]}), False
        if isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            values = [string_value(e.value) for e in right.elements]
            if values and all(v in apis.MODE_LITERALS for v in values):
                modes = frozenset(apis.MODE_LITERALS[v] for v in values if v is not None)
                return dotted(left), modes, isinstance(op, cst.In)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = mode_of_test(test.expression)
        if inner is not None:
            return inner[0], inner[1], not inner[2]
    return None


def modes_under(guards: tuple[Guard, ...]) -> frozenset[str] | None:
    """The execution paths a statement under these guards can run on (None: unrestricted)."""
    return _modes_from_guards(guards, None)[0]


def _modes_from_guards(guards, params) -> tuple[frozenset[str] | None, str | None]:
    modes: frozenset[str] | None = None
    mode_param = None
    for test, negated in (c for guard in guards for c in guard.conditions()):
        parsed = mode_of_test(test)
        if parsed is None:
            continue
        name, named, positive = parsed
        if negated:
            positive = not positive
        allowed = named if positive else frozenset(apis.EXECUTION_PATHS) - named
        modes = allowed if modes is None else modes & allowed
        if params is not None and name in params:
            mode_param = name
    return modes, mode_param


def _flag_name(test: cst.BaseExpression) -> str | None:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _flag_name(test.expression)
    return test.value if isinstance(test, cst.Name) else None


def _current_here(project: "ProjectQueries", file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression,
                  params: tuple[str, ...]) -> bool:
    """Is a scope's stream, inside a wrapper, the stream current where the wrapper is called: the current
    stream (of any device) taken in the wrapper outside its own stream scopes, directly or through a local
    assigned only from one (never a parameter: the caller's value, bound as such)."""
    from streamlint.model.streams import is_current_stream

    if isinstance(expr, cst.Name) and expr.value in params:
        return False
    if _sets_stream(project, file, fn):
        return False
    return is_current_stream(project, file, fn, expr)


def _viewed_param(project: "ProjectQueries", file: FileModel, fn: FunctionInfo, expr: cst.BaseExpression,
                  receiver: str | None) -> str | None:
    """The wrapper's parameter a scope's stream converts through a project stream view (``as_torch_stream(stream,
    device)``), when the wrapper never rebinds it, else None."""
    from streamlint.model.streamviews import viewed_argument

    if not isinstance(expr, cst.Call):
        return None
    arg = viewed_argument(project, file, fn, expr)  # type: ignore[arg-type]
    if not isinstance(arg, cst.Name) or arg.value not in fn.all_params or arg.value == receiver \
            or arg.value in fn.name_assigns:
        return None
    return arg.value


def _sets_stream(project: "ProjectQueries", file: FileModel, fn: FunctionInfo) -> bool:
    """The wrapper calls ``torch.cuda.set_stream(...)``: the stream current after it need not be its caller's."""
    return any(u.role is Role.SET_STREAM for site in fn.calls for u in project.api_uses(file, site))


def _base_name(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _is_constant(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString)) or (
        isinstance(expr, cst.Name) and expr.value in ("None", "True", "False")
    )


def _contains_yield(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Yield):
            return True
        if isinstance(n, (cst.FunctionDef, cst.Lambda)) and n is not node:
            continue
        stack.extend(children(n))
    return False

