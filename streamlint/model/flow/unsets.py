"""Frees the dataflow sees only through their effect: an attribute rebound, a helper or closure that frees.

``p.grad = None`` drops the tensor the attribute held; when this function used that attribute place as a tensor on a
side stream (a tensor-only method on it, an argument of one or of a torch op: :func:`tensor_chains`, noted by
:meth:`~streamlint.model.flow.storage.Storages.note_loose_uses`), the rebinding frees it into the pool of the caller's
current stream, like ``untyped_storage().resize_(0)`` (:meth:`Unsets.unset_place`). A call of a helper / closure
whose body frees storage (:mod:`~streamlint.model.freeing`) frees the arguments / captured names at the call
(:meth:`Unsets.callee_frees`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.flow.results import Lifetime
from streamlint.model.flow.values import Access, KVal, TupVal, TVal
from streamlint.model.freeing import bound_arguments, closure_captures_freed, freed_names, helper_of
from streamlint.model.streams import MAIN
from streamlint.model.syntax import local_nodes
from streamlint.model.tensors import torch_returns_tensor
from streamlint.model.tensorvocab import META_ATTRS
from streamlint.model.tensoruse import tensor_only_method

if TYPE_CHECKING:
    from streamlint.model.flow.values import State


class Unsets:
    """Attribute rebindings and callee frees (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``anchor``, ``cfile``, ``cfn``, ``depth``, ``fn``, ``project``; it asks storages (``free``,
    ``free_untracked``, ``tensors``, ``tick``)."""

    def note_loose_uses(self, st: State, node: cst.CSTNode) -> None:
        """On a side stream, a statement that hands a value of untracked type to a call (``fn(*inputs)``,
        ``grad_fn(out, grads)``, ``[f(e) for e in inputs]``) uses what it holds there: remember it by name,
        in case its tensors are freed explicitly later
        (:meth:`~streamlint.model.flow.storage.Storages.free_untracked`)."""
        if st.cur == MAIN or self.depth:
            return
        for name in _argument_names(node):
            v = st.env.get(name)
            if v is None or isinstance(v, KVal) and v.opaque:
                st.loose_uses.setdefault(name, []).append(Access(st.cur, self.tick(), node, label=name))
        for chain in tensor_chains(self.cfile, node):  # (an attribute place: storage dropped by unset_place)
            st.loose_uses.setdefault(chain, []).append(Access(st.cur, self.tick(), node, label=chain))

    def loose_record(self, st: State, name: str, stream: str) -> None:
        st.loose_rec[name] = st.loose_rec.get(name, frozenset()) | {stream}

    def forget_places(self, st: State, name: str) -> None:
        """``name`` is rebound: the attribute places of the object it held are not the new object's."""
        if st.loose_uses or st.loose_rec:
            for chain in [k for k in (*st.loose_uses, *st.loose_rec) if k.startswith(name + ".")]:
                st.loose_uses.pop(chain, None)
                st.loose_rec.pop(chain, None)

    def callee_frees(self, st: State, e: cst.Call) -> None:
        """A call of a helper that frees storage with ``resize_(0)`` (``_free_storage(bucket)``,
        ``self._release(t)``), or of a closure defined here that frees a name it captures (``release()``):
        the free happens at this call (:mod:`~streamlint.model.freeing`), like the ``resize_(0)`` itself."""
        if self.depth or self.anchor is None or not (isinstance(e.func, cst.Name) or any(
                isinstance(a.value, cst.Name) for a in e.args)):
            return
        found = helper_of(self.project, self.cfile, self.cfn, e)
        if found is None:
            return
        callee, mod = found
        if callee.parent is self.cfn and mod is self.cfile:  # a closure: the names of this function it frees
            names = sorted(closure_captures_freed(self.project, mod, callee))
        else:
            freed = freed_names(self.project, mod, callee) & set(callee.all_params)
            names = [expr.value for param, expr in bound_arguments(callee, e).items()
                     if param in freed and isinstance(expr, cst.Name)] if freed else []
        for name in names:
            v = st.env.get(name)
            held = self.tensors(st, v) if isinstance(v, (TVal, TupVal)) else []
            if held:
                self.tick()  # a free, no kernel
                for tv in held:
                    self.free(st, tv.sid, "resize_(0)", self.anchor, force=True)
            self.free_untracked(st, name)  # (and what a loop over it used: `for t in inputs: all_reduce(t)`)

    def unset_place(self, st: State, target: cst.BaseExpression, value: cst.CSTNode | None = None) -> None:
        """``p.grad = None`` / ``req.kv = other`` / ``del p.grad``: the attribute of an object handed in (or made
        here) drops the tensor it held. When this function used that tensor on a side stream (a value of untracked
        type it passed to an op there: :meth:`note_loose_uses`), the attribute was its last owner the function sees,
        so the rebinding frees it into the pool of the caller's current stream, like ``resize_(0)``
        (:meth:`free_untracked`). Not a field of ``self`` (persistent state the class reuses; its drops are judged by
        the held-field analysis, records.py), and silent when the function keeps the tensor in another object or
        container slot (the field keeps another owner); at a lower confidence when it keeps it in a local, a local
        container, or hands it back (``"unset-shared"``). Not when the new value is made from the old one
        (``t.data = t.data.view(shape)`` may share its storage)."""
        key = dotted_chain(target)
        if key is None or key.startswith("self.") or "." not in key or key not in st.loose_uses:
            return
        if value is not None and (any(dotted_chain(n) == key for n in local_nodes(value)) or isinstance(
                value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString))):
            return  # (made from the old value; or a host literal: `bucket.elements = 0` held a count)
        kept = kept_elsewhere(self.fn.node, key)
        owners = () if kept is True or self.depth else tuple(
            n for n in storage_owners(self.cfile, self.fn.node, key, self.cfile.span(target).start_line) if n in st.env)
        if owners:  # a local sharing the storage keeps it: the free comes when the last of them dies (at the end)
            st.kept_frees.append((key, tuple(st.loose_uses.get(key, ())), owners, st.loose_rec.get(key, frozenset())))
        elif kept is not True:
            self.free_untracked(st, key, "unset-shared" if kept else "unset")
        for name in [n for n in st.loose_uses if n == key or n.startswith(key + ".")]:
            st.loose_uses.pop(name, None)  # (the attribute holds a new object from here)
            st.loose_rec.pop(name, None)


    def owners_end(self, st: State) -> None:
        """At a function exit: the attributes rebound while a local shared their storage
        (:func:`storage_owners`) free it now, when those locals die. A use on another stream that is neither
        recorded there (on the attribute before the rebinding, on a local after it: ``orig.record_stream(s)``)
        nor joined by the current stream since is the lifetime hazard, reported under the last owner's name."""
        know = st.know(MAIN)
        for key, uses, owners, recorded in st.kept_frees:
            for name in owners:
                recorded |= st.loose_rec.get(name, frozenset()) | st.loose_rec.get(f"{name}.data", frozenset())
                held = st.env.get(name)
                for tv in self.tensors(st, held) if isinstance(held, (TVal, TupVal)) else ():
                    recorded |= st.stores[tv.sid].recorded if tv.sid in st.stores else set()
            late = next((u for u in sorted(uses, key=lambda a: a.time) if u.node is not None and u.stream != MAIN
                         and u.stream not in recorded and know.get(u.stream, -1) < u.time), None)
            if late is not None and (id(late.node), key) not in self.lifetimes:
                self.lifetimes[(id(late.node), key)] = Lifetime(late.node, owners[-1], MAIN, late.stream,
                                                                "function end", None, False, self.cfg.mode)

    def rebind_storage(self, st: State, e: cst.Call, tv: TVal) -> TVal:
        """``t.set_(src.untyped_storage(), ...)`` / ``t.set_(src)``: no kernel runs, no data is read or
        written; the names bound to ``t`` now denote a view of ``src`` (or, for an unknown source, memory
        no tracked stream produced)."""
        source = next((a.value for a in e.args if a.keyword is None or a.keyword.value == "source"), None)
        for arg in e.args:
            if arg.value is not source:
                self.ev(st, arg.value)
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) \
                and source.func.attr.value in ("untyped_storage", "storage"):
            source = source.func.value
        src = self.ev(st, source) if source is not None else None
        if isinstance(src, TVal):
            new = self.new_tensor(st, src.sid, src.vid)
        else:
            self.tick()
            new = self.new_tensor(st, self.new_storage(st, "long", st.cur, None, None).sid)
        for name, v in list(st.env.items()):
            if v is tv:
                st.env[name] = new
        return new


