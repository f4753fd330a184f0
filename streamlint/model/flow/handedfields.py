"""Fields a per-step object holds for its constructor's caller (SL201 forks on unseen producers).

A ``self.*`` tensor is long-lived for the stream rules (a side stream may read it with no fork) only while
nothing says it changes during the step (:mod:`~streamlint.model.stepstate`: a write outside construction).
A field the object was *handed* by its constructor (``self.tensor = tensor`` in ``__init__``) holds whatever
the caller passed, and how long-lived that is depends on where the object is built: a weight wrapper built in
``__init__`` / ``setup`` holds weights, while an object built in a step function (a saved-tensor pack hook
wrapping each activation, a transfer record built per batch) holds the caller's step data, produced on its
current stream just before. A side stream reading such a field needs the fork an argument needs.

Evidence, all of it required:

- every assignment of ``self.<field>`` in the class is in ``__init__``, from one constructor parameter (or
  ``None``), and that parameter is evidently a tensor (annotated, or used as one: ``tensor.size()``);
- the class has at most ``MAX_SITES`` construction sites in the project (:func:`callers_of`), each in a
  function that is not construction (``__init__``, ``setup*``, ``build*``, ``load*`` … by name, as in
  :mod:`~streamlint.model.stepstate`), none at module level;
- each site hands, for that parameter, a name of the calling function (its parameter or a local it
  assigns), not a ``self.*`` field, a module global or a host value (``.cpu()``, ``pin_memory=True``).

The answer (the first construction site's caller, for the message) is memoised per class and field.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of
from streamlint.model.flow.foreignfields import foreign_step_source
from streamlint.model.flow.quietwrites import quiet_write
from streamlint.model.placement import host_value
from streamlint.model.stepstate import _CONSTRUCTION, forked_elsewhere, step_writer
from streamlint.model.streams import derived
from streamlint.model.uses import bind_arguments

# builders that wrap what they are handed once, like constructors (`wrap_weight(p)`, `make_offloaded(p)`): not step code
_BUILDERS = re.compile(r"_*(make|wrap|convert|quantize|prepare|shard|offload_model|to_)")

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project

MAX_SITES = 8
_FIELD = re.compile(r"self\.(\w+)(?:$|[.\[])")
HANDED = "handed:"  # prefix of a step source naming the constructing function, not a method of the class


def step_source(project: Project, file: FileModel, fn: FunctionInfo, key: str, mode: str) -> str | None:
    """What says the long-lived storage ``key`` of ``fn``'s class is step data: the method rewriting it every
    step (:func:`~streamlint.model.stepstate.step_writer`), else ``HANDED + caller`` (:func:`handed_step_field`),
    else ``FOREIGN + Class.method`` for a field of a held object that object's class rewrites every step
    (:func:`~streamlint.model.flow.foreignfields.foreign_step_source`)."""
    return step_writer(project, file, fn, key, mode, quiet=partial(quiet_write, project)) \
        or handed_step_field(project, file, fn, key, mode) or foreign_step_source(project, file, fn, key, mode)


def handed_step_field(project: Project, file: FileModel, fn: FunctionInfo, key: str, mode: str) -> str | None:
    """``HANDED + caller`` when the long-lived storage ``key`` (``self.tensor``) of ``fn``'s class is a field
    the object was handed by a constructor that only step functions call (see the module docstring), else
    None."""
    if mode not in ("eager", "cuda") or fn.class_name is None or fn.node.name.value == "__init__":
        return None
    m = _FIELD.match(key)
    cls = file.classes.get(fn.class_name)
    if m is None or cls is None or cls.methods.get(fn.node.name.value) is not fn:
        return None
    memo = derived(project, "handed_step_fields")
    mkey = (id(cls), m.group(1))
    held = memo.get(mkey)
    if held is None or held[0] is not cls:  # (the class is kept with its answer: an id is never reused under it)
        memo[mkey] = (cls, None)  # (in progress: a cycle through the constructor's callers answers None)
        memo[mkey] = held = (cls, _handed(project, file, cls, m.group(1)))
    return held[1]


def _handed(project: Project, file: FileModel, cls, field: str) -> str | None:
    from streamlint.model.tensors import param_kinds

    ctor = cls.methods.get("__init__")
    if ctor is None:
        return _handed_record_field(project, file, cls, field)
    if ctor.params[:1] != ("self",):
        return None
    params = set(ctor.all_params) - {"self"}
    handed = None
    for method in cls.methods.values():
        for a in method.assigns:
            if a.target != f"self.{field}" and not a.target.startswith((f"self.{field}.", f"self.{field}[")):
                continue
            value = a.value
            if method is not ctor or a.target != f"self.{field}" or not isinstance(value, cst.Name):
                return None  # set, or written into, elsewhere / from something else: not only what was handed
            if value.value == "None":
                continue
            if value.value not in params or handed not in (None, value.value):
                return None
            handed = value.value
    if handed is None or param_kinds(project, file, ctor).get(handed) != "tensor":
        return None
    sites = callers_of(project, file, ctor)
    if not sites or len(sites) > MAX_SITES:
        return None
    first = None
    for model, site in sites:
        caller = site.function
        if caller is None or _CONSTRUCTION.match(caller.node.name.value) or _BUILDERS.match(caller.node.name.value) \
                or caller.class_name == cls.name:
            return None
        arg = bind_arguments(ctor.params[1:] + ctor.kwonly, site.node, kwonly=ctor.kwonly).get(handed)
        if not isinstance(arg, cst.Name) or not _step_local(caller, arg.value):
            return None
        first = first or caller.node.name.value
    return HANDED + first if first else None


def _handed_record_field(project: Project, file: FileModel, cls, field: str) -> str | None:
    """The record form (a dataclass with no ``__init__`` of its own): ``field`` is declared with a tensor annotation,
    no method of the class writes it, and every construction the project shows (``ModelOutput(out,
    ready, out.sampled_ids)``, by position or keyword: :func:`~streamlint.model.handedevents.constructions`) is in
    a step function (as above) giving it a step local or an attribute / element of one (``out.sampled_ids``,
    ``outs[0].ids``), or None."""
    from streamlint.model.handedevents import constructions
    from streamlint.model.tensoruse import tensor_annotation

    if not any(isinstance(d.decorator, (cst.Name, cst.Attribute, cst.Call)) and "dataclass" in _code(d.decorator)
               for d in cls.node.decorators):
        return None
    declared = next((stmt.body[0].annotation.annotation for stmt in cls.node.body.body
                     if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.AnnAssign)
                     and isinstance(stmt.body[0].target, cst.Name) and stmt.body[0].target.value == field), None)
    if declared is None or not tensor_annotation(declared):
        return None
    if any(a.target == f"self.{field}" or a.target.startswith((f"self.{field}.", f"self.{field}["))
           for method in cls.methods.values() for a in method.assigns):
        return None
    built = constructions(project, file, cls)
    if not built or len(built) > MAX_SITES:
        return None
    first = None
    for _, caller, _, given in built:
        if caller is None or _CONSTRUCTION.match(caller.node.name.value) or _BUILDERS.match(caller.node.name.value) \
                or caller.class_name == cls.name or field not in given:
            return None
        value = given[field]
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        while isinstance(value, (cst.Attribute, cst.Subscript)):
            value = value.value
        if not isinstance(value, cst.Name) or not _step_local(caller, value.value):
            return None
        first = first or caller.node.name.value
    return HANDED + first if first else None


def _code(node: cst.CSTNode) -> str:
    from streamlint.model.syntax import node_code
    return node_code(node)


def _step_local(caller: FunctionInfo, name: str) -> bool:
    """``name`` is the calling function's parameter, or a local it assigns only device values (no host copy)."""
    if name in caller.all_params:
        return name not in ("self", "cls")
    values = caller.name_assigns.get(name, [])
    return bool(values) and not any(v is None or host_value(v) for v in values)


__all__ = ["HANDED", "forked_elsewhere", "handed_step_field", "step_source"]  # (forked_elsewhere: for storage.py)
