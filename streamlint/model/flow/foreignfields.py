"""Step state of another object: ``self.<holder>.<field>`` tensors whose class rewrites them every step.

:mod:`~streamlint.model.stepstate` says a ``self.*`` tensor of the function's own class is step data when
another method of that class rewrites it outside construction. The same holds one object further: a
collector that holds the sampler it reports on (``self.sampler = sampler``, ``sampler: AcceptanceSampler``)
and copies ``self.sampler.accepted_total`` on a side stream reads a tensor that the sampler's own step method
(``self.accepted_total += accepted.sum()``) rewrites on its caller's current stream. Nothing in the reading
function produces it, so the convention of eager code applies: the producer ran on the current stream, and
a side stream reading it with no fork (no wait on the current stream, no event, no host synchronisation) is
a race (SL201, medium: it assumes that order of the calls).

The held object's class is the project class every binding of ``self.<holder>`` in the reading class names:
a declared field / property (:func:`~streamlint.model.flow.objeffects.field_class`), a constructor call of a
project class, or a parameter annotated with project classes. Its writers are
:func:`~streamlint.model.stepstate.step_writers` of that class (construction methods and writes inside
stream scopes excluded; a write :func:`~streamlint.model.flow.quietwrites.quiet_write` clears is none).

Silent (precision first): a holder bound to anything else (a value of unknown type, a rebinding in a step
method: a new object whose fields nobody wrote yet), a field no method of the held class rewrites outside
construction (a table loaded once), and a writer some call of which in the project runs under a stream scope
(its writes are then that stream's, state kept per stream, not the caller's current one). A writer no seen call
reaches leaves its stream a guess: :data:`GUESSED` marks it and the finding is low. A field no binding of which in
the held class is a device allocation (``device=`` given, ``.cuda()``), or which it keeps host memory in
(:func:`~streamlint.model.flow.hostwrites.host_fields`: the CPU half of a CPU / GPU buffer pair), is none: its kind
would be a guess. A method named like
construction (``_create_output``) whose every seen call is made by step code is a writer too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.apis import Role
from streamlint.model.devobjects import object_classes
from streamlint.model.file import dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.hostwrites import host_fields
from streamlint.model.flow.objeffects import field_class
from streamlint.model.flow.quietwrites import quiet_write
from streamlint.model.placement import host_value
from streamlint.model.stepstate import _CONSTRUCTION, _construction, _writes, step_writers
from streamlint.model.streams import derived

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

FOREIGN = "object:"  # prefix of a step source naming `Class.method` of a held object's class
GUESSED = "?"  # suffix: no call of the writer is seen, so the stream it runs on is a guess
_KEY = re.compile(r"self\.(\w+)\.(\w+(?:[.\[].*)?)$")


def foreign_step_source(project: Project, file: FileModel, fn: FunctionInfo, key: str, mode: str) -> str | None:
    """``FOREIGN + "Class.method"`` (``+ GUESSED`` when no call of it is seen) when ``key``
    (``self.sampler.accepted_total``) is a field of a project object ``fn``'s class holds and a method of that
    object's class rewrites it every step on its caller's current stream; else None."""
    if mode not in ("eager", "cuda") or fn.class_name is None:
        return None
    m = _KEY.match(key)
    cls = file.classes.get(fn.class_name)
    if m is None or cls is None:
        return None
    memo = derived(project, "foreign_step_sources")
    mkey = (id(cls), key)
    held = memo.get(mkey)
    if held is None or held[0] is not cls:  # (the class is kept with its answer: an id is never reused under it)
        memo[mkey] = held = (cls, _source(project, file, cls, m.group(1), "self." + m.group(2)))
    return held[1]


def _held_classes(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> list | None:
    """The project classes ``self.<attr>`` holds when every binding of it in ``cls`` says so (see the module
    docstring); None otherwise."""
    declared = field_class(project, file, cls, attr)
    if declared is not None:
        return [declared]
    construction = _construction(cls)
    out: list = []
    for name, method in cls.methods.items():
        for a in method.assigns:
            if a.target != f"self.{attr}":
                continue
            value = a.value
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            if name not in construction:
                return None  # rebound during the step: a new object, not the one a writer filled
            if isinstance(value, cst.Name) and value.value in method.all_params:
                found = object_classes(project, file, method, value)
            elif isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
                qualname = file.resolve(value.func, method) or f"{file.module_name}.{dotted(value.func) or ''}"
                sym = project.symbol(qualname, file)
                found = [sym] if sym is not None and isinstance(sym[0], ClassInfo) else None
            else:
                found = None
            if not found:
                return None
            out += found
    return out or None


def _source(project: Project, file: FileModel, cls: ClassInfo, attr: str, field: str) -> str | None:
    classes = _held_classes(project, file, cls, attr)
    if not classes:
        return None
    for held, model in classes:
        if held is cls:
            continue  # (the class's own fields: stepstate's question)
        writers = dict(step_writers(project, model, held))
        for path, where in _called_in_step(project, model, held).items():
            writers[path] = writers.get(path, []) + where
        top = field[5:].split(".", 1)[0].split("[", 1)[0]
        if _host_field(project, model, held, top) or not _device_bound(project, model, held, top):
            continue  # host staging memory (the CPU half of a CPU-GPU buffer pair, a list of page ids), or memory
            # no binding of which says it is on the device: its kind is a guess (precision first)
        for path, where in writers.items():
            if not (path == field or path.startswith((field + ".", field + "["))
                    or field.startswith((path + ".", path + "["))):
                continue
            for method, node in where:
                if quiet_write(project, node):
                    continue
                writer = _method(project, model, held, method)
                stream = _writer_stream(project, writer[1], writer[0]) if writer is not None else "scoped"
                if stream == "scoped":
                    return None  # the writer runs under a stream scope somewhere: its writes are that stream's
                return f"{FOREIGN}{held.name}.{method}" + (GUESSED if stream == "unseen" else "")
    return None


def _chain(project: Project, file: FileModel, cls: ClassInfo) -> list[tuple[ClassInfo, FileModel]]:
    """``cls`` and its project bases (three levels)."""
    out, todo = [], [(cls, file, 0)]
    while todo:
        c, f, depth = todo.pop(0)
        if any(c is o for o, _ in out):
            continue
        out.append((c, f))
        if depth < 3:
            for b in c.bases:
                sym = project.symbol(b, f)
                if sym is not None and isinstance(sym[0], ClassInfo):
                    todo.append((sym[0], sym[1], depth + 1))
    return out


def _host_field(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Does the class (or a project base) keep host memory in ``attr``
    (:func:`~streamlint.model.flow.hostwrites.host_fields`, or every binding a host allocation)?"""
    chain = _chain(project, file, cls)
    if any(attr in host_fields(project, f, c) for c, f in chain):
        return True
    values = [a.value for c, _f in chain for m in c.methods.values() for a in m.assigns
              if a.target == f"self.{attr}" and not (isinstance(a.value, cst.Name) and a.value.value == "None")]
    return bool(values) and all(host_value(v) for v in values)  # `self.cpu = torch.zeros(n, device="cpu")`


