"""Host gradients and the CPU optimizer reading them: an optimizer's ``step()`` is a host read.

CPU-offloaded optimizers keep float32 master copies of the parameters in host memory and run a
``torch.optim`` optimizer over them on the host. Each step copies the device gradients into the masters'
``.grad`` (``master.grad.copy_(param.grad, non_blocking=True)``, the ``.grad`` made in the same function by a
``pin_memory=`` factory: page-locked host memory, filled asynchronously), then calls the host optimizer's
``step()``, which reads those gradients on the host at once. Nothing but a host synchronisation after the
copies (``torch.cuda.synchronize()``, the copy stream's or an event's ``synchronize()``) makes the bytes
arrive before the update reads them.

The copy's source is of unknown placement (a parameter's gradient handed in by the optimizer's
``param_groups``): a host source makes it a synchronous no-op, so its reads are reported less sure
(``HostReads.unplaced_host_copy``). The reader is a ``step()`` of a receiver every assignment of which (in the
function for a local, in the class for ``self.<f>``) constructs a ``torch.optim`` optimizer over the ``.grad``'s
owners: over what the owner's loop iterates, or over a local collection of a method that makes pinned host
tensors; an optimizer over a module's (device) parameters reads device gradients only. A blocking copy
(no ``non_blocking``), a ``.grad`` the function does not pin, or a step of anything else is not considered.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.values import State, TVal
from streamlint.model.placement import host_source, non_blocking, pinned_value
from streamlint.model.syntax import node_code
from streamlint.model.walk import children

_GRADS = "<host .grad>"  # the key in ``State.held`` of the pending host gradients this function made


class HostGradients:
    """Pending copies into host ``.grad`` slots and the host optimizer steps reading them (mixin of the
    interpreter). Interp state it uses: ``anchor``, ``cfile``, ``fn``, ``host_grads`` (sid -> name)."""

    def host_gradients(self, st: State, e: cst.Call) -> None:
        """A call the flow does not know as an API: the copy into a pinned host ``.grad``, or a host optimizer's
        ``step()``."""
        if self.cfg.mode not in ("eager", "cuda") or not isinstance(e.func, cst.Attribute):
            return
        if e.func.attr.value == "copy_" and non_blocking(e):
            self._grad_copy(st, e, e.func.value)
        elif e.func.attr.value == "step" and st.held.get(_GRADS):
            for sid in st.held[_GRADS]:
                S = st.stores.get(sid)
                if S is not None and S.d2h is not None and self._host_optimizer(e.func.value, self.host_grads.get(sid)):
                    self._consume(st, S.d2h, self.host_grads.get(sid, "grad"), f"`{self.cfile.code(e.func)}()`")

    def grad_slot(self, st: State, out: TVal) -> None:
        """``p.grad = p.grad.to("cpu", non_blocking=True)``: the statement stores the pending pinned copy ``out`` as
        a gradient (PyTorch accepts a host ``.grad`` only for a host tensor: ``p`` is updated on the host)."""
        node = self.anchor
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and pinned_value(node.value) \
                and isinstance(node.targets[0].target, cst.Attribute) and node.targets[0].target.attr.value == "grad":
            self.host_grads[out.sid] = self.cfile.code(node.targets[0].target)
            st.held[_GRADS] = tuple(dict.fromkeys(st.held.get(_GRADS, ()) + (out.sid,)))

    def _grad_copy(self, st: State, e: cst.Call, dest: cst.BaseExpression) -> None:
        """``master.grad.copy_(g, non_blocking=True)``: ``master.grad`` untracked by the flow, every assignment of
        it in this function (but ``None``) a ``pin_memory=`` factory; ``g`` not host memory."""
        if not (isinstance(dest, cst.Attribute) and dest.attr.value == "grad" and isinstance(dest.value, cst.Name)):
            return
        name = self.cfile.code(dest)
        if isinstance(st.env.get(name), TVal) or self.anchor is None:
            return
        values = [a.value for a in self.fn.assigns if a.target == name
                  and not (isinstance(a.value, cst.Name) and a.value.value == "None")]
        if not values or not all(_pinning_factory(v) for v in values):
            return
        src = next((a.value for a in e.args if a.keyword is None or a.keyword.value == "src"), None)
        if src is None or host_source(src, self.fn, None):
            return  # (host to host: synchronous)
        out = self.unplaced_host_copy(st, self.host_tensor(st))
        if st.stores.get(out.sid) is not None and st.stores[out.sid].d2h is not None:
            self.host_grads[out.sid] = name
            st.held[_GRADS] = tuple(dict.fromkeys(st.held.get(_GRADS, ()) + (out.sid,)))

    def _host_optimizer(self, recv: cst.BaseExpression, grad: str | None) -> bool:
        """Is ``recv`` (``self.inner``, ``opt``) a ``torch.optim`` optimizer over the owners of ``grad``
        (``master.grad``) wherever it is set? Over a module's parameters it reads device gradients only: it must
        be built over what the owner's loop iterates (``SGD(model.parameters())``, ``for p in
        self.model.parameters(): p.grad = p.grad.to("cpu", non_blocking=True)``), or over a local collection of
        the method that builds the optimizer, which makes page-locked host tensors (the masters)."""
        if isinstance(recv, cst.Name):
            values = [(v, self.fn) for v in self.fn.name_assigns.get(recv.value, [])]
        elif isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self":
            cls = self.cfile.classes.get(self.fn.class_name or "") if self.fn.class_name else None
            values = [(a.value, m) for m in (cls.methods.values() if cls else ()) for a in m.assigns
                      if a.target == f"self.{recv.attr.value}"]
        else:
            return False
        owner = grad[:-len(".grad")] if grad and grad.endswith(".grad") else None
        iters = _loop_sources(self.fn.node, owner) if owner else set()
        return bool(values) and all(isinstance(v, cst.Call) and self._optim_class(v)
                                    and self._over_owners(v, m, iters) for v, m in values)

    def _over_owners(self, call: cst.Call, m, iters: set[str]) -> bool:
        arg = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "params"), None)
        if arg is None:
            return False
        if _unself(self.cfile.code(arg)) in iters:
            return True
        return isinstance(arg, cst.Name) and arg.value in m.name_assigns and _makes_pinned(m.node)

    def _optim_class(self, call: cst.Call) -> bool:
        site = self.cfile.call_site(call)
        target = (site.target if site is not None else None) or dotted(call.func) or ""
        return target.startswith("torch.optim.") and target.count(".") == 2 and target[12:13].isupper()


def _pinning_factory(v: cst.BaseExpression) -> bool:
    """``torch.empty(shape, pin_memory=flag)`` with no ``device=``: host memory, page-locked unless ``flag`` is a
    literal ``False`` (a flag set when a device exists: the only case a device-to-host copy happens)."""
    if not isinstance(v, cst.Call):
        return False
    pin = next((a.value for a in v.args if a.keyword is not None and a.keyword.value == "pin_memory"), None)
    return pin is not None and not (isinstance(pin, cst.Name) and pin.value == "False") \
        and not any(a.keyword is not None and a.keyword.value == "device" for a in v.args)


def _unself(code: str) -> str:
    return code[5:] if code.startswith("self.") else code


def _loop_sources(fn: cst.FunctionDef, owner: str) -> set[str]:
    """The iterables (``self.`` dropped) of the loops of ``fn`` binding ``owner`` alone (``for p in X``)."""
    out: set[str] = set()
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == owner:
            out.add(_unself(node_code(node.iter)))
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) or node is fn:
            stack.extend(children(node))
    return out


def _makes_pinned(fn: cst.FunctionDef) -> bool:
    """Does ``fn`` make page-locked host memory (a ``pin_memory=`` factory with no ``device=``)?"""
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and _pinning_factory(node):
            return True
        stack.extend(children(node))
    return False
