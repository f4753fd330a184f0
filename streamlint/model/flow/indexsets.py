"""Loops over an index collection that pick streams from a list (mixin of :class:`~streamlint.model.flow.interp.Interp`).

Work is often spread over streams through a collection of indices rather than the streams themselves: an
expert / a layer / a bucket is assigned ``self.expert_streams[e]``, an index into the list of streams, and
the fork loop runs ``with torch.cuda.stream(streams[self.expert_streams[e]]):`` for each ``e`` (one stream
key for every element: the collapsed reading of :mod:`~streamlint.model.flow.elements`). The join is then a
loop over the same index collection: ``for i in set(self.expert_streams): gate.wait_stream(streams[i])``
(or ``streams[i].wait_stream(gate)`` before the fork). Its loop variable walks *every* element of the
collection, so ``streams[i]`` stands for every stream ``streams[self.expert_streams[...]]`` at once: its key
is the *family key* ``streams[self.expert_streams[*]]``.

A loop covers the index collection ``I`` when it walks ``I`` itself, ``set(I)`` / ``frozenset(I)`` /
``list(I)`` / ``tuple(I)`` / ``sorted(I)`` / ``reversed(I)`` of it, ``I.values()``, the values of
``I.items()`` or the elements of ``enumerate(I)`` (its variable is ``I[*]``), or ``range(len(I))`` (its
variable is every index of ``I``: ``I[i]`` is ``I[*]``), and its body uses ``xs[<variable>]`` (``xs[I[i]]``)
as a stream (a join, a record, a stream scope, directly or through a local). A slice (``I[1:]``), a
comprehension filtering it, ``range(1, len(I))`` or any other collection is no cover: the variable keeps the
collapsed reading. Nor is a loop that may ``break`` / ``continue``, nor a collection that may be a mapping (its
plain iteration gives keys: every assignment of ``I`` must be a sequence display / builder; a mapping covers only
through ``.values()`` / ``.items()``), nor one the function (or a function of the file it may call) assigns,
element-assigns or mutates, or whose root it assigns (``_fixed_sequence``). After the loop its variable, and any
local bound through it, is one member again (``xs[I[-1]]``: :meth:`IndexSets.end_covers`).

A join naming a family key applies to every stream key of the family (``streams[self.expert_streams[e]]``
for any index text ``e``, the family key itself included): waited on, each member the path has queued
work on is joined up to now; waiting, each member known now waits, and so does every member used later
(the family's clock, :attr:`State.families`, merged into a member's in ``State.know``)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal, State, family_match, merge_clock
from streamlint.model.streams import derived
from streamlint.model.syntax import call_name, local_nodes, node_code, node_memo
from streamlint.model.walk import children

WILD = "*"
_WRAPPERS = frozenset({"set", "frozenset", "list", "tuple", "sorted", "reversed"})
_STREAM_USES = frozenset({"wait_stream", "wait_event", "record_event", "synchronize", "query"})
_SCOPES = frozenset({"stream", "StreamContext"})


def _unwrap(it: cst.BaseExpression) -> cst.BaseExpression:
    """``sorted(set(I))`` -> ``I`` (the positional argument of the order / container builtins)."""
    while isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in _WRAPPERS \
            and len([a for a in it.args if a.keyword is None]) == 1 and not any(a.star for a in it.args) \
            and it.args[0].keyword is None and (it.func.value == "sorted" or len(it.args) == 1):
        it = it.args[0].value
    return it


def _collection(e: cst.BaseExpression) -> bool:
    """A named collection (``I``, ``self.I``, ``cfg.I``, ``self.map[k]``), not a slice or a call."""
    if isinstance(e, cst.Subscript):
        return len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) and _collection(e.value)
    return isinstance(e, cst.Name) or isinstance(e, cst.Attribute) and _collection(e.value)


def covering_parts(node: cst.For) -> list[tuple[str, cst.BaseExpression, str]]:
    """``[(loop variable, collection I, "element" | "index")]`` for a loop walking every element (every index)
    of a named collection; [] for any other loop."""
    it, target = _unwrap(node.iter), node.target
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" \
            and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star:
        n = it.args[0].value  # `range(len(I))`
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "len" and len(n.args) == 1 \
                and _collection(n.args[0].value) and isinstance(target, cst.Name):
            return [(target.value, n.args[0].value, "index")]
        return []
    pick = None
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate" \
            and len(it.args) == 1 and it.args[0].keyword is None:
        it, pick = _unwrap(it.args[0].value), 1
    elif isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
            and it.func.attr.value in ("values", "items"):
        pick = 1 if it.func.attr.value == "items" else None
        it = it.func.value
    if not _collection(it):
        return []
    if pick is not None:
        if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
                and isinstance(target.elements[pick].value, cst.Name)):
            return []
        return [(target.elements[pick].value.value, it, "element")]
    return [(target.value, it, "element")] if isinstance(target, cst.Name) else []


def _picks_stream(body: cst.CSTNode, name: str, coll: cst.BaseExpression | None) -> bool:
    """Does the loop body use ``xs[name]`` (``coll`` given: ``xs[coll[name]]``) as a stream, directly or
    through a local bound to it?"""
    code = node_code
    wanted = code(coll) if coll is not None else None

    def index_ok(e: cst.BaseExpression) -> bool:
        if wanted is None:
            return isinstance(e, cst.Name) and e.value == name
        return isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and isinstance(e.slice[0].slice.value, cst.Name) and e.slice[0].slice.value.value == name \
            and code(e.value) == wanted

    def picked(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Name):
            return e.value in aliases
        return isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index) \
            and index_ok(e.slice[0].slice.value)

    aliases: set[str] = set()
    nodes = list(local_nodes(body))
    for node in nodes:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and picked(node.value):
            aliases.add(node.targets[0].target.value)
    for node in nodes:
        if not isinstance(node, cst.Call):
            continue
        method = call_name(node)
        receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
        args = [a.value for a in node.args]
        if method in _STREAM_USES and (receiver is not None and picked(receiver) or args and picked(args[0])):
            return True
        if method in _SCOPES and args and picked(args[0]):
            return True
    return False


_SEQUENCE_BUILDERS = frozenset({"list", "tuple", "range", "sorted"})
_MUTATORS = ("append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "sort", "reverse",
             "popitem", "add", "discard", "__setitem__", "__delitem__")


def _leaves(node: cst.For) -> bool:
    """Can a round skip the rest of the body or end the walk early (a ``break`` / ``continue`` of this loop)?"""
    stack: list[cst.CSTNode] = [node.body]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Break, cst.Continue)):
            return True
        if not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.For, cst.While)):
            stack.extend(children(n))
    return False


def cover_candidates(node: cst.For) -> list[tuple[str, cst.BaseExpression, str]]:
    """The loop's syntax as :meth:`IndexSets.covering_bindings` reads it: its :func:`covering_parts` whose body
    picks a stream through the variable (:func:`_picks_stream`); none when a round may leave early
    (:func:`_leaves`). A function of the node alone, asked at each round of the loop on each path: kept per
    node (:func:`~streamlint.model.syntax.node_memo`)."""
    if _leaves(node):
        return []
    return [(name, coll, how) for name, coll, how in covering_parts(node)
            if _picks_stream(node.body, name, coll if how == "index" else None)]


def _sequence_value(v: cst.BaseExpression, values: bool) -> bool:
    """A list / tuple display, a list comprehension or ``list(...)`` / ``tuple(...)`` / ``range`` / ``sorted``:
    iterating it gives its elements (never the keys of a mapping); with ``values`` (the loop walks
    ``.values()`` / ``.items()``) a mapping display or ``dict(...)`` too."""
    if isinstance(v, (cst.List, cst.Tuple, cst.ListComp)) or values and isinstance(v, (cst.Dict, cst.DictComp)):
        return True
    return isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and (
        v.func.value in _SEQUENCE_BUILDERS or values and v.func.value in ("dict", "OrderedDict"))


def _writes(file, fn) -> list[tuple[str, object, cst.BaseExpression | None]]:
    """Every write of the file (``self.*`` targets) and of the function ``fn`` (any target): (target text, the
    function, the assigned value or None for an augmented / unpacked / deleted / loop / with target)."""
    code = file.module.code_for_node
    out: list = []

    def add(target: cst.BaseExpression, value, f) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                add(el.value, None, f)
        elif isinstance(target, cst.StarredElement):
            add(target.value, None, f)
        else:
            out.append((code(target), f, value))

    for f in file.functions.values():
        for n in local_nodes(f.node):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    add(t.target, n.value if len(n.targets) == 1 else None, f)
            elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
                add(n.target, n.value if isinstance(n, cst.AnnAssign) else None, f)
            elif isinstance(n, (cst.For, cst.CompFor)):
                add(n.target, None, f)
            elif isinstance(n, cst.WithItem) and n.asname is not None:
                add(n.asname.name, None, f)
            elif isinstance(n, cst.Del):
                add(n.target, None, f)
            elif isinstance(n, cst.NamedExpr):
                add(n.target, None, f)
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _MUTATORS:
                out.append((code(n.func.value) + "[]", f, None))  # (an element write)
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in ("setattr", "delattr"):
                out.append(("self.<any>", f, None))
    return [(t, f, v) for t, f, v in out if f is fn or t.startswith("self.")]


def _reached(file, fn) -> set:
    """``fn`` and every function of its file it may call, transitively (by the called name: ``self.m(...)``,
    ``obj.m(...)`` or ``m(...)`` reaches every function of the file named ``m``)."""
    by_name: dict[str, list] = {}
    for f in file.functions.values():
        by_name.setdefault(f.qualname.rsplit(".", 1)[-1], []).append(f)
    seen, todo = {id(fn): fn}, [fn]
    while todo:
        for n in local_nodes(todo.pop().node):
            if isinstance(n, cst.Call):
                name = n.func.attr.value if isinstance(n.func, cst.Attribute) else \
                    n.func.value if isinstance(n.func, cst.Name) else None
                for f in by_name.get(name or "", ()):
                    if id(f) not in seen:
                        seen[id(f)] = f
                        todo.append(f)
    return set(seen)


def _fixed_sequence(file, fn, coll: str, values: bool) -> bool:
    """Is ``coll`` a sequence (never a mapping: iterating it gives its elements) that nothing rewrites while the
    function runs: a local set once in ``fn`` to a sequence value, or a ``self.`` field every assignment of which
    in the file is a sequence value and that ``fn`` and the functions of the file it may call (:func:`_reached`)
    neither assign, element-assign nor mutate (``append``, ``sort`` ...), nor its root (``self.cfg`` of
    ``self.cfg.ids``); no ``setattr`` in the file. Walking ``.values()`` / ``.items()``
    (``values``), a mapping display or ``dict(...)`` will do too."""
    if "[" in coll or not (coll.isidentifier() or coll.startswith("self.") and coll[5:].isidentifier()):
        return False
    if file is None or fn is None:
        return False
    writes, reached = _writes(file, fn), _reached(file, fn)
    if any(t == "self.<any>" for t, _f, _v in writes):
        return False
    own = [(f, v) for t, f, v in writes if t == coll]
    others = [(t, f) for t, f, _v in writes if t != coll and (t.startswith(coll + "[") or t.startswith(coll + ".")
                                                              or coll.startswith(t + ".") or t == "self")]
    if not own or not all(v is not None and _sequence_value(v, values) for _f, v in own) \
            or any(id(f) in reached for _t, f in others):
        return False
    if coll.startswith("self."):  # built elsewhere (__init__, a setup method), never while fn runs
        return not any(id(f) in reached for f, _v in own)
    return len(own) == 1 and own[0][0] is fn


class IndexSets:
    """Family keys of streams picked through a covered index collection (mixin of the interpreter).

    Interp state it uses: ``clock``. It asks orderings (``render``, ``wait_stream`` of the next mixin)."""

    def covering_bindings(self, st: State, node: cst.For) -> dict[str, object]:
        """The loop variables of a loop covering an index collection that picks streams: name -> the value
        whose rendering makes ``xs[name]`` (``xs[I[name]]``) the family key."""
        found: dict[str, object] = {}
        candidates = node_memo("cover_candidates", node, cover_candidates)  # (each round, each path)
        if not candidates:
            return found
        it = _unwrap(node.iter)
        values = isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) \
            and it.func.attr.value in ("values", "items")  # (a mapping's values: a dict will do)
        for name, coll, how in candidates:
            memo = derived(self.project, "fixed_index_collections")  # (each file walk once per loop and function)
            mkey = (self.cfile.path, self.cfn.qualname, self.cfile.code(coll), values)
            if mkey not in memo:
                memo[mkey] = _fixed_sequence(self.cfile, self.cfn, mkey[2], values)
            if not memo[mkey]:
                continue
            key = self.render(st, coll)
            if WILD in key or not key.replace("_", "a").replace(".", "a").replace("[", "a").replace("]", "a") \
                    .replace("'", "a").replace('"', "a").isalnum():
                continue
            found[name] = KVal(f"{key}[{WILD}]") if how == "element" else KVal(WILD)
            self.__dict__.setdefault("covers", set()).add(f"{key}[{WILD}]")
            self.__dict__.setdefault("loop_covers", {}).setdefault(id(node), set()).add(key)
        return found

    def end_covers(self, states: list[State], node: cst.CSTNode) -> None:
        """After a covering loop, its variable (and any local bound through it) is one element, not the family:
        ``xs[I[*]]`` becomes ``xs[I[-1]]`` (a member joined on its own), the index ``*`` becomes ``-1``."""
        keys = self.__dict__.get("loop_covers", {}).get(id(node))
        if not keys:
            return
        for s in states:
            for name, v in list(s.env.items()):
                if isinstance(v, KVal) and WILD in v.key and (v.key == WILD or any(f"{k}[{WILD}]" in v.key
                                                                                     for k in keys)):
                    s.env[name] = KVal(v.key.replace(WILD, "-1"), v.glob, v.opaque, None)

    def wait_stream(self, st: State, waiter: str, producer: str) -> None:
        covers = self.__dict__.get("covers", ())
        wild_waiter, wild_producer = _family(waiter, covers), _family(producer, covers)
        if wild_waiter == wild_producer:  # neither (or both: left as two plain keys)
            super().wait_stream(st, waiter, producer)  # type: ignore[misc]
            return
        if wild_producer:  # the join: every member queued so far
            for key in sorted(k for k in _stream_keys(st) if family_match(producer, k)):
                super().wait_stream(st, waiter, key)  # type: ignore[misc]
            return
        for key in sorted(k for k in _stream_keys(st) if family_match(waiter, k)):  # the fork: every member
            super().wait_stream(st, key, producer)  # type: ignore[misc]
        snap = st.know(producer)
        snap[producer] = self.clock
        merge_clock(st.families.setdefault(waiter, {}), snap)  # ... and every member used from now on


def _family(key: str, covers) -> bool:
    """Is ``key`` a family key: ``xs[I[*]]`` for a collection ``I`` a covering loop walks?"""
    return key.count(WILD) == 1 and any(key.endswith(f"[{c}]") for c in covers)


def _stream_keys(st: State) -> set[str]:
    """Every stream key the path knows: work queued, clocks, accesses of the storages."""
    keys = set(st.last_op) | set(st.work) | set(st.vc)
    for clock in st.vc.values():
        keys.update(clock)
    for S in st.stores.values():
        keys.update(a.stream for a in (S.last_write, S.born, *S.reads, *S.uses, *S.parts) if a is not None)
    return keys


__all__ = ["IndexSets", "covering_parts"]
