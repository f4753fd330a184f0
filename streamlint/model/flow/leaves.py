"""Side-stream writes that leave the function through long-lived tensors (a join escape without a return).

A function can hand its side-stream work to the caller without returning anything: it writes, on a stream
of its own, into tensors that outlive the call and that the caller reads next. The tensors are the
caller's or the object's: elements of a container the object keeps for the caller (``for i, dst in
self._recv.items(): dst.copy_(src, non_blocking=True)``, the destinations a ``register_*`` method stored),
fields of the objects handed in (``req.dest_tensor[a:b].copy_(...)``), fields of ``self``. When nothing
joins that stream into the current stream before the function returns, the caller, which takes the call as
having completed those writes, reads them with no wait: the defect's root cause is where the work leaves
the function, which is where it is reported (a :class:`~streamlint.model.flow.results.Race` with
``escape`` and ``held`` set).

Not reported when someone else is known to join the stream: a stream handed in (the caller owns it), a
stream another function of the project waits for / synchronizes / records an event on (a protocol joins
it, whatever its shape; but not a class's own stream of the same name: ``self._copy_stream`` that another
unrelated class constructs for itself, when no code reaches either as ``obj._copy_stream``), an event
recorded after the write and handed over, a field of ``self`` that another method of the class reads (a
class protocol: :mod:`~streamlint.model.flow.protocols` reports at that reader; adding to a queue,
``self.recv_ops.append(op)``, is no read), and writes of helpers run inline (the helper reports them
itself). The written tensors are reached through the containers the object keeps, however selected
(``for _id, op in {op.task_id: op for op in self.recv_ops}.items()``: places of its elements).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.callers import callers_of, calls_after, orders_after
from streamlint.model.apis import DEVICE_MODULE_SPELLINGS
from streamlint.model.file import dotted
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.flow.selfjoins import caller_joins_after, joins_own_work
from streamlint.model.flow.values import State, ordered_before
from streamlint.model.streams import MAIN, derived
from streamlint.model.syntax import contains, local_nodes

if TYPE_CHECKING:
    from streamlint.model.project import Project

_JOINS = JOIN_METHODS = ("wait_stream", "synchronize", "record_event", "record", "wait_event", "query")
_JOIN_MARKERS = tuple(f".{name}(".encode() for name in _JOINS)


def stream_name(stream: str) -> str | None:
    """The identifier a stream key is known by in other code: ``self._copy_stream`` -> ``_copy_stream``,
    ``side`` -> ``side``; None for a key with no such name (an unknown stream, a subscript, a call)."""
    if stream.startswith("<") or not stream.replace(".", "").replace("_", "").isalnum():
        return None
    return stream.rsplit(".", 1)[-1]


def container_name(stream: str) -> str | None:
    """The identifier of the container an element stream key is taken from: ``self.streams[index]`` -> ``streams``
    (a join of every element elsewhere, ``for s in self.streams: s.synchronize()``, joins that one too)."""
    found = re.fullmatch(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\[[^\[\]]*\]", stream)
    return found.group(1) if found is not None else None


def _element_names(fn, name: str) -> dict[str, cst.BaseExpression]:
    """The loop variables of ``fn`` walking a container named ``name`` (``for s in self.streams:``), with the
    container expression: ordering the loop variable in the body orders every element of it."""
    return {n.target.value: n.iter for n in _for_loops(fn.node)
            if isinstance(n.target, cst.Name) and names_stream(n.iter, name)}


def _for_loops(node: cst.CSTNode) -> list:
    return [n for n in local_nodes(node) if isinstance(n, cst.For)]


def names_stream(node: cst.CSTNode | None, name: str) -> bool:
    """Does the expression end in the stream's name (``x.name``, ``name``, ``x.name[i]``)?"""
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value == name or \
        isinstance(node, cst.Name) and node.value == name


def fresh_stream_field(cls, name: str) -> bool:
    """Does the class make ``self.<name>`` a stream of its own: every assignment of it in its methods a
    ``*.Stream(...)`` constructor?"""
    values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{name}"] \
        if cls is not None else []
    return bool(values) and all(isinstance(v, cst.Call) and (dotted(v.func) or "").endswith("Stream")
                                for v in values)


