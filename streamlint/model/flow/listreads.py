"""Whole-list reads of a local list's elements (mixin of :class:`~streamlint.model.flow.interp.Interp`).

Multi-stream code often runs one piece of work per stream in a fork loop and collects the results in a local
list: ``for g, s in enumerate(streams): ... with torch.cuda.stream(s): outs.append(kernel(q[:, g]))``, then
reads them all at once after the join loop: ``torch.stack(outs)``, ``torch.cat([o[0] for o in outs])``. The
list is not a tensor, so without this the read after the join names no storage, and a join loop that leaves
a stream out (``streams[2:]`` for ``streams[1:]``), or a deleted join, goes unseen. The work is often done by
a callable the analysis cannot see into (a classmethod through ``cls``, a callback parameter): an unresolved
call handed tensors already reads them and produces its result on the stream current at the call
(outsidecalls.generic), so each appended element carries the stream of its own loop round (elements.py runs a loop
over a stream collection once per representative element).

What a local container holds is ``State.held`` (its name -> the storages put in it: ``outs.append(y)``,
``outs[i] = y``; syncops.py, control.py). Here, for a plain local name:

* a torch op taking a sequence of tensors (``torch.stack`` / ``cat`` / ``concat`` / ``concatenate`` /
  ``hstack`` / ``vstack`` / ``dstack``) handed that name reads every element it holds;
* a list / generator comprehension walking that name (``[o[0] for o in outs]``, one ``for`` clause, a plain
  target) evaluates its element once per held element, so the result is every element's value (a view of it,
  its part), which the op reading the comprehension then reads;
* a call's result of unknown type appended in a side-stream scope to a list the function reads whole that way
  (``outs.append(cls.apply_group(replace(inp, query=q)))``, the arguments records, not tensors) is taken as
  device data made on that stream (:meth:`ListReads.unknown_element`): its findings are medium
  (``Race.unknown``), and a comprehension calling a method of such an element (``[f.result() for f in futs]``)
  does not read it.

Only a list of device storages: one holding a host tensor too (a pending device-to-host copy, hostreads.py)
keeps the former reading, which reads every element on the host. Not after a join through a collection of
events (``for ev in events: main.wait_event(ev)``, :func:`_event_list_join`): which round's stream each event
was recorded on is not followed element by element, so the read stays silent. Nor an element made on a loop variable's stream that elements.py reads collapsed (a collection it does
not know element by element, ``[main] + [torch.cuda.Stream() for _ in range(n - 1)]``): which element a join loop
over a slice of it covers is not known there, so the read stays silent. Nothing else changes: ``len(outs)``, a loop statement over the list, or handing the list to another
call keep the former reading (a loop over the list is no read of its elements by itself)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.values import KVal, State, TupVal, TVal
from streamlint.model.hostresults import returns_host_values
from streamlint.model.streams import MAIN
from streamlint.model.syntax import local_nodes, node_memo, target_names
from streamlint.model.tensors import return_kind, tensor_method
from streamlint.model.tensoruse import tensor_annotation

SEQUENCE_OPS = frozenset({"stack", "cat", "concat", "concatenate", "hstack", "vstack", "dstack"})
_MAX_ELEMENTS = 8  # (a comprehension is evaluated once per element: bounded)


def _selection(elt: cst.BaseExpression) -> bool:
    """Is the comprehension element only a selection of its target (``o[0]``, ``o[1].lse``): no call in it?"""
    return not any(isinstance(n, cst.Call) for n in local_nodes(elt))


def _tensor_element(elt: cst.BaseExpression) -> bool:
    """Does the comprehension element call nothing but tensor methods and torch ops (``o.float()``,
    ``torch.flatten(o)``), not a method of another object (``f.result()``)?"""
    return all(isinstance(n.func, cst.Attribute) and tensor_method(n.func.attr.value)
               or (dotted(n.func) or "").startswith("torch.") for n in local_nodes(elt) if isinstance(n, cst.Call))


def _single_walk(e: cst.CSTNode) -> cst.Name | None:
    """The list name a one-clause comprehension with a plain target and a selection element walks."""
    if isinstance(e, (cst.ListComp, cst.GeneratorExp)) and e.for_in.inner_for_in is None and not e.for_in.ifs \
            and isinstance(e.for_in.target, cst.Name) and isinstance(e.for_in.iter, cst.Name) and _selection(e.elt):
        return e.for_in.iter
    return None


def _loop_names(fn_node: cst.CSTNode) -> frozenset[str]:
    """The names the function's ``for`` loops bind (a stream key that is one of them is a collapsed element)."""
    return node_memo("loop_names", fn_node, lambda n: frozenset(
        name for m in local_nodes(n) if isinstance(m, cst.For) for name in target_names(m.target)))