def storage_owners(file, fn: cst.FunctionDef, key: str, line: int) -> list[str]:
    """Locals that keep the tensor of the place ``key`` alive past its rebinding at ``line``: a name the function
    binds once, before that line, to the place or to a view sharing its storage (``orig = p.grad.data``,
    ``g = p.grad.detach()``), and never hands on (returned, stored, put in a container: another owner then,
    judged as before), nor binds in a loop around the rebinding (the next round's binding lets go of the block, before
anything after the loop). Only a rebinding or ``del`` of the last owner frees the block."""
    bound: dict[str, int] = {}
    candidates: list[str] = []
    looped = {id(m) for loop in local_nodes(fn.body) if isinstance(loop, (cst.For, cst.While))
              and file.span(loop).start_line <= line <= file.span(loop).end_line for m in local_nodes(loop.body)}
    for n in local_nodes(fn.body):
        if id(n) in looped:
            continue  # (bound again by the next round, which frees the block inside the loop: no owner to the end)
        for name in _bound_names(n):
            bound[name] = bound.get(name, 0) + 1
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name) \
                and _shares_storage(n.value, key) and file.span(n).start_line < line:
            candidates.append(n.targets[0].target.value)
    return [c for c in dict.fromkeys(candidates) if bound.get(c) == 1 and not _handed_on(fn, c)]


