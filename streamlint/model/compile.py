"""Compile sites and compiler configurations: which code is compiled, with which backend and mode.

A compile site is ``torch.compile(m, backend=...)`` (string backends ``"npu"`` / ``"npugraph_ex"``, or
``tng.get_npu_backend(compiler_config=cfg)``), a ``@torch.compile(...)`` decorator, or
``torchair.inference.cache_compile(fn, config=cfg)``. A :class:`ConfigObject` is a
``CompilerConfig()`` instance with its field assignments, followed through helper functions that build
and return it (``_build_compiler_config()``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.file import FileModel, dotted, string_value
from streamlint.model.filefacts import AttrAssign, CallSite, ClassInfo, FunctionInfo, Guard
from streamlint.model.wrappers import modes_under

from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries
    from streamlint.model.uses import ApiUse

# nn.Module methods that return the module itself: `Model(cfg).npu().eval()` compiles Model.
_MODULE_SELF_METHODS = frozenset({"npu", "cuda", "cpu", "to", "eval", "train", "half", "float", "bfloat16",
                                  "requires_grad_", "to_empty"})
DEFAULT_TORCHAIR_MODE = "ge"  # CompilerConfig.mode defaults to "max-autotune"


@dataclass(eq=False)
class ConfigObject:
    """A ``CompilerConfig()`` instance and every assignment to its fields."""

    file: FileModel
    function: FunctionInfo | None
    variable: str  # the local name (or dotted attribute) holding the config
    creation: CallSite
    assigns: list[AttrAssign] = field(default_factory=list)

    def field(self, name: str) -> list[AttrAssign]:
        """Assignments to ``<config>.<name>`` (e.g. ``"mode"``, ``"ge_config.enable_single_stream"``)."""
        target = f"{self.variable}.{name}"
        return [a for a in self.assigns if a.target == target]

    def default_mode_possible(self) -> bool:
        """Every ``mode`` assignment sits under a condition: on some runs the mode stays the default."""
        return all(a.guards for a in self.field("mode"))

    def modes(self) -> frozenset[str] | None:
        """The execution paths this config selects; None when a mode value cannot be resolved."""
        assigns = self.field("mode")
        if not assigns:
            return frozenset({DEFAULT_TORCHAIR_MODE})
        modes: set[str] = set()
        for a in assigns:
            values = _mode_values(a.value)
            if values is None:
                return None
            modes |= values
        return frozenset(modes)


@dataclass(eq=False)
class CompileSite:
    file: FileModel
    site: CallSite
    role: Role  # TORCH_COMPILE or CACHE_COMPILE
    backend: str  # "torchair" | "npu" | "npugraph_ex" | "other" | "unknown"
    config: ConfigObject | None
    modes: frozenset[str] | None  # None: unknown
    dynamic: bool | None  # None: not given / not a literal
    targets: list[tuple[FunctionInfo, FileModel]]
    # the compiled object is built at run time (a loader's result, a model attribute set from one), so
    # `targets` cannot be known: rules may fall back to the project's model code, less sure
    runtime_target: bool = False

    @property
    def node(self) -> cst.Call:
        return self.site.node


def _mode_values(value: cst.BaseExpression) -> set[str] | None:
    if isinstance(value, cst.IfExp):
        a, b = _mode_values(value.body), _mode_values(value.orelse)
        return None if a is None or b is None else a | b
    literal = string_value(value)
    if literal is not None and literal in apis.MODE_LITERALS:
        return {apis.MODE_LITERALS[literal]}
    return None


def _bool_literal(expr: cst.BaseExpression | None) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def find_config(project: "ProjectQueries", file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression | None,
                _depth: int = 0) -> ConfigObject | None:
    """Follow an expression to the CompilerConfig() instance it denotes."""
    if expr is None or _depth > 6:
        return None
    if isinstance(expr, cst.Call):
        spec = apis.lookup(file.resolve(expr.func, fn))
        if spec is not None and spec.role is Role.COMPILER_CONFIG:
            return None  # an anonymous config has no field assignments: default mode
        target = project.function(file.resolve(expr.func, fn), file)
        if target is not None:
            callee, mod = target
            for ret in callee.returns:
                found = find_config(project, mod, callee, ret.value, _depth + 1)
                if found is not None:
                    return found
        return None
    name = dotted(expr)
    if name is None:
        return None
    scopes: list[tuple[FunctionInfo | None, dict]] = []
    if fn is not None:
        scopes.append((fn, fn.name_assigns))
    for scope_fn, assigns in scopes:
        for value in reversed(assigns.get(name, [])):
            if isinstance(value, cst.Call):
                spec = apis.lookup(file.resolve(value.func, scope_fn))
                if spec is not None and spec.role is Role.COMPILER_CONFIG:
                    creation = next((c for c in file.calls if c.node is value), None)
                    if creation is None:
                        return None
                    owner = scope_fn
                    assigns_ = [a for a in file.assigns if a.function is owner and a.target.startswith(name + ".")]
                    return ConfigObject(file, owner, name, creation, assigns_)
            found = find_config(project, file, scope_fn, value, _depth + 1)
            if found is not None:
                return found
    if fn is not None and name in fn.all_params and name not in fn.name_assigns:
        # a config passed in (`def compile_model(model, compiler_config)`): the one its callers pass
        configs: dict[int, ConfigObject] = {}
        for caller_file, caller_fn, arg in caller_arguments(project, file, fn, name):
            found = find_config(project, caller_file, caller_fn, arg, _depth + 1)
            if found is None:
                return None
            configs[id(found.creation.node)] = found
        return next(iter(configs.values())) if len(configs) == 1 else None
    if name.startswith("self.") and fn is not None and fn.class_name in file.classes:
        cls = file.classes[fn.class_name]
        for method in cls.methods.values():
            for a in method.assigns:
                if a.target == name:
                    if isinstance(a.value, cst.Call) and _is_config_call(file, method, a.value):
                        # `self.config = CompilerConfig()`: its fields may be set in any method
                        creation = next((c for c in file.calls if c.node is a.value), None)
                        if creation is None:
                            return None
                        fields = [f for m in cls.methods.values() for f in m.assigns if f.target.startswith(name + ".")]
                        return ConfigObject(file, method, name, creation, fields)
                    found = find_config(project, file, method, a.value, _depth + 1)
                    if found is not None:
                        return found
    return None


def _is_config_call(file: FileModel, fn: FunctionInfo | None, call: cst.Call) -> bool:
    spec = apis.lookup(file.resolve(call.func, fn))
    return spec is not None and spec.role is Role.COMPILER_CONFIG


def _backend(project: "ProjectQueries", file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression | None,
             _depth: int = 0) -> tuple[str, ConfigObject | None, bool]:
    """(backend kind, config, whether a config expression was given) for a backend argument."""
    if expr is None:
        return "other", None, False
    literal = string_value(expr)
    if literal is not None:
        return {"npu": "npu", "npugraph_ex": "npugraph_ex"}.get(literal, "other"), None, False
    if isinstance(expr, cst.Call):
        spec = apis.lookup(file.resolve(expr.func, fn))
        if spec is not None and spec.role is Role.GET_NPU_BACKEND:
            cfg_expr = next((a.value for a in expr.args if a.keyword and a.keyword.value == "compiler_config"), None)
            if cfg_expr is None and expr.args and expr.args[0].keyword is None:
                cfg_expr = expr.args[0].value
            return "torchair", find_config(project, file, fn, cfg_expr), cfg_expr is not None
        target = project.function(file.resolve(expr.func, fn), file) if _depth < 4 else None
        if target is not None:
            # a backend factory (`def make_backend(): ...; return get_npu_backend(compiler_config=cfg)`),
            # in this module or another: the backend its return statements build
            callee, mod = target
            for ret in callee.returns:
                kind = _backend(project, mod, callee, ret.value, _depth + 1)
                if kind[0] != "unknown":
                    return kind
        return "unknown", None, False
    name = dotted(expr)
    if name is not None and fn is not None and _depth < 4:
        for value in reversed(fn.name_assigns.get(name, [])):
            kind = _backend(project, file, fn, value, _depth + 1)
            if kind[0] != "unknown":
                return kind
    return "unknown", None, False


def _targets(project: "ProjectQueries", file: FileModel, fn: FunctionInfo | None,
             expr: cst.BaseExpression | None, _depth: int = 0) -> list[tuple[FunctionInfo, FileModel]]:
    """The project functions a compiled object runs (a class's forward, a function)."""
    if expr is None or _depth > 5:
        return []
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MODULE_SELF_METHODS \
                and isinstance(func.value, (cst.Call, cst.Name, cst.Attribute)) and file.resolve(func, fn) is None:
            return _targets(project, file, fn, func.value, _depth + 1)  # Model(...).npu().eval()
        return _class_entry(project, file, file.resolve(expr.func, fn))
    name = dotted(expr)
    if name is None:
        return []
    resolved = file.resolve(expr, fn)
    if resolved is not None:
        found = project.function(resolved, file) if not resolved.endswith(".forward") else None
        sym = project.symbol(resolved, file)
        if sym is not None and isinstance(sym[0], ClassInfo):
            return _class_entry(project, file, resolved)
        if sym is not None and isinstance(sym[0], FunctionInfo):
            return [sym]
        if found is not None:
            return [found]
    if fn is not None:
        for value in reversed(fn.name_assigns.get(name, [])):
            found_targets = _targets(project, file, fn, value, _depth + 1)
            if found_targets:
                return found_targets
        if name in fn.all_params and name not in fn.name_assigns:
            # a model passed in (`def compile_model(model, ...)`): what its callers pass
            passed: list[tuple[FunctionInfo, FileModel]] = []
            for caller_file, caller_fn, arg in caller_arguments(project, file, fn, name):
                passed += [t for t in _targets(project, caller_file, caller_fn, arg, _depth + 1) if t not in passed]
            if passed:
                return passed
    if name.startswith("self.") and fn is not None and fn.class_name in file.classes:
        attr = name.split(".")[1]
        cls = file.classes[fn.class_name]
        ctor = cls.attr_types.get(attr)
        sym = project.symbol(ctor, file) if ctor is not None else None
        if sym is not None and isinstance(sym[0], ClassInfo):
            # `self.model = Model(cfg)`; a loader's result (`self.model = get_model(cfg)`) is built at run time
            return _class_entry(project, file, ctor)
    if "." in name:  # model.forward / self.model.forward
        head, _, method = name.rpartition(".")
        inner = _targets(project, file, fn, cst.parse_expression(head), _depth + 1)
        return [(f, m) for f, m in inner if f.node.name.value == method] or inner
    return []


def _class_entry(project: "ProjectQueries", file: FileModel, qualname: str | None) -> list[tuple[FunctionInfo, FileModel]]:
    if qualname is None:
        return []
    sym = project.symbol(qualname, file)
    if sym is None:
        return []
    info, mod = sym
    if isinstance(info, FunctionInfo):
        return [(info, mod)]
    entries = [info.methods[m] for m in ("forward", "__call__") if m in info.methods]
    return [(e, mod) for e in entries]


def compile_site(project: "ProjectQueries", file: FileModel, site: CallSite) -> CompileSite | None:
    spec = apis.lookup(site.target)
    if spec is None or spec.role not in (Role.TORCH_COMPILE, Role.CACHE_COMPILE):
        return None
    call = site.node
    fn = site.function
    kwargs = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    target_expr = positional[0] if positional else kwargs.get("model") or kwargs.get("func")
    decorated = [f for f in file.functions.values() if any(d.decorator is call for d in f.node.decorators)]
    if decorated:
        targets = [(decorated[0], file)]
    else:
        targets = _targets(project, file, fn, target_expr)
    runtime = not targets and not decorated and _built_at_run_time(project, file, fn, target_expr)
    if spec.role is Role.CACHE_COMPILE:
        config = find_config(project, file, fn, kwargs.get("config"))
        modes = config.modes() if config is not None else frozenset({DEFAULT_TORCHAIR_MODE})
        dynamic = _bool_literal(kwargs.get("dynamic"))
        return CompileSite(file, site, spec.role, "torchair", config, modes,
                           True if "dynamic" not in kwargs else dynamic, targets, runtime)
    backend, config, has_config = _backend(project, file, fn, kwargs.get("backend"))
    if backend == "npu":
        modes: frozenset[str] | None = frozenset({"ge"})
    elif backend == "npugraph_ex":
        modes = frozenset({"npugraph_ex"})
    elif backend == "torchair":
        if config is not None:
            modes = config.modes()
        else:
            modes = None if has_config else frozenset({DEFAULT_TORCHAIR_MODE})
    else:
        modes = None
    options = kwargs.get("options")
    if isinstance(options, cst.Dict) and modes is not None:
        for el in options.elements:
            if isinstance(el, cst.DictElement) and string_value(el.key) == "force_eager" \
                    and _bool_literal(el.value) is True:
                modes = frozenset({"eager"})
    return CompileSite(file, site, spec.role, backend, config, modes, _bool_literal(kwargs.get("dynamic")), targets,
                       runtime)


def _built_at_run_time(project: "ProjectQueries", file: FileModel, fn: FunctionInfo | None,
                       expr: cst.BaseExpression | None, _depth: int = 0) -> bool:
    """Whether a compiled object whose code cannot be resolved is built at run time: a model attribute
    (``self.model``, ``self.model.__dict__[name]``) or the result of a loader call (``get_model(cfg)``),
    not a class constructed in place (a class defined inside a function is only unresolved)."""
    if expr is None or _depth > 4:
        return False
    if isinstance(expr, cst.Subscript):
        return _built_at_run_time(project, file, fn, expr.value, _depth + 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MODULE_SELF_METHODS:
            return _built_at_run_time(project, file, fn, func.value, _depth + 1)
        callee = dotted(func)
        return callee is not None and not _defines_class(file, callee.rsplit(".", 1)[-1]) \
            and not isinstance((project.symbol(file.resolve(func, fn) or "", file) or (None,))[0], ClassInfo)
    name = dotted(expr)
    if name is None:
        return False
    if name.startswith("self."):
        return True
    if fn is not None and name in fn.name_assigns:
        return any(_built_at_run_time(project, file, fn, v, _depth + 1) for v in fn.name_assigns[name])
    return False


def _defines_class(file: FileModel, name: str) -> bool:
    """Whether the module defines a class of that name anywhere, nested ones included (``class
    Module(nn.Module)`` inside a test function)."""
    return re.search(rf"\bclass\s+{re.escape(name)}\b", file.source.text) is not None


# ---- configuration fields, flag exclusivity, and what a compile reaches (SL401/SL402/SL403)


@dataclass(frozen=True)
class FieldValue:
    """A value given to a config field: ``cfg.ge_config.x = v``, ``cfg.ge_config["x"] = v`` or
    ``setattr(cfg.ge_config, "x", v)``."""

    file: FileModel
    node: cst.CSTNode  # the assignment statement or the setattr call (where to report)
    value: cst.BaseExpression
    guards: tuple[Guard, ...]  # the `if` tests around the assignment


def field_values(config: ConfigObject, name: str) -> list[FieldValue]:
    """Every value assigned to ``<config>.<name>`` (e.g. ``"ge_config.enable_single_stream"``)."""
    parent, _, leaf = name.rpartition(".")
    owner = f"{config.variable}.{parent}" if parent else config.variable
    subscript = f"{owner}[{leaf}]"
    found = [FieldValue(config.file, a.node, a.value, a.guards) for a in config.assigns
             if a.target == f"{config.variable}.{name}"]
    found += [FieldValue(config.file, a.node, a.value, a.guards) for a in config.file.assigns
              if a.function is config.function and a.target == subscript]
    calls = config.function.calls if config.function is not None else config.file.module_calls
    for site in calls:
        args = site.node.args
        if dotted(site.node.func) == "setattr" and len(args) == 3 and dotted(args[0].value) == owner \
                and string_value(args[1].value) == leaf:
            found.append(FieldValue(config.file, site.node, args[2].value, site.guards))
    return found


def bool_literal(expr: cst.BaseExpression | None) -> bool | None:
    """``True`` / ``False`` (and ``1`` / ``0``) literals; None for anything else."""
    if isinstance(expr, cst.Integer) and expr.value in ("0", "1"):
        return expr.value == "1"
    return _bool_literal(expr)


def flags_under(guards: tuple[Guard, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(flags known true, flags known false) where ``guards`` hold. A flag is the last name of a
    plain boolean test: ``if enable_multistream:``, ``if not self.enable_multistream:``,
    ``if flag and exe_mode == "ge_graph":``, ``if x.flag is False:``."""
    true: set[str] = set()
    false: set[str] = set()
    for guard in guards:
        for test, negated in guard.conditions():
            flag = _flag(test)
            if flag is not None:
                (false if flag[1] != negated else true).add(flag[0])
    return frozenset(true), frozenset(false)


def _flag(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """(flag name, whether the test is the flag's negation) for ``x.flag`` / ``flag is False`` …"""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        value = _bool_literal(comp.comparator)
        if value is not None and isinstance(comp.operator, (cst.Is, cst.Equal, cst.IsNot, cst.NotEqual)):
            inner = _flag(test.left)
            if inner is None:
                return None
            equal = isinstance(comp.operator, (cst.Is, cst.Equal))
            positive = value == equal  # `x is True` / `x != False` test x itself
            return inner[0], inner[1] if positive else not inner[1]
        return None
    name = dotted(test)
    return (name.rsplit(".", 1)[-1], False) if name is not None else None


def enabling_flags(use: ApiUse) -> frozenset[str]:
    """Flags that must be true for an API use to run: true guards at the call, and flag-like names
    passed to the wrapper it goes through (``npu_stream_switch(tag, enabled=self.enable_multistream)``,
    ``npu_stream_switch(self.enable_multi_stream, "22")``)."""
    true, _ = flags_under(use.site.guards)
    names = set(true)
    if use.wrappers:
        for arg in use.node.args:
            name = dotted(arg.value)
            if name is not None:
                names.add(name.rsplit(".", 1)[-1])
    return frozenset(names)


def reached_uses(project: "ProjectQueries", cs: CompileSite, roles: "frozenset[Role] | set[Role]",
                 mode: str | None = None) -> list[ApiUse]:
    """API uses with ``roles`` in the code a compile site reaches (through the call graph from its
    targets), in a deterministic order. A wrapper's own forwarding call is represented by its callers'
    uses. With ``mode``, only uses that can run on that execution path (wrapper variants, mode guards)."""
    return _uses_in(project, project.reachable(cs.targets), roles, mode)


_MULTI_STREAM_MARKERS = (b"npu_stream_switch", b"NpuStreamSwitch", b"npu_prefetch")


def model_uses(project: "ProjectQueries", roles: "frozenset[Role]", mode: str | None = None) -> list[ApiUse]:
    """API uses with ``roles`` in the project's model code: what the ``forward`` of a class reaches, for
    the classes of the modules that mention a multi-stream API. The answer for a compile whose model is
    built at run time (``torch.compile(self.model)`` after ``self.model = get_model(cfg)``): the project's
    models are what it may compile; rules reporting from it say they are less sure."""
    project.note_wide_read()
    cache: dict = project.derived("model_uses")
    key = (roles, mode)
    if key not in cache:
        entries = [(method, mod) for mod in project.files_containing(_MULTI_STREAM_MARKERS)
                   for cls in mod.classes.values() for name, method in cls.methods.items()
                   if name in ("forward", "__call__")]
        cache[key] = _uses_in(project, project.reachable(entries), roles, mode)
    return cache[key]


def _uses_in(project: "ProjectQueries", functions, roles: "frozenset[Role] | set[Role]",
             mode: str | None) -> list[ApiUse]:
    found: list[ApiUse] = []
    for fn, mod in functions:
        if project.wrapper(fn, mod) is not None:
            continue
        for site in fn.calls:
            guard = modes_under(site.guards)
            if mode is not None and guard is not None and mode not in guard:
                continue
            for use in project.api_uses(mod, site):
                if use.role in roles and (mode is None or use.modes is None or mode in use.modes):
                    found.append(use)
    found.sort(key=lambda u: (u.file.path, u.file.span(u.node).start_line, u.file.span(u.node).start_col))
    return found


def compile_modes(project: "ProjectQueries", cs: CompileSite) -> frozenset[str]:
    """The execution paths of a compile site: from its backend and config, or — when the config is built
    at run time and cannot be followed — from the ``mode`` / ``per-path-mode`` settings for its targets."""
    if cs.modes:
        return cs.modes
    modes: set[str] = set()
    for fn, mod in cs.targets:
        path = project.execution_path(mod, fn)
        if path.source == "config":
            modes |= path.modes
    return frozenset(modes)


def compiled_uses(project: "ProjectQueries", cs: CompileSite, roles: "frozenset[Role]", mode: str,
                  keep: "Callable[[ApiUse], bool]" = lambda use: True) -> tuple[list[ApiUse], list[str]]:
    """The uses of ``roles`` that run on ``mode`` in what the compile site compiles, with the reasons the
    answer is less sure (empty: sure). A site compiled for another mode gives nothing, unless its ``mode``
    is set at run time under a condition and the default (``max-autotune``, GE) stays possible; a site
    whose model is built at run time (``torch.compile(self.model)``) reaches the project's models
    (:func:`model_uses`). ``keep`` filters the uses (e.g. those a guard turns off) before that fallback."""
    doubts: list[str] = []
    if mode not in compile_modes(project, cs):
        config = cs.config
        if mode != "ge" or cs.modes is not None or config is None or config.modes() is not None \
                or not config.default_mode_possible():
            return [], []
        doubts.append("its `mode` is set at run time under a condition, so it may stay max-autotune")
    uses = [u for u in reached_uses(project, cs, roles, mode) if keep(u)]
    if not uses and cs.runtime_target:
        uses = [u for u in model_uses(project, roles, mode) if keep(u)]
        if uses:
            doubts.append("the compiled model is built at run time; the project's models switch streams")
    return uses, doubts


def caller_arguments(project: "ProjectQueries", file: FileModel, fn: FunctionInfo,
                     param: str) -> list[tuple[FileModel, FunctionInfo | None, cst.BaseExpression]]:
    """The argument each project call of ``fn`` passes for ``param``: calls of a module-level function
    or a method (``self.compile_model(...)``), and constructions of a class for ``__init__``. Files are
    found by a byte search for the name; the result is cached with the path index."""
    if fn.parent is not None:
        return []
    is_init = fn.class_name is not None and fn.node.name.value == "__init__"
    qualname = f"{file.module_name}.{fn.class_name if is_init else fn.qualname}"
    project.note_wide_read()
    cache: dict[tuple[str, str], list] = project.derived("caller_arguments")
    key = (qualname, param)
    if key in cache:
        return cache[key]
    cache[key] = []  # recursion guard
    params = fn.params[1:] if fn.class_name is not None and fn.params[:1] in (("self",), ("cls",)) else fn.params
    found = []
    # past MAX_CALLER_FILES files that may call it, the callers are not followed (the parameter stays unknown)
    for model in project.files_calling(qualname.rsplit(".", 1)[-1], limit=MAX_CALLER_FILES) or ():
        for site in model.calls:
            if site.target == qualname:
                arg = bind_arguments(params + fn.kwonly, site.node, kwonly=fn.kwonly).get(param)
                if arg is not None:
                    found.append((model, site.function, arg))
    cache[key] = found
    return found
