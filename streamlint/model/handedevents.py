"""Is an event a class waits on handed to it at construction (issue 16, [constructor-field-event])?

A wait on ``self.<attr>`` that nothing in the class records orders nothing -- unless the object is given the
event by whoever constructs it: a dataclass / NamedTuple field with no default, or ``self.done = done`` from an
``__init__`` parameter (:func:`~streamlint.model.attrstreams.attr_origin` says "handed"; "unseen" when a base
class outside the project may define it). The constructor's caller then records it
(``StepResult(done=stream.record_event())``, an event a helper returned after queuing its work), and the class
not recording it is no evidence of anything. Only constructions it can read count: arguments mapped to fields
by keyword or by position (the ``__init__`` parameters, else the dataclass / NamedTuple fields in order); one it
cannot map (``*args``, a positional past the known order) or does not see (``cls(...)``, ``_make``,
``dataclasses.replace``, an alias) is no evidence of a hand-in. The field counts as handed in when some read
construction gives it an event that may be recorded: anything but a just-made ``Event()`` or a local bound once
to one and used nowhere else (not recorded, not given to anything else). With no construction seen in the
project at all, the class is built outside it and the wait is its caller's business. Nothing recording the
event through the object is asked by :func:`~streamlint.model.waits.event_recorded_elsewhere`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.attrstreams import attr_origin
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import ClassInfo
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


def handed_at_construction(project: Project, file: FileModel, cls: ClassInfo | None, attr: str) -> bool:
    """Does ``self.<attr>`` of ``cls`` hold what the object's constructor was given (or what a base class
    outside the project sets), with some construction in the project giving it an event that may be recorded
    (or none seen at all)?"""
    if cls is None:
        return False
    origin = attr_origin(project, file, cls, attr)
    if origin == "unseen":
        return True
    if origin != "handed":
        return False
    built = constructions(project, file, cls)
    if not built:
        return True  # (built only outside the project: its caller's to record)
    return any(_may_be_recorded(fn, given.get(attr)) for _, fn, _, given in built)


def constructions(project: Project, file: FileModel, cls: ClassInfo) -> list:
    """Every construction of ``cls`` the project shows (``Cls(...)`` through its name): (its file model, the
    enclosing function or None, the call, {field: expression given}) -- the arguments mapped to the fields by keyword or by position (the
    ``__init__`` parameters, else the dataclass / NamedTuple fields in order); a field a construction may give
    unseen (``*args`` / ``**kwargs``, a positional past the known order, no known order) is absent from it. A
    construction it does not see at all (``cls(...)``, ``_make``, ``dataclasses.replace``, an alias) gives
    nothing either way. Memoised per class."""
    memo = project.path_index.derived.setdefault("handed_constructions", {})
    if id(cls) not in memo:
        memo[id(cls)] = []
        order = _positional_order(project, file, cls)
        out = []
        # (a module whose stdlib summary says no call of it resolves to ``…<name>`` is not parsed: the bytes
        # ``Name(`` are in every ``class Sub(Name):`` statement and every ``XName(`` call)
        for model in project.files_containing((f"{cls.name}(".encode(),),
                                              keep=lambda path: project.may_resolve_call(path, cls.name)):
            for fn, site in _sites_named(project, model, cls.name):
                found = project.symbol(site.target, model)
                if found is None or found[0] is not cls:
                    continue
                out.append((model, fn, site.node, _mapped(site.node, order)))
        memo[id(cls)] = out
    return memo[id(cls)]


def _sites(model: FileModel):
    for fn in model.iter_functions():
        for site in fn.calls:
            yield fn, site
    for site in model.module_calls:
        yield None, site


def _sites_named(project: Project, model: FileModel, name: str) -> list:
    """The (enclosing function or None, call site) of :func:`_sites` whose target's last name is ``name``, in
    :func:`_sites`'s order: from an index of the model's sites by that name, made once per model (each class of
    a module asks it of its own module: ``class Name(`` holds the bytes ``Name(``)."""
    memo = project.path_index.derived.setdefault("sites_by_name", {})
    hit = memo.get(id(model))
    if hit is None or hit[0] is not model:  # (the entry holds its model: no other can take its id meanwhile)
        index: dict[str, list] = {}
        for fn, site in _sites(model):
            if site.target is not None:
                index.setdefault(site.target.rsplit(".", 1)[-1], []).append((fn, site))
        hit = memo[id(model)] = (model, index)
    return hit[1].get(name, [])


def _mapped(call: cst.Call, order: list[str] | None) -> dict:
    """Field -> the expression a construction gives it: every explicit keyword (``**kwargs`` beside it cannot
    give the same field again), and positional arguments by ``order`` up to the first ``*args``; a field it may
    give unseen (past ``*args`` or an unknown order, through ``**kwargs``) is absent."""
    given: dict = {}
    positional = order is not None
    for i, arg in enumerate(call.args):
        if arg.star:
            positional = False
        elif arg.keyword is not None:
            given[arg.keyword.value] = arg.value
        elif positional and i < len(order):
            given[order[i]] = arg.value
    return given


def construction_fields(project: Project, file: FileModel, cls: ClassInfo, call: cst.Call) -> dict:
    """Field -> the expression one construction ``Cls(...)`` gives it (:func:`_mapped` by
    :func:`_positional_order`), an ``__init__`` parameter named by the field it is stored into
    (``self.tensors = tensors``, or ``self.ready = event``: one ``self`` field bound to the bare parameter)."""
    given = _mapped(call, _positional_order(project, file, cls))
    init = cls.methods.get("__init__")
    if init is None:
        return given
    stored: dict[str, set[str]] = {}
    for stmt in init.node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Name):
                    target = dotted(small.targets[0].target)
                    if target is not None and target.startswith("self.") and target.count(".") == 1:
                        stored.setdefault(small.value.value, set()).add(target[5:])
    out = {}
    for param, value in given.items():
        fields = stored.get(param, set())
        if len(fields) == 1:
            out[next(iter(fields))] = value
        elif param not in out:
            out[param] = value
    return out


def _positional_order(project: Project, file: FileModel, cls: ClassInfo) -> list[str] | None:
    """The names positional arguments bind, in order: the class's own ``__init__`` parameters after ``self``,
    else the bare and defaulted annotated fields of a dataclass / NamedTuple whose project base classes add no
    fields (a mixin of methods; a base's fields would come first); None when unknown."""
    init = cls.methods.get("__init__")
    if init is not None:
        return list(init.params[1:])
    decorators = [file.code(d.decorator) for d in cls.node.decorators]
    named_tuple = any(b.rsplit(".", 1)[-1] == "NamedTuple" for b in cls.bases)
    if not named_tuple and not any("dataclass" in d and "kw_only" not in d for d in decorators):
        return None
    if any(b and not _fieldless_base(project, file, b) for b in cls.bases):
        return None
    out = []
    for stmt in cls.node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    annotation = file.code(small.annotation.annotation)
                    if "KW_ONLY" in annotation:
                        return out  # (the fields after it are keyword-only)
                    if "ClassVar" in annotation or \
                            isinstance(small.value, cst.Call) and "init=False" in file.code(small.value):
                        continue
                    out.append(small.target.value)
    return out


def _fieldless_base(project: Project, file: FileModel, base: str, depth: int = 0) -> bool:
    """A base class that adds no dataclass field: not in the project, or a project class that is no dataclass,
    annotates no field and whose own bases add none (three levels up)."""
    sym = project.symbol(base, file)
    if sym is None:
        return True
    cls, module = sym
    if not isinstance(cls, ClassInfo) or depth >= 3 \
            or any("dataclass" in module.code(d.decorator) for d in cls.node.decorators):
        return False
    for stmt in cls.node.body.body:
        if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(x, cst.AnnAssign) for x in stmt.body):
            return False
    return all(not b or _fieldless_base(project, module, b, depth + 1) for b in cls.bases)


def _may_be_recorded(fn, value: cst.BaseExpression | None) -> bool:
    """Is the event a construction gives the field one that may have work recorded on it: anything but a
    just-made ``Event()``, or a local bound once to one and used nowhere else in the function than in the
    construction (never recorded, never handed to anything else)? A field not given at all is not."""
    if value is None:
        return False
    if isinstance(value, cst.Name) and fn is not None and value.value not in fn.all_params:
        bound = fn.name_assigns.get(value.value, ())
        if len(bound) == 1 and _fresh_event(bound[0]) and _uses(fn.node, value.value) == 2:
            return False
        return True
    return not _fresh_event(value)


def _uses(node: cst.CSTNode, name: str) -> int:
    count, stack = 0, [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name) and n.value == name:
            count += 1
        elif isinstance(n, cst.Arg):
            stack.append(n.value)  # (not its keyword)
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)  # (not the attribute's name)
        else:
            stack.extend(children(n))
    return count


def _fresh_event(value: cst.BaseExpression | None) -> bool:
    """``torch.cuda.Event()`` / ``Event(enable_timing=False)``: an event no work has been recorded on."""
    if not isinstance(value, cst.Call):
        return False
    name = dotted(value.func)
    return name is not None and name.rsplit(".", 1)[-1] == "Event"


__all__ = ["handed_at_construction"]