def field_owner(file, fn, stream: str) -> str | None:
    """The class whose field ``self.<name>`` the stream is (``fn``'s class), for :func:`stream_joined_elsewhere`'s
    ``field_of``; else None."""
    name = stream_name(stream)
    if name is None or not stream.startswith("self.") or stream.count(".") != 1 \
            or file.classes.get(fn.class_name or "") is None:
        return None
    return fn.class_name


def stream_owner(project: Project, file, fn, stream: str) -> str | None:
    """The class whose own stream ``self.<name>`` is (constructed by it, never reached as ``obj.<name>``
    anywhere in the project: not shared with other objects), for :func:`stream_joined_elsewhere`; else None."""
    name = stream_name(stream)
    if name is None or not stream.startswith("self.") or stream.count(".") != 1 \
            or not fresh_stream_field(file.classes.get(fn.class_name or ""), name):
        return None
    return None if stream_exposed(project, name) else fn.class_name


def stream_exposed(project: Project, name: str) -> bool:
    """Does any code of the project reach a field called ``name`` of an object other than ``self``
    (``engine._copy_stream``, ``f()._copy_stream``)? A call of a function or method of that name is no read of the
    field (``torch.cuda.stream(s)``, ``ctx.stream()``), nor is a device module's attribute (``torch.npu.stream``)."""
    memo = derived(project, "stream_field_exposed")
    if name not in memo:
        pattern = re.compile(rf"(?:\b(?!self\b|cls\b)[A-Za-z_]\w*|[)\]])\.{re.escape(name)}\b(?!\s*\()")
        memo[name] = any(_reads_field(pattern, (project._bytes(path) or b"").decode("utf-8", "replace"), name)
                         for path in project.paths_containing((f".{name}".encode(),)))
    return memo[name]


_DEVICE_MODULES = tuple(f"{m}." for m in DEVICE_MODULE_SPELLINGS)


def _reads_field(pattern: re.Pattern, text: str, name: str) -> bool:
    """Does ``pattern`` (``<receiver>.<name>`` not called) match with a receiver that is no device module?"""
    return any(not text[max(0, m.end() - len(name) - 24):m.end() - len(name)].endswith(_DEVICE_MODULES)
               for m in pattern.finditer(text))