def _device_bound(project: Project, file: FileModel, cls: ClassInfo, attr: str) -> bool:
    """Is some binding of ``self.<attr>`` in the class chain a device allocation: a factory given a ``device=`` that
    is no host string, or a ``.cuda()`` / ``.npu()`` copy? (Else the field's kind is a guess: low.)"""
    for c, _f in _chain(project, file, cls):
        for method in c.methods.values():
            for a in method.assigns:
                if a.target != f"self.{attr}" or not isinstance(a.value, cst.Call):
                    continue
                func = a.value.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "npu"):
                    return True
                for arg in a.value.args:
                    if arg.keyword is not None and arg.keyword.value == "device" and not (
                            isinstance(arg.value, cst.SimpleString) and "cpu" in arg.value.value):
                        return True
    return False


def _called_in_step(project: Project, file: FileModel, cls: ClassInfo) -> dict[str, list[tuple[str, cst.CSTNode]]]:
    """Writes of the methods of ``cls`` (and its project bases, three levels) that construction-like names hide
    from :func:`~streamlint.model.stepstate.step_writers` (``_create_output``, ``build_batch``) while every seen
    call of them is made by step code (a method of any class not named for construction): they run each step."""
    out: dict[str, list[tuple[str, cst.CSTNode]]] = {}
    for c, f in _chain(project, file, cls):
        for name, method in c.methods.items():
            if name.startswith("__") or not _CONSTRUCTION.match(name) or method.params[:1] != ("self",):
                continue
            sites = callers_of(project, f, method)
            if not sites or any(site.function is None or site.function.node.name.value.startswith("__")
                                or _CONSTRUCTION.match(site.function.node.name.value) for _m, site in sites):
                continue
            for path, node in _writes(f, method.node.body):
                out.setdefault(path, []).append((name, node))
    return out


def _method(project: Project, file: FileModel, cls: ClassInfo, name: str) -> tuple | None:
    """(function, file) of the method ``name`` of ``cls`` or of its project bases (three levels)."""
    return next(((c.methods[name], f) for c, f in _chain(project, file, cls) if name in c.methods), None)


def _writer_stream(project: Project, model: FileModel, writer: FunctionInfo) -> str:
    """``"current"`` when every seen call of ``writer`` runs outside any stream scope, ``"scoped"`` when one runs
    inside one, ``"unseen"`` when no call is seen."""
    sites = callers_of(project, model, writer)
    if not sites:
        return "unseen"
    for caller_model, site in sites:
        for use in project.enclosing_scopes(caller_model, site.scope):
            if any(api.role in (Role.STREAM_SWITCH, Role.NATIVE_STREAM_CONTEXT) for api in use.uses):
                return "scoped"
    return "current"


__all__ = ["FOREIGN", "GUESSED", "foreign_step_source"]