_SHARING_METHODS = frozenset({"detach", "view", "view_as"})


def _shares_storage(expr: cst.BaseExpression, key: str) -> bool:
    """Is ``expr`` the place ``key`` or a view of it (``.data``, ``.detach()``, ``.view(...)``)?"""
    while dotted_chain(expr) != key:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in _SHARING_METHODS:
            expr = expr.func.value
        else:
            return False
    return True


def _bound_names(n: cst.CSTNode) -> list[str]:
    targets: list[cst.BaseExpression] = []
    if isinstance(n, cst.Assign):
        targets = [t.target for t in n.targets]
    elif isinstance(n, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
        targets = [n.target]
    elif isinstance(n, (cst.For, cst.CompFor)):
        targets = [n.target]
    elif isinstance(n, cst.AsName):
        targets = [n.name]
    elif isinstance(n, cst.Del):
        targets = [n.target]
    out: list[str] = []
    while targets:
        t = targets.pop()
        if isinstance(t, cst.Name):
            out.append(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            targets += [el.value for el in t.elements]
        elif isinstance(t, cst.StarredElement):
            targets.append(t.value)
    return out


def _handed_on(fn: cst.FunctionDef, name: str) -> bool:
    """Does the function return / yield the local, store it in a place or a container, or pass it to a call
    other than a tensor method of its own (``orig.record_stream(s)``)?"""
    for n in local_nodes(fn.body):
        if isinstance(n, cst.Call) and any(_names(a.value, name) for a in n.args):
            return True
        if isinstance(n, (cst.Return, cst.Yield)) and n.value is not None and _names(n.value, name):
            return True
        if isinstance(n, cst.Assign) and _names(n.value, name):
            return True  # (another name or a place holds it too)
    return False


def _names(expr: cst.CSTNode, name: str) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value == name
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        return any(_names(el.value, name) for el in expr.elements)
    if isinstance(expr, cst.Dict):
        return any(isinstance(el, cst.DictElement) and _names(el.value, name) for el in expr.elements)
    return False


def tensor_chains(file, node: cst.CSTNode) -> list[str]:
    """The attribute chains of objects other than ``self`` a statement evidently uses as tensors (not inside
    nested functions): the receiver of a tensor-only method (``p.grad.div_(n)``), the source of a copy
    (``h.copy_(p.grad)``), the first input of a torch op (``torch.add(req.kv, a)``); the places an attribute
    rebinding drops (:meth:`Unsets.unset_place`). Not another argument (``buf.narrow(0, 0, bucket.elements)``: a
    size) nor one of any other call (``log(req.seq_id)``): no evidence of a tensor."""
    out: list[str] = []
    for n in local_nodes(node):
        if not isinstance(n, cst.Call):
            continue
        method = n.func.attr.value if isinstance(n.func, cst.Attribute) else None
        if method is not None and method != "record_stream" and tensor_only_method(method):
            if (c := _place_chain(n.func.value)) is not None:
                out.append(c)
            if method != "copy_":  # (`buf.narrow(0, 0, bucket.elements)`: sizes, indices, dims)
                continue
        elif not torch_returns_tensor(site.target if (site := file.call_site(n)) is not None else None):
            continue
        first = next((a for a in n.args if a.keyword is None and not a.star), None)  # the source / the input
        if first is not None and (c := _place_chain(first.value)) is not None:
            out.append(c)
    return list(dict.fromkeys(out))


def _place_chain(expr: cst.BaseExpression) -> str | None:
    """``p.grad``, ``req.buffers.k``: an attribute chain of a named object other than ``self``, not metadata."""
    key = dotted_chain(expr)
    if key is None or "." not in key or key.startswith("self.") or key.rsplit(".", 1)[-1] in META_ATTRS:
        return None
    return key


def dotted_chain(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for an attribute chain rooted at a name, else None (a bare name is no place)."""
    return dotted(expr) if isinstance(expr, cst.Attribute) else None


def kept_elsewhere(fn: cst.FunctionDef, key: str) -> bool | None:
    """Does the function keep the tensor the place ``key`` holds under another owner? True: stored in another
    object's attribute or a container slot (``self.saved = p.grad``, ``stash[k] = p.grad``), which keeps it alive;
    "local" (truthy): bound to a local name, added to a container (``grads.append(p.grad)``) or handed back
    (``return p.grad``), which may keep it; None: none of these."""
    found: bool | None | str = None
    for n in local_nodes(fn.body):
        if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None and _mentions_chain(n.value, key):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(isinstance(t, (cst.Attribute, cst.Subscript)) and dotted(t) != key for t in targets):
                return True
            found = "local"
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) \
                and n.func.attr.value in ("append", "extend", "insert", "add", "put", "put_nowait", "setdefault",
                                          "appendleft", "update") and any(_mentions_chain(a.value, key) for a in n.args):
            found = "local"
        elif isinstance(n, (cst.Return, cst.Yield)) and n.value is not None and _mentions_chain(n.value, key):
            found = "local"
    return found


def _mentions_chain(expr: cst.CSTNode, key: str) -> bool:
    """Is the value (or an element of the tuple / list / dict it builds) exactly the chain ``key``?"""
    if dotted_chain(expr) == key if isinstance(expr, cst.BaseExpression) else False:
        return True
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        return any(_mentions_chain(el.value, key) for el in expr.elements)
    if isinstance(expr, cst.Dict):
        return any(isinstance(el, cst.DictElement) and _mentions_chain(el.value, key) for el in expr.elements)
    return False


def _argument_names(node: cst.CSTNode) -> list[str]:
    """Names a statement passes to calls (``f(x)``, ``f(*xs)``) or walks in a comprehension (``for e in
    xs``), not inside nested functions; also the attribute chains of objects other than ``self`` it passes
    (``h.copy_(p.grad)``) or uses as the receiver of a tensor-only method (``p.grad.div_(n)``): the places an
    attribute rebinding drops (:meth:`Storages.unset_place`)."""
    out: list[str] = []
    for n in local_nodes(node):
        if isinstance(n, cst.Call):
            out += [a.value.value for a in n.args if isinstance(a.value, cst.Name)]
        elif isinstance(n, cst.CompFor) and isinstance(n.iter, cst.Name):
            out.append(n.iter.value)
    return list(dict.fromkeys(out))
