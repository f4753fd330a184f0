"""A helper that hands back one of its arguments or a view of it (``y = self._lora_a_input(x, route)``):
its result is that argument's storage, not a fresh tensor of the call."""

from __future__ import annotations

from streamlint._lazy import cst

from streamlint.model.flow.calls import returned_argument
from streamlint.model.flow.metaonly import view_only
from streamlint.model.flow.values import KVal, State, TVal
from streamlint.model.uses import bind_arguments


class HandedBack:
    """The interpreter's reading of a helper that hands back (a view of) one of its arguments."""

    def handed_back(self, st: State, e: cst.Call, site) -> TVal | None:
        """``y = self._lora_a_input(x, route)``, the helper returning ``x`` or a view of it: a view of the argument."""
        found = self.project.call_target(self.cfile, site)
        param = returned_argument(self.project, found[0]) if found is not None else None
        if param is None:
            return None
        fn = found[0]
        params = fn.params[1:] if fn.class_name and fn.params[:1] in (("self",), ("cls",)) and isinstance(
            e.func, cst.Attribute) else fn.params
        expr = bind_arguments(params + fn.kwonly, e, kwonly=fn.kwonly).get(param)
        v = self.ev(st, expr) if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)) else None
        viewed, expr_value = view_only(fn, param), v
        if isinstance(v, KVal) and viewed and not self.kind_of(st, v):
            # a view of a place (`SLOTS[i]`, `self.staging`): that place's storage, no fresh tensor of the call
            v = next(iter(self.tensors(st, v)), None)
        if not isinstance(v, TVal):
            return None
        _, reads, writes = self.call_args(st, e)
        if viewed:  # taking a view of the argument queues no kernel: no read of it
            reads = [x for x in reads if not (isinstance(x, (TVal, KVal)) and x == expr_value)]
        if any(self.tensors(st, x) for x in reads + writes):
            self.op(st, e, reads, writes, result=False)  # what the helper reads and writes, on this stream
        return self.new_tensor(st, v.sid, v.vid)
