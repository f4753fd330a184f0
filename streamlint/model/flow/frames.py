"""Name-keyed state of one frame: the containers an inlined helper's names denote.

``State.held`` maps a local container's name to the storages put in its slots (``outs.append(host)``,
``state["scale"] = host``; hostreads.py, control.py). A name is a frame's own: when the flow inlines a project
helper, the helper's ``staged`` is not the caller's ``staged``, nor the ``staged`` of another helper inlined
before it (two helpers with same-named locals, one filling its list with pending device-to-host copies and
another reading its parameter's elements on the host, are two different lists). So the helper starts with the
containers the caller handed it, under its parameter names (``gather(xs, outs)``: the helper's ``dst`` is the
caller's ``outs``), and when it returns the caller gets its own names back, plus what the helper put in the
containers it was handed. Keys that are no Python name (``"<host .grad>"``: a function's pending host gradients,
hostgrads.py) are the analysed function's, whatever frame adds to them.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.syntax import local_nodes, node_memo, target_names


def _frame_local(key: str) -> bool:
    return key.isidentifier()


class FrameContainers:
    """The caller's containers while an inlined helper runs (:func:`frame_containers`)."""

    def __init__(self, caller: dict, handed: dict[str, str]):
        self.caller = caller  # the caller's ``held``
        self.handed = handed  # helper parameter -> the caller's name it is bound to

    def leave(self, inner: dict) -> dict:
        """The caller's ``held`` when the helper returns (``inner``: the helper's at its end)."""
        out = dict(self.caller)
        for key, sids in inner.items():
            if not _frame_local(key):
                out[key] = sids
        for param, name in self.handed.items():
            if param in inner:  # what the helper put in the caller's container
                out[name] = tuple(dict.fromkeys(out.get(name, ()) + inner[param]))
        return out


def frame_containers(st, bound: dict, env: dict, fn_node: cst.FunctionDef) -> FrameContainers:
    """Switch ``st.held`` to the frame of a helper (``fn_node``) about to run inline: its parameters (names in
    ``env``) bound to a caller's name (``bound``: parameter -> argument expression) hold what that container
    holds; the caller's other names are not the helper's. What the helper puts in such a parameter goes back to
    the caller's container, unless the helper rebinds the parameter (``dst = list(dst)``: another list).
    Returns the caller's frame, to :meth:`FrameContainers.leave`."""
    names = {p: expr.value for p, expr in bound.items() if p in env and isinstance(expr, cst.Name)}
    caller = st.held
    st.held = {k: v for k, v in caller.items() if not _frame_local(k)}
    st.held.update({p: caller[name] for p, name in names.items() if name in caller})
    rebound = node_memo("rebound_names", fn_node, _rebound) if names else set()
    return FrameContainers(caller, {p: name for p, name in names.items() if p not in rebound})


def _rebound(fn_node: cst.FunctionDef) -> frozenset[str]:
    """The names the function's body binds to another object (assignments, ``for`` / ``with`` targets), nested
    definitions aside. Not a rebinding: ``dst += [...]`` (a list is extended in place), and the optional-output
    idiom, an assignment made only when the parameter is ``None`` (``if out is None: out = []``, ``out = out if
    out is not None else []``): a list the caller handed is kept. ``out = out or []`` is one: a caller's empty
    list is falsy, so the helper fills a new one."""
    out: set[str] = set()
    kept = {id(a) for n in local_nodes(fn_node.body) if isinstance(n, cst.If) and _none_test(n.test, True)
            for a in local_nodes(n.body) if isinstance(a, cst.Assign)
            and all(target_names(t.target) == [_none_test(n.test, True)] for t in a.targets)}
    for n in local_nodes(fn_node.body):
        if isinstance(n, cst.Assign) and id(n) not in kept:
            out.update(name for t in n.targets for name in target_names(t.target)
                       if not _keeps(name, n.value))
        elif isinstance(n, (cst.AnnAssign, cst.For)):
            out.update(target_names(n.target))
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            out.update(target_names(n.asname.name))
    return frozenset(out)


def _none_test(test: cst.BaseExpression, is_none: bool) -> str | None:
    """The name ``p`` of a test ``p is None`` (``is_none``) or ``p is not None`` (not ``is_none``)."""
    if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1:
        c = test.comparisons[0]
        if isinstance(c.operator, cst.Is if is_none else cst.IsNot) and isinstance(c.comparator, cst.Name) \
                and c.comparator.value == "None":
            return test.left.value
    return None


def _keeps(name: str, value: cst.BaseExpression) -> bool:
    """Is ``name = value`` the parameter itself unless it is ``None`` (``p if p is not None else []``)?"""
    if isinstance(value, cst.IfExp):
        return (_none_test(value.test, False) == name and isinstance(value.body, cst.Name)
                and value.body.value == name) or (_none_test(value.test, True) == name
                                                  and isinstance(value.orelse, cst.Name) and value.orelse.value == name)
    return isinstance(value, cst.Name) and value.value == name


def returned_container(fn, held: dict, stores: dict) -> tuple[int, ...]:
    """The device storages an inlined helper hands back in the local container it returns (``return outs``, the
    same name at every return): the caller's name bound to the call then holds them (``outs = self.gather(parts)``,
    then ``torch.cat(outs)``: listreads.py), as the helper's own name did; ``held`` is the helper's frame at its end.
    Not host memory a pending copy fills: the helper's hand-back of that is its own finding (hostreads.mark_exit)."""
    names = {r.value.value if isinstance(r.value, cst.Name) else None for r in fn.returns}
    if len(names) != 1 or None in names:
        return ()
    return tuple(sid for sid in held.get(next(iter(names)), ())
                 if (S := stores.get(sid)) is not None and S.kind != "host" and S.d2h is None)
