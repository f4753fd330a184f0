"""Results of opaque callables made in a side-stream scope and handed back (mixin of
:class:`~streamlint.model.flow.interp.Interp`).

Schedulers and fork helpers run work they are handed as callables: ``results[i] = thunk()`` for each thunk of a
parameter list, each under ``with torch.cuda.stream(streams[i - 1]):``, ``out = fn(*args)`` under the side stream,
and hand the results back to their caller, whose join (or whose wait on nothing) decides whether the caller may
use them. The code that runs is the caller's choice and not read here, so the result is a value of unknown type:
nothing is produced on the side stream as far as the flow knows, and a deleted join before the return goes
unseen. What the scope produces includes that result when the function evidently hands it back (the bound name,
or the local list it is stored into or appended to, appears in a ``return`` / ``yield``): it is taken as device
data made on the scope's stream at the call (a new storage), so the hand-back check
(``HandOuts.unjoined_escape``) sees it. The finding rests on the callable doing device work: medium when the call
is handed device data (tracked device tensors, tensor-annotated parameters), low when nothing is known
(``thunk()``), as the interpreter's ``opaque_calls`` records for the statement (``Race.opaque``).

Only a call of an opaque callable handed no argument, or one that is not host data (a literal, a parameter
annotated with a host type: ``entry = log(name)``, ``name: str``, is host work): a parameter of the function (not ``self`` / ``cls``) or a name bound only as
the target of ``for`` loops over a parameter's contents (``for i, thunk in enumerate(thunks)``). Never a
library call or a builtin (``time.perf_counter()``, ``len``), a project function (inlined where it is read), a
method of a value, nor a value the flow already knows; and only at the function's own level (not in a helper
it inlines). ``out = fn(*inputs)`` handed tracked tensors and returned by name keeps its former reading
(:meth:`~streamlint.model.flow.listreads.ListReads.unknown_handed`, medium).
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal, State
from streamlint.model.hostannotations import host_param
from streamlint.model.streams import MAIN
from streamlint.model.syntax import local_nodes, node_memo, target_names
from streamlint.model.tensoruse import tensor_annotation
from streamlint.model.walk import children


def _handed_names(fn_node: cst.FunctionDef) -> frozenset[str]:
    """The names the function's ``return`` / ``yield`` values mention (not inside a call or a lambda)."""
    out: set[str] = set()
    for n in local_nodes(fn_node.body):
        value = n.value if isinstance(n, (cst.Return, cst.Yield)) else None
        stack = [value] if isinstance(value, cst.BaseExpression) else []
        while stack:
            x = stack.pop()
            if isinstance(x, cst.Name):
                out.add(x.value)
            elif not isinstance(x, (cst.Lambda, cst.Call)):
                stack.extend(children(x))  # (the shared walk: LibCST's .children rebuilds the node)
    return frozenset(out)


def _loop_callables(fn_node: cst.FunctionDef, params: frozenset[str]) -> frozenset[str]:
    """Names bound only as ``for`` targets over a parameter's contents (``for i, thunk in enumerate(thunks)``),
    never assigned otherwise in the function."""
    looped: set[str] = set()
    other: set[str] = set()
    for n in local_nodes(fn_node.body):
        if isinstance(n, cst.For):
            names = set(target_names(n.target))
            over = {x.value for x in [n.iter, *local_nodes(n.iter)] if isinstance(x, cst.Name)}
            (looped if over & params else other).update(names)
        elif isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.WithItem)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [
                n.asname.name if isinstance(n, cst.WithItem) and n.asname is not None else getattr(n, "target", None)]
            for t in targets:
                if t is not None:
                    other.update(target_names(t))
    return frozenset(looped - other)


def _host_params(fn) -> frozenset[str]:
    """The parameters of ``fn`` annotated with a host type (``name: str``, ``n: int``)."""
    p = fn.node.params
    return frozenset(q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params) if host_param(q))


def _tensor_params(fn) -> frozenset[str]:
    p = fn.node.params
    star = [p.star_arg] if isinstance(p.star_arg, cst.Param) else []
    return frozenset(q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params, *star)
                     if q.annotation is not None and tensor_annotation(q.annotation.annotation))


class OpaqueResults:
    """Interp state it uses: ``cfn``, ``depth``, ``default_key``, ``anchor``; it asks storage (op, tensors,
    is_host) and expressions (ev is not called: the call was evaluated already)."""

    def opaque_result(self, st: State, into: str, expr: cst.BaseExpression | None, v: object) -> object:
        """``v`` (the value of ``expr`` bound to, stored into or appended to the local ``into``), or a new storage
        made on the scope's stream when ``expr`` is a call of an opaque callable in a side-stream scope and the
        function hands ``into`` back (see the module docstring)."""
        if self.depth or not isinstance(expr, cst.Call) or st.cur in (MAIN, self.default_key) or len(st.stack) < 2 \
                or not (v is None or isinstance(v, KVal) and v.opaque) or self.tensors(st, v) \
                or not isinstance(expr.func, cst.Name):
            return v
        fn = self.cfn
        params = frozenset(p for p in fn.all_params if p not in ("self", "cls"))
        callee = expr.func.value
        if into not in node_memo("opaque_handed", fn.node, _handed_names):
            return v
        if callee not in params and callee not in node_memo("opaque_loops", fn.node, lambda n: _loop_callables(n, params)):
            return v
        host = _host_params(fn)
        if expr.args and all(isinstance(a.value, (cst.SimpleString, cst.FormattedString, cst.Integer, cst.Float))
                             or isinstance(a.value, cst.Name) and a.value.value in host for a in expr.args):
            return v  # (`entry = log(name)`, `name: str`: a callback handed host values only works on the host)
        device = any(isinstance(a.value, cst.Name) and (
            any(not self.is_host(st, tv) for tv in self.tensors(st, st.env.get(a.value.value)))
            or a.value.value in _tensor_params(fn)) for a in expr.args)
        tv = self.op(st, expr, [])
        if tv is None:
            return v
        self.__dict__.setdefault("opaque_calls", {})[id(self.anchor)] = "medium" if device else "low"
        return tv


__all__ = ["OpaqueResults"]