def _event_list_join(fn_node: cst.CSTNode) -> bool:
    """Does the function join through events held in a collection: a ``for`` loop waiting its own target
    (``for ev in events: main.wait_event(ev)`` / ``ev.wait(main)`` / ``ev.synchronize()``, or
    ``events[i]`` with ``i`` the target)? Which round's stream each event was recorded on is not followed
    element by element, so a whole-list read after such a join cannot tell a missing wait."""
    def waited(x: cst.BaseExpression, names: set[str]) -> bool:
        return isinstance(x, cst.Name) and x.value in names or isinstance(x, cst.Subscript) and any(
            isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.Name) and el.slice.value.value in names
            for el in x.slice)

    def joins(loop: cst.For) -> bool:
        names = set(target_names(loop.target))
        return any(isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and (
            c.func.attr.value == "wait_event" and any(waited(a.value, names) for a in c.args)
            or c.func.attr.value in ("wait", "synchronize") and waited(c.func.value, names))
            for c in local_nodes(loop.body))
    return any(isinstance(m, cst.For) and joins(m) for m in local_nodes(fn_node))


def _whole_reads(fn_node: cst.CSTNode) -> frozenset[str]:
    """The local names the function reads whole as tensors: handed to a sequence op (``torch.stack(outs)``,
    ``torch.cat([o[0] for o in outs])``, the comprehension a selection of its elements)."""
    out = set()
    for n in local_nodes(fn_node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in SEQUENCE_OPS \
                and n.args and n.args[0].keyword is None and not n.args[0].star:
            first = n.args[0].value
            walked = first if isinstance(first, cst.Name) else _single_walk(first)
            if walked is not None:
                out.add(walked.value)
    return frozenset(out)


def _tensor_params(fn) -> frozenset[str]:
    """The parameters of ``fn`` annotated as tensors (``x: torch.Tensor``, ``*inputs: torch.Tensor``)."""
    p = fn.node.params
    star = [p.star_arg] if isinstance(p.star_arg, cst.Param) else []
    return frozenset(q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params, *star)
                     if q.annotation is not None and tensor_annotation(q.annotation.annotation))


