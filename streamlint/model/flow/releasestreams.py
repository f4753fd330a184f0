"""Release streams: an object that keeps "the stream that last used its buffers" (issue 16, [cross-method]).

A streamer recycling device slots marks a slot free in one method: it records the slot's buffers on the current
stream (``for t in slot.pages.values(): t.record_stream(cur)``) and stores that stream on the slot
(``slot.freed_on = cur``). Another method refills the slot later on a copy stream: the refill overwrites memory
the releasing stream may still be reading, so the copy stream must first wait on the stored stream
(``copy.wait_stream(slot.freed_on)``). Neither method alone shows the write-after-read.

:func:`release_facts` finds the protocol per file: a store ``X.R = s`` (``X`` a name or ``self``) in a function
that binds ``s`` to the current stream (``torch.cuda.current_stream()``, directly or through a local bound once)
and records an attribute ``X.F`` of the same object on ``s`` before the store (``X.F.record_stream(s)``, or a loop
variable over ``X.F`` / ``X.F.values()``). The object's class is the one class of the file whose methods store
``self.R`` and ``self.F`` (the holder's annotation, when it has one, must name it).

:func:`seed_releases` seeds another function of the file that writes ``H.F`` of a holder ``H`` of that class: at
its entry the buffer ``H.F`` was last read on the current stream (the releasing method's, which is what the stored
stream is), and a wait on ``H.R`` is a wait on that stream (``st.same``), so a side-stream write with no wait on it
(nor a fork from the current stream, nor a device synchronisation) is a write-after-read (SL201). MEDIUM when the
writer itself mentions ``H.R`` (it tests or clears the release stream: it follows the protocol but skips the
wait), LOW otherwise (the slot it refills may never have been released)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.flow.values import Access
from streamlint.model.streams import MAIN, derived
from streamlint.model.syntax import call_name, local_nodes, param_named

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project


@dataclass(frozen=True)
class ReleaseFact:
    cls: str  # the holder's class
    stream: str  # ``R``: the field keeping the releasing stream
    buffers: tuple[str, ...]  # ``F``: the fields recorded on it
    releaser: FunctionInfo
    node: cst.CSTNode  # the store of the stream


def release_facts(project: Project, file: FileModel) -> list[ReleaseFact]:
    memo = derived(project, "release_facts")
    key = id(file)
    if key not in memo:
        memo[key] = _facts(file)
    return memo[key]


def _current_stream(fn: FunctionInfo, value: cst.BaseExpression, depth: int = 0) -> bool:
    if isinstance(value, cst.Name):
        values = fn.name_assigns.get(value.value, ())
        return depth < 2 and len(values) == 1 and _current_stream(fn, values[0], depth + 1)
    return isinstance(value, cst.Call) and (call_name(value) or "").rsplit(".", 1)[-1] == "current_stream"


def _holder_classes(file: FileModel, stream: str, buffer: str) -> list[str]:
    out = []
    for cls in file.classes.values():
        stored = {a.target for m in cls.methods.values() for a in m.assigns}
        if f"self.{stream}" in stored and f"self.{buffer}" in stored:
            out.append(cls.name)
    return out


def _recorded_fields(file: FileModel, fn: FunctionInfo, holder: str, stream: cst.BaseExpression,
                     before: cst.CSTNode) -> set[str]:
    """Fields ``F`` of ``holder`` recorded on ``stream`` in ``fn`` (``holder.F.record_stream(s)``, or a loop variable
    over ``holder.F`` / ``holder.F.values()``)."""
    want = file.code(stream)
    loops: dict[str, str] = {}
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.For) and isinstance(n.target, cst.Name):
            m = re.fullmatch(rf"{re.escape(holder)}\.(\w+)(?:\.values\(\))?", file.code(n.iter).replace(" ", ""))
            if m:
                loops[n.target.value] = m.group(1)
    out: set[str] = set()
    for site in fn.calls:
        call = site.node
        if site.method != "record_stream" or len(call.args) != 1 or file.code(call.args[0].value) != want \
                or not isinstance(call.func, cst.Attribute) or file.span(call).start_line > file.span(before).start_line:
            continue
        recv = file.code(call.func.value).replace(" ", "")
        if recv in loops:
            out.add(loops[recv])
        elif (m := re.match(rf"{re.escape(holder)}\.(\w+)\b", recv)) is not None:
            out.add(m.group(1))
    return out


def _facts(file: FileModel) -> list[ReleaseFact]:
    out: list[ReleaseFact] = []
    for fn in file.functions.values():
        for a in fn.assigns:
            parts = a.target.split(".")
            if a.function is not fn or len(parts) != 2 or not all(p.isidentifier() for p in parts) \
                    or not _current_stream(fn, a.value):
                continue
            holder, stream = parts
            fields = _recorded_fields(file, fn, holder, a.value, a.node) - {stream}
            for buffer in sorted(fields):
                if holder == "self":
                    classes = [fn.class_name] if fn.class_name else []
                elif (named := _annotation(fn, holder)) is not None:
                    classes = [c for c in _holder_classes(file, stream, buffer) if c == named]
                else:
                    classes = _holder_classes(file, stream, buffer)
                if len(classes) == 1:
                    out.append(ReleaseFact(classes[0], stream, (buffer,), fn, a.node))
    return out


def _annotation(fn: FunctionInfo, name: str) -> str | None:
    """The class name parameter ``name`` is annotated with (``""`` for another annotation, None for none)."""
    param = param_named(fn.node, name)
    ann = param.annotation.annotation if param is not None and param.annotation is not None else None
    return None if ann is None else ann.value if isinstance(ann, cst.Name) \
        else ann.attr.value if isinstance(ann, cst.Attribute) else ""


def writer_holders(file: FileModel, fn: FunctionInfo, fact: ReleaseFact) -> list[tuple[str, str]]:
    """The holders ``H`` of ``fact``'s class ``fn`` mentions ``H.F`` of, with that field: ``self`` in a method of
    the class, or a parameter / local of ``fn`` (annotated with the class when annotated at all)."""
    if fn is fact.releaser:
        return []
    text = file.code(fn.node.body)
    out: list[tuple[str, str]] = []
    for buffer in fact.buffers:
        for holder in sorted(set(re.findall(rf"(?<![\w.])(\w+)\.{re.escape(buffer)}\b", text))):
            if holder == "self":
                if fn.class_name != fact.cls:
                    continue
            elif holder in fn.all_params:
                if _annotation(fn, holder) not in (None, fact.cls):
                    continue
            elif holder not in fn.locals and holder not in fn.name_assigns:
                continue
            out.append((holder, buffer))
    return out


def seed_releases(interp, st) -> None:
    """At a writer's entry: each released buffer of a holder it mentions last read on the current stream, and the
    holder's release stream that very stream."""
    if interp.cfg.mode not in ("eager", "cuda"):
        return
    for fact in release_facts(interp.project, interp.file):
        for holder, buffer in writer_holders(interp.file, interp.fn, fact):
            place = f"{holder}.{buffer}"
            if place in st.long:
                continue
            t = interp.tick()
            S = interp.new_storage(st, "long", MAIN, place, None)
            S.reads.append(Access(MAIN, t, fact.node))
            st.long[place] = S.sid
            st.same[f"{holder}.{fact.stream}"] = MAIN
            mentions = re.search(rf"(?<![\w.]){re.escape(holder)}\.{re.escape(fact.stream)}\b",
                                 interp.file.code(interp.fn.node.body)) is not None
            interp.__dict__.setdefault("release_sources", {})[S.sid] = (
                fact.releaser.node.name.value, f"{holder}.{fact.stream}", mentions)
            interp.__dict__.setdefault("release_reads", {}).setdefault(f"{holder}.{fact.stream}", []).append(
                (S.sid, t))


class ReleaseTests:
    """Mixin of :class:`~streamlint.model.flow.interp.Interp`: the None test of a release stream."""

    def release_test(self, st, test: cst.BaseExpression, outcome: bool) -> None:
        """``if slot.freed_on is not None:`` (or a local bound to it, or a truth test): on the path where the release
        stream is None the slot was not released, so the read seeded for its buffers is not pending there."""
        reads = self.__dict__.get("release_reads")
        if not reads:
            return
        negate = False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, not negate
        operand, none_when = test, False  # (a truth test: None is false)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None" \
                and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)):
            operand, none_when = test.left, isinstance(test.comparisons[0].operator, cst.Is)
        if not isinstance(operand, (cst.Name, cst.Attribute)):
            return
        seeded = reads.get(self.render(st, operand))
        if not seeded or (outcome != negate) != none_when:
            return
        for sid, t in seeded:  # the path where it is None
            S = st.stores.get(sid)
            if S is not None:
                S.reads = [r for r in S.reads if not (r.stream == MAIN and r.time == t)]


__all__ = ["ReleaseFact", "release_facts", "ReleaseTests", "seed_releases", "writer_holders"]