def _own_fresh_stream(model, fn, node: cst.CSTNode | None, name: str, owner: str | None) -> bool:
    """Is ``node`` ``self.<name>`` in a method of a class unrelated to ``owner`` that makes that field a
    stream of its own? Then it is another object's stream, whatever it is called: ordering it joins
    nothing of the owner's (``owner``'s own stream, reached by no other object: :func:`stream_owner`)."""
    while isinstance(node, cst.Subscript):
        node = node.value
    if owner is None or fn.class_name in (None, owner) or not (
            isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"):
        return False
    cls = model.classes.get(fn.class_name)
    if cls is None or owner in {(dotted(b.value) or "").rsplit(".", 1)[-1] for b in cls.node.bases}:
        return False
    return fresh_stream_field(cls, name)


def stream_joined_elsewhere(project: Project, name: str, forks: bool = True, owner: str | None = None,
                            field_of: str | None = None, scoped: bool = False) -> bool:
    """Does any function of the project order a stream called ``name`` (waits for it, synchronizes it, records
    an event on it or queries it)? Then a protocol joins it after the call, whatever its shape: another method
    (``finish()``), a thread draining it, or ``fn`` itself on its next call (a rolling prefetch that joins the
    previous call's work before it queues the next). ``forks``: a fork of the stream (``S.wait_stream(cur)``,
    ``S.wait_event(e)``: S made to wait) counts too, as evidence that a protocol manages it; with False only
    what orders something *after* the stream counts (the join itself). ``owner``: the class whose
    ``self.<name>`` the stream is; another class's ``self.<name>`` that it constructs itself does not count.
    ``field_of``: the class whose field ``self.<name>`` is: when that class makes the stream for itself and never
    hands it out, only orderings whose receiver can be its object count (:mod:`~streamlint.model.flow.joinowners`);
    past the caller-file bound the answer stays the silent one. ``scoped``: an event recorded with no argument inside
    the stream's context (``with torch.cuda.stream(s): ev.record()``, :func:`scope_stream`) counts as a record on it
    (asked by the join steps, :mod:`~streamlint.model.flow.joinsteps`)."""
    memo = derived(project, "stream_joined_elsewhere")
    key = (name, forks, owner, field_of, scoped)
    if key not in memo:
        memo[key] = _joined_elsewhere(project, name, forks, owner, field_of, scoped)
    return memo[key]


def _joined_elsewhere(project: Project, name: str, forks: bool, owner: str | None, field_of: str | None,
                      scoped: bool = False) -> bool:
    from streamlint.model.flow.joinowners import may_reach, owner_class, private_stream

    # bytes first: only files naming the stream and a join method are parsed
    joining = set(project.paths_containing(_JOIN_MARKERS))
    paths = [path for path in project.paths_containing((name.encode(),)) if path in joining]
    # the owner's stream, when it is its own and never leaves it: only orderings through its objects count
    found = owner_class(project, field_of) if field_of is not None else None
    private = found if found is not None and private_stream(project, found[0], found[1], name) else None
    if len(paths) > MAX_CALLER_FILES:
        # past the caller-file bound the name is too common to tell: the silent answer (the files naming the owner
        # class are not enough: its object reaches untyped helpers in files that never name it, `drain(pf)`)
        return True
    for model in filter(None, map(project.file, paths)):
        for other in model.iter_functions():
            walked = None
            for site in other.calls:
                if site.method not in _JOINS:
                    continue
                func = site.node.func
                args = [a.value for a in site.node.args]
                receiver = forks or site.method not in ("wait_stream", "wait_event")
                hits = [func.value] if receiver and isinstance(func, cst.Attribute) \
                    and names_stream(func.value, name) else []
                if receiver and not hits and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                    walked = _element_names(other, name) if walked is None else walked
                    hits = [walked[func.value.value]] if func.value.value in walked else []
                hits += [a for a in args if names_stream(a, name)]
                if scoped and site.method == "record" and not args:  # `with torch.cuda.stream(s): ev.record()`
                    hits += [a for a in [scope_stream(site.scope)] if a is not None and names_stream(a, name)]
                if private is not None:  # (a local bound from the stream names it too: `s = self.copy_stream`)
                    hits += [v for n in ([func.value] if receiver and isinstance(func, cst.Attribute) else []) + args
                             if isinstance(n, cst.Name) for v in other.name_assigns.get(n.value, ())
                             if names_stream(v, name)]
                    if any(may_reach(project, model, other, h, name, private[1].name) for h in hits):
                        return True
                elif any(not _own_fresh_stream(model, other, h, name, owner) for h in hits):
                    return True
    return False


def scope_stream(scope) -> cst.BaseExpression | None:
    """The stream the innermost stream context around a call makes current (``with torch.cuda.stream(s):``,
    past ``with torch.cuda.device(d):`` items), as written; None when there is none or it is not spelled out."""
    while scope is not None:
        item = scope.item.item
        if isinstance(item, cst.Call) and (dotted(item.func) or "").rsplit(".", 1)[-1] == "stream":
            return item.args[0].value if item.args and item.args[0].keyword is None else None
        scope = scope.parent
    return None


def _field_read_elsewhere(interp, field: str) -> bool:
    """A field of ``self`` another method of the class reads: a class protocol's hand-over (its reader
    is analysed with the write pending). Bookkeeping of a container does not read its elements: adding to
    it (``self.recv_ops.append(op)``, the submit side of a queue), clearing or rebinding it, its length."""
    from streamlint.model.flow.joinowners import code_without_comments

    cls = interp.file.classes.get(interp.fn.class_name or "")
    if cls is None:
        return False
    f = re.escape(field)
    mention = re.compile(rf"\bself\.{f}\b")
    keeping = re.compile(rf"\bself\.{f}(?:\.(?:append|extend|insert|clear)\(|\s*=(?!=)|\[[^\[\]]*\]\s*=(?!=))"
                         rf"|\blen\(\s*self\.{f}\s*\)")
    for method in cls.methods.values():
        if method is interp.fn or method.node.name.value == "__init__":
            continue
        text = code_without_comments(interp.file.code(method.node))  # (a comment naming it reads nothing)
        if len(mention.findall(text)) > len(keeping.findall(text)):
            return True
    return False


def _orders_right_after(site) -> bool:
    """Is the next call after ``site`` in its caller a wait or a synchronisation (``torch.cuda.synchronize()``,
    ``stream.wait_stream(...)``, ``ev.wait()``)? The caller then joins what the call left in flight."""
    first = next(calls_after(site), None)
    return first is not None and orders_after(first[1])


def _callers(project: Project, file, fn) -> list:
    """The seen call sites of ``fn`` but those whose receiver cannot be an object of its class (another class's
    method of the same name: :func:`~streamlint.model.flow.joinowners.unrelated_receiver`)."""
    from streamlint.model.flow.joinowners import unrelated_receiver

    return [(model, site) for model, site in callers_of(project, file, fn) or ()
            if fn.class_name is None or not unrelated_receiver(project, model, site, fn.class_name)]


def callers_view(project: Project, file, fn) -> str:
    """How the callers of ``fn`` take what it leaves on a side stream: ``"joined"`` (every call is followed
    right away by a wait / synchronisation), ``"unseen"`` (no call site the project shows: a callback, an
    entry point, a common name) or ``"caller"`` (callers that go on without an ordering)."""
    memo = derived(project, "leaves_callers")
    if id(fn) not in memo:
        sites = _callers(project, file, fn)
        memo[id(fn)] = "unseen" if not sites else \
            "joined" if all(_orders_right_after(site) for _, site in sites) else "caller"
    return memo[id(fn)]


def unordered_caller(project: Project, file, fn) -> tuple | None:
    """(file, call node) of the first call of ``fn`` that its caller follows with no ordering: where the
    caller goes on to use what ``fn`` left in flight (the finding's related location)."""
    for model, site in _callers(project, file, fn):
        if not _orders_right_after(site):
            return model, site.node
    return None


def left_on_side_streams(interp, st: State) -> list[int]:
    """The long-lived tensors this function's own statements last wrote on a side stream of its own that
    nothing joins into the current stream before it returns (see the module docstring); a parameter's gradient
    (flow/gradplaces.py) is one."""
    know = st.know(MAIN)
    out: list[int] = []
    for sid, S in st.stores.items():
        lw = S.last_write
        if S.kind != "long" and sid not in interp.__dict__.get("gradient_sids", ()) \
                or lw is None or lw.time == 0 or lw.node is None or lw.stream == MAIN \
                or sid in interp.protocol_sources or ordered_before(lw, know):
            continue
        if lw.stream in interp.param_streams or sid in interp.helper_writes or not contains(interp.fn.node, lw.node):
            continue  # the caller's stream; a write of an inlined helper (reported there)
        name = stream_name(lw.stream)
        if name is None or name in interp.fn.all_params:
            continue
        # a class whose other methods each join their own work on this stream: its protocol is "nothing left in
        # flight", so neither a reader elsewhere nor their joins take this method's writes over (selfjoins.py)
        convention = not stream_exposed(interp.project, name) \
            and joins_own_work(interp.project, interp.file, interp.fn, lw.stream) \
            and not caller_joins_after(interp.project, interp.file, interp.fn) \
            and not any(r.src == lw.stream and not r.escape for r in interp.races.values()) \
            and not any(h.stream == lw.stream for h in interp.host_reads.values())  # (one finding: a reader of
        # that stream's work here, on a stream or the host, is already reported)
        if S.name and S.name.startswith("self.") and not convention:
            field = S.name[5:].split(".", 1)[0].split("[", 1)[0]
            if _field_read_elsewhere(interp, field):
                continue
        owner = stream_owner(interp.project, interp.file, interp.fn, lw.stream)
        if not convention and stream_joined_elsewhere(interp.project, name, owner=owner,
                                                      field_of=field_owner(interp.file, interp.fn, lw.stream)):
            continue
        out.append(sid)
    if out and callers_view(interp.project, interp.file, interp.fn) == "joined":
        return []
    return out


def closure_container(fn, name: str) -> bool:
    """Is ``name``, not bound in the nested function ``fn``, a container of an enclosing function
    (``blocks = [None, None]`` there, ``blocks[i % 2] = attn(q, kv)`` then ``out = blocks[0]`` here)? Its
    slots then hold what this function put in them: values leave (and come back) through it."""
    if name in fn.all_params or name in fn.name_assigns:
        return False
    outer = fn.parent
    while outer is not None:
        if name in outer.name_assigns or name in outer.all_params:
            return True
        outer = outer.parent
    return False


def loop_joined(fn, lw) -> bool:
    """Is the write ``lw`` inside a loop of ``fn`` whose body also orders its stream: synchronises the device
    (``torch.cuda.synchronize()`` at the top of the next iteration), that stream (``s.synchronize()``, the current
    stream waiting for it) or an event recorded on it? The next iteration joins it; whether the last one leaves it
    in flight is a question of the loop's bounds the analysis cannot answer, so the hand-over finding is low (it
    assumes the last iteration writes). An ordering of another stream or event joins nothing of it."""
    if lw is None or lw.node is None:
        return False
    name = stream_name(lw.stream)
    events = _events_on(fn, name) if name is not None else set()
    for loop in (n for n in local_nodes(fn.node) if isinstance(n, (cst.For, cst.While))):
        if contains(loop.body, lw.node) and any(_joins_stream(n, name, events) for n in local_nodes(loop.body)):
            return True
    return False


def _events_on(fn, name: str) -> set[str]:
    """The events ``fn`` records on the stream called ``name``: ``e = s.record_event()``, ``e.record(s)``, ``e.record()``
    in a scope entering it (as dotted texts: ``ev``, ``self.done``)."""
    out: set[str] = set()
    for n in local_nodes(fn.node):
        if isinstance(n, cst.Assign) and isinstance(n.value, cst.Call) and isinstance(n.value.func, cst.Attribute) \
                and n.value.func.attr.value == "record_event" and names_stream(n.value.func.value, name):
            out.update(t for t in (dotted(t.target) for t in n.targets) if t is not None)
        elif isinstance(n, cst.With) and any(isinstance(i.item, cst.Call) and any(
                names_stream(a.value, name) for a in i.item.args) for i in n.items):
            out.update(e for c in local_nodes(n.body) if (e := _recorded_event(c, None)) is not None)
        elif (e := _recorded_event(n, name)) is not None:
            out.add(e)
    return out


def _recorded_event(node: cst.CSTNode, name: str | None) -> str | None:
    """``e.record(<stream called name>)`` (``name`` None: ``e.record()``, on the current stream) -> ``e``."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "record"):
        return None
    args = [a.value for a in node.args]
    if (not args) if name is None else not (args and names_stream(args[0], name)):
        return None
    return dotted(node.func.value)


def _joins_stream(node: cst.CSTNode, name: str | None, events: set[str]) -> bool:
    """Does ``node`` order the stream called ``name`` before what follows: a device synchronisation, its
    ``synchronize()``, the current stream waiting for it, or such an ordering of an event recorded on it?"""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    method, recv = node.func.attr.value, node.func.value
    args = [a.value for a in node.args]
    if method == "synchronize":
        return (dotted(recv) or "") in DEVICE_MODULE_SPELLINGS or name is not None and names_stream(recv, name) \
            or dotted(recv) in events
    current = isinstance(recv, cst.Call) and (dotted(recv.func) or "").endswith("current_stream")
    if method == "wait_stream":
        return current and name is not None and bool(args) and names_stream(args[0], name)
    if method == "wait_event":
        return current and bool(args) and dotted(args[0]) in events
    return False
