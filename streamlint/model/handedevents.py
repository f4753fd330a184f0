"""Is an event a class waits on handed to it at construction (issue 16, [constructor-field-event])?

A wait on ``self.<attr>`` that nothing in the class records orders nothing -- unless the object is given the
event by whoever constructs it: a dataclass / NamedTuple field with no default, or ``self.done = done`` from an
``__init__`` parameter (:func:`~streamlint.model.attrstreams.attr_origin` says "handed"; "unseen" when a base
class outside the project may define it). The constructor's caller then records it
(``StepResult(done=stream.record_event())``, an event a helper returned after queuing its work), and the class
not recording it is no evidence of anything. The wait stays ineffective only where the project shows every
construction naming the field handing it a just-made ``Event()`` (and nothing records it through the object,
which :func:`~streamlint.model.waits.event_recorded_elsewhere` asks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.attrstreams import attr_origin
from streamlint.model.file import ClassInfo, FileModel, dotted

if TYPE_CHECKING:
    from streamlint.model.project import Project


def handed_at_construction(project: Project, file: FileModel, cls: ClassInfo | None, attr: str) -> bool:
    """Does ``self.<attr>`` of ``cls`` hold what the object's constructor was given (or what a base class
    outside the project sets), with no construction in the project known to give it a fresh event?"""
    if cls is None:
        return False
    origin = attr_origin(project, file, cls, attr)
    if origin == "unseen":
        return True
    if origin != "handed":
        return False
    values = list(_constructed_with(project, cls, attr))
    return not values or not all(_fresh_event(v) for v in values)


def _constructed_with(project: Project, cls: ClassInfo, attr: str):
    """The expressions the project's constructions of ``cls`` give the field ``attr`` by keyword; None for a
    construction that may give it positionally or through ``**kwargs`` (its value unknown)."""
    for model in project.files_containing((f"{cls.name}(".encode(),)):
        for site in model.calls:
            if site.target is None or site.target.rsplit(".", 1)[-1] != cls.name:
                continue
            found = project.symbol(site.target, model)
            if found is None or found[0] is not cls:
                continue
            given = next((a.value for a in site.node.args if a.keyword is not None and a.keyword.value == attr), None)
            if given is not None:
                yield given
            elif any(a.keyword is None for a in site.node.args):
                yield None


def _fresh_event(value: cst.BaseExpression | None) -> bool:
    """``torch.cuda.Event()`` / ``Event(enable_timing=False)``: an event no work has been recorded on."""
    if not isinstance(value, cst.Call):
        return False
    name = dotted(value.func)
    return name is not None and name.rsplit(".", 1)[-1] == "Event"


__all__ = ["handed_at_construction"]
