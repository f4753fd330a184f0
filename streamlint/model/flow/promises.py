"""Where an event's promise goes (issue 16 §3): the event an expression names, followed through the objects
that carry it to its waiters.

A record class (a ``@dataclass``, a ``NamedTuple``, or a class whose ``__init__`` stores its parameters
as same-named fields) built with an event argument, ``ctx = StepEvents(done=events[layer][KEY])``, holds
that very event: ``ctx.done.record()`` records ``events[layer][KEY]``, the event the code elsewhere waits
on by the same key (``try_wait_event(layer, KEY)``, the next loop iteration). Naming it by its container
slot instead of by the local that carries it tells apart two events the code stores in successive objects
bound to the same name (a later ``ctx.done.record()`` of another key no longer hides an early record)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo
from streamlint.model.flow.results import EarlyRecord
from streamlint.model.flow.values import Access, EVal, KVal, State, SVal

if TYPE_CHECKING:
    from streamlint.model.project import Project

_RECORD_BASES = ("NamedTuple", "typing.NamedTuple")


def record_fields(project: Project, file: FileModel, call: cst.Call) -> frozenset[str]:
    """The keyword arguments of ``call`` that become same-named fields of the object it builds: ``call``
    builds a project record class (``@dataclass``, ``NamedTuple``, an ``__init__`` storing
    ``self.<p> = <p>``); empty otherwise."""
    keywords = frozenset(a.keyword.value for a in call.args if a.keyword is not None)
    if not keywords:
        return frozenset()
    site = file.call_site(call)
    if site is None or site.target is None:
        return frozenset()
    found = project.symbol(site.target, file)
    if found is None or not isinstance(found[0], ClassInfo):
        return frozenset()
    cls = found[0]
    decorators = [d.decorator for d in cls.node.decorators]
    names = {(d.func if isinstance(d, cst.Call) else d) for d in decorators}
    if any(isinstance(n, (cst.Name, cst.Attribute)) and (n.value if isinstance(n, cst.Name) else n.attr.value)
           == "dataclass" for n in names) or any(b.split(".")[-1] == "NamedTuple" for b in cls.bases):
        return keywords
    init = cls.methods.get("__init__")
    if init is None:
        return frozenset()
    stored = {a.target[5:] for a in init.assigns
              if a.target.startswith("self.") and isinstance(a.value, cst.Name) and a.value.value == a.target[5:]}
    return keywords & frozenset(stored)


def carried(v: object) -> bool:
    """A value worth carrying in a record object's field: an event, a stream, a named place (a container
    slot such as ``events[layer][KEY]``)."""
    return isinstance(v, (EVal, SVal)) or isinstance(v, KVal) and not v.key.startswith("<")


class Promises:
    """What the waiters of an event rely on (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``cfg``, ``early_records``, ``record_sites``, ``waited_events``. It asks orderings
    (caller_may_join)."""

    def relied_on(self, st: State, earlier: Access, s: str, gates: frozenset = frozenset()) -> None:
        """A race where stream ``s`` uses what ``earlier`` did on another stream, ``s`` being ordered after
        that stream only by waiting on an event recorded there before ``earlier``: the waiter evidently
        relies on work queued after the record, so the record is early (SL201 at the record). ``gates``: the
        race's (``Race.gates``), kept to drop the record with the race (``HostWrites.gated_handoff``)."""
        S = earlier.stream
        if earlier.node is None or S == s:
            return
        seen = st.know(s).get(S, -1)
        if seen < 0 or seen >= earlier.time:
            return
        for key, snap in st.events.items():
            site = self.record_sites.get((key, S, snap.get(S, -2)))
            if site is None or snap[S] != seen or key not in self.waited_events:
                continue
            node, label = site
            if id(node) not in self.early_records:
                self.early_records[id(node)] = EarlyRecord(node, label, S, earlier.node, self.cfg.mode,
                                                           self.caller_may_join(S))
                if gates:
                    self.early_gates[id(node)] = gates
            elif not gates:
                self.early_gates.pop(id(node), None)  # (also found by a race no hand-off gates)
            return


__all__ = ["Promises", "carried", "record_fields"]