class ListReads:
    """Interp state it uses: ``cfile``, ``cfn``, ``project``, ``default_key``, ``unknown_results``. It asks
    storage (new_tensor, is_host, op, tensors) and expressions (ev)."""

    def held_elements(self, st: State, e: cst.BaseExpression) -> list[TVal] | None:
        """The device tensors the local list named by ``e`` holds (one value per storage put in it), else [];
        None when it holds a host tensor too (a pending device-to-host copy: the former reading reads it)."""
        if not isinstance(e, cst.Name) or isinstance(st.env.get(e.value), TVal) or e.value not in st.env \
                or node_memo("event_list_join", self.cfn.node, _event_list_join):
            return []  # (joined through a list of events: which element each event covers is not followed)
        out = []
        for sid in st.held.get(e.value, ())[-_MAX_ELEMENTS:]:
            S = st.stores.get(sid)
            if S is None or S.last_write is not None and S.last_write.stream in _loop_names(self.cfn.node):
                continue  # made on a loop variable's stream read collapsed ("some element": elements.py): which
                # element a join loop over a slice covers is unknown there (`[main] + [Stream() ...]`)
            if S.name is None:
                S.name = f"{e.value}[...]"  # (named after its list in a finding)
            tv = self.new_tensor(st, sid)
            if self.is_host(st, tv):
                return None
            out.append(tv)
        return out

    def unknown_element(self, st: State, into: cst.BaseExpression, expr: cst.BaseExpression, v: object) -> object:
        """``outs.append(cls.apply_group(replace(inp, query=q)))`` inside a side-stream scope: the result of a call
        handed no tracked tensor (its arguments are records of unknown type) is taken as device data produced on
        that stream at the call, so the whole-list reads after the join see it (their findings are medium: the
        result's type is assumed, ``Race.unknown``). Only a call of the function's own parameters / ``self`` /
        ``cls`` (a callback, a method the concrete class defines) or of a project function whose declared
        result may be a tensor; never a library call (``time.perf_counter()``), a host builtin (``len``), a
        project function declaring or building a host result, nor a value the flow already knows; and only into a
        list ``into`` the function reads whole as tensors (:func:`_whole_reads`), not a list of futures it
        returns or calls methods on."""
        if not isinstance(expr, cst.Call) or st.cur in (MAIN, self.default_key) or len(st.stack) < 2 \
                or not (v is None or isinstance(v, KVal) and v.opaque) or self.tensors(st, v) \
                or not isinstance(into, cst.Name) or into.value not in node_memo("whole_reads", self.cfn.node,
                                                                                  _whole_reads):
            return v  # (only a list the function reads whole as tensors: not a list of futures or handles)
        site = self.cfile.call_site(expr)
        found = self.project.call_target(self.cfile, site) if site is not None else None
        if found is None and isinstance(expr.func, cst.Attribute) and isinstance(expr.func.value, cst.Name) \
                and expr.func.value.value in ("self", "cls") and self.cfn.class_name in self.cfile.classes:
            own = self.cfile.classes[self.cfn.class_name].methods.get(expr.func.attr.value)
            found = (own, self.cfile) if own is not None else None  # `cls.host_stat(inp) -> int`: the class's own
        if found is not None:
            fn, module = found
            returns = fn.node.returns
            if return_kind(module, fn) is not None or fn.yields or (returns is None and returns_host_values(fn)) \
                    or returns is not None and not tensor_annotation(returns.annotation):
                return v
        elif (dotted(expr.func) or "").split(".", 1)[0] not in self.cfn.all_params:
            return v  # (a library call or a builtin: nothing says it makes device data)
        tv = self.op(st, expr, [])
        if tv is not None:
            self.unknown_results.add(tv.sid)
            return tv
        return v

    def unknown_handed(self, st: State, name: str, expr: cst.BaseExpression, v: object) -> object:
        """``output = fn(*inputs)`` inside a side-stream scope, ``fn`` a parameter of the function (a callback) handed
        tracked or tensor-annotated tensors, ``output`` a bare name the function returns or yields: the callback's
        result is taken as device data made on that stream at the call (its findings are medium, ``Race.unknown``),
        so handing it back unjoined is a join escape (``HandOuts.unjoined_escape``)."""
        if not isinstance(expr, cst.Call) or st.cur in (MAIN, self.default_key) or len(st.stack) < 2 \
                or not (v is None or isinstance(v, KVal) and v.opaque) or self.tensors(st, v) \
                or not isinstance(expr.func, cst.Name) or expr.func.value not in self.cfn.all_params \
                or not any(isinstance(a.value, cst.Name) and (self.tensors(st, st.env.get(a.value.value))
                                                               or a.value.value in _tensor_params(self.cfn))
                           for a in expr.args):
            return v
        handed = [r.value for r in self.cfn.returns] + [y.value for y in self.cfn.yields]
        if not any(isinstance(h, cst.Name) and h.value == name for h in handed):
            return v
        tv = self.op(st, expr, [])
        if tv is not None:
            self.unknown_results.add(tv.sid)
            return tv
        return v

    def sequence_op_reads(self, st: State, e: cst.Call, name: str | None) -> TupVal | None:
        """``torch.stack(outs)``: the elements of the local list handed as the first argument, else None."""
        if name not in SEQUENCE_OPS or not e.args or e.args[0].keyword is not None or e.args[0].star:
            return None
        held = self.held_elements(st, e.args[0].value)
        return TupVal(tuple(held)) if held else None  # (a host tensor in it: no device sequence op)

    def comprehension_over_held(self, st: State, e) -> TupVal | None:
        """``[o[0] for o in outs]`` over a local list holding device tensors: the element expression's value
        for each of them (None when the comprehension is not that shape or gives no tensor)."""
        f = e.for_in
        if f.inner_for_in is not None or not isinstance(f.target, cst.Name) or f.ifs \
                or not isinstance(e, (cst.ListComp, cst.GeneratorExp)):
            return None
        if not _tensor_element(e.elt):
            return None  # (`[f.result() for f in futures]`: a method of another object, not a tensor read)
        held = self.held_elements(st, f.iter)
        if held is None:
            return None  # a held host copy: the former comprehension path reads every element (hostreads.py)
        if not _selection(e.elt):  # (a call on an element of unknown type is not assumed a tensor op)
            held = [tv for tv in held if tv.sid not in self.unknown_results]
        if not held:
            return None
        name = f.target.value
        saved, saved_held = dict(st.env), dict(st.held)
        values = []
        try:
            for tv in held:
                st.env[name] = tv
                st.held.pop(name, None)
                v = self.ev(st, e.elt)
                values.extend(self.tensors(st, v))
        finally:
            st.env, st.held = saved, saved_held
        return TupVal(tuple(values)) if values else None


__all__ = ["ListReads", "SEQUENCE_OPS"]
