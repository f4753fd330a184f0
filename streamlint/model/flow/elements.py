"""Collections of streams and events, element by element (mixin of :class:`~streamlint.model.flow.interp.Interp`).

A ``for`` loop over a list / dict / tuple of streams or events (``for s in self.streams``, ``for i, s in
enumerate(streams)``, ``for s, x in zip(streams, chunks)``, ``for e in events.values()``, or an index loop
``for i in range(len(streams))`` whose body subscripts one) runs once per *representative element*: the
first (``[0]``), one in the middle (``[1]``) and the last (``[-1]``). Each has its own stream / event key
(``self.streams[0]`` ...), so the vector clocks tell the elements apart: a fork onto every element
followed by a join over ``streams[1:]`` / ``streams[:-1]`` / ``range(1, n)`` / ``range(n - 1)`` leaves
one element's work unordered (SL201 at the consumer, SL205 in captured code), while a join covering
every element orders it all. A collection zipped with the streams (``for s, grad in zip(streams, grads)``)
gives the element of the same position (``grads[0]`` ...), so each element's work is told apart too. A
literal list of streams (``[torch.cuda.current_stream(), side]``) is
iterated over its real items, so its identity is exact.

Only collections known to hold streams or events take part: their assignments say so
(``[torch.cuda.Stream() for _ in range(n)]``), or none is visible (a parameter, an attribute set
elsewhere, a local bound only to a project helper's result, ``lanes = _lanes(n)``) and the loop body uses the
element as one (stream scope, ``wait_stream`` / ``wait_event`` / ``record_event`` / ``e.record()`` /
``ev.record(s)``). Anything else (other slices, ``range(2, n)``, index arithmetic, a
collection also indexed with a literal like ``streams[2]``) keeps the former collapsed reading: the
loop variable has no identity, and every iteration means "some element". Such an element picked by an index
(``lanes[k - 1]``) knows what every representative element knows, and its work is ordered before a stream that
knows every representative element after it (``values.collapsed_members``): a fork loop and a join loop over the
whole collection order it, a join over ``lanes[1:]`` does not."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.flow.paramcontents import param_root, tensor_narrowed, tensor_test
from streamlint.model.flow.values import Access, EVal, IVal, KVal, SVal, State, TupVal, TVal
from streamlint.model.streams import EVENT, EVENT_LIST, MAIN, STREAM, STREAM_LIST, attr_kind, derived, kind_of_value
from streamlint.model.placement import host_target
from streamlint.model.tensoruse import element_tensor_annotation, tensor_only_method
from streamlint.model.syntax import call_name, int_literal, node_code, node_memo, slice_drop
from streamlint.model.walk import children, descendants

FIRST, MIDDLE, LAST = "0", "1", "-1"
VALUE = "value"  # a zipped collection that holds no streams or events
ALL = (FIRST, MIDDLE, LAST)
_STREAM_USES = frozenset({"wait_stream", "wait_event", "record_event"})
_EVENT_USES = frozenset({"record", "query", "elapsed_time"})
_LITERAL_INDEX = r"\[\s*(-?\d+)\s*\]"


def _slice_positions(sl: cst.Slice) -> tuple[str, ...] | None:
    """``[1:]`` -> every element but the first; ``[:-1]`` -> every element but the last; ``[:]`` -> all."""
    return {"none": ALL, "first": (MIDDLE, LAST), "last": (FIRST, MIDDLE)}.get(slice_drop(sl))


def _range_positions(call: cst.Call) -> tuple[str, ...] | None:
    """``range(n)`` / ``range(0, n)`` -> all; ``range(1, n)`` -> all but the first; ``range(n - 1)`` /
    ``range(0, n - 1)`` -> all but the last (``n`` any expression without a literal offset)."""
    if any(a.keyword is not None or a.star for a in call.args) or not 1 <= len(call.args) <= 2:
        return None
    values = [a.value for a in call.args]
    lower = int_literal(values[0]) if len(values) == 2 else 0
    if lower not in (0, 1):
        return None
    upper = values[-1]
    if int_literal(upper) is not None:
        return None
    minus_one = isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Subtract) \
        and int_literal(upper.right) == 1
    if isinstance(upper, cst.BinaryOperation) and not minus_one:
        return None  # `range(n + 1)`, `range(2 * n)`: not one index per element
    if lower == 1:
        return None if minus_one else (MIDDLE, LAST)
    return (FIRST, MIDDLE) if minus_one else ALL


def _names(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _element_use(body: cst.CSTNode, name: str, producing: bool = False) -> str | None:
    """STREAM / EVENT when the loop body uses ``name`` (the loop variable, or ``xs[name]``) as one; ``producing``:
    only as a stream that waits, runs work or records, or an event recorded (not a join of the element)."""
    def is_elem(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Subscript) and len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index):
            return _names(e.slice[0].slice.value, name)
        return _names(e, name)

    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            method = call_name(node)
            receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
            args = [a.value for a in node.args]
            if method in _STREAM_USES:
                if receiver is not None and is_elem(receiver):
                    return STREAM
                if args and is_elem(args[0]) and not producing:
                    return EVENT if method == "wait_event" else STREAM
            if method in _EVENT_USES and receiver is not None and is_elem(receiver):
                return EVENT
            if method == "record" and receiver is not None and args and is_elem(args[0]):
                return STREAM  # `join.record(stream)`: an event recorded on the element
            if method in ("stream", "StreamContext") and args and is_elem(args[0]):
                return STREAM
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(children(node))
    return None


def element_use(body: cst.CSTNode, name: str, producing: bool = False) -> str | None:
    """:func:`_element_use`, kept per loop body and question (asked at each round of the loop on each path:
    :func:`~streamlint.model.syntax.node_memo`)."""
    return node_memo(f"element_use:{name}:{producing}", body, lambda n: _element_use(n, name, producing))


class Elements:
    """Representative elements of stream / event collections (mixin of the interpreter).

    Interp state it uses: ``cfile``, ``cfn``, ``frames``, ``project``. It asks exprs (ev), orderings
    (kind_of, render)."""

    def element_rounds(self, st: State, node: cst.For) -> list[list[tuple[cst.BaseExpression, object]]] | None:
        """The bindings (target node -> value) of each round of a loop over a stream / event collection,
        or None when the loop is not one."""
        it = node.iter
        target = node.target
        if isinstance(it, cst.Call) and call_name(it) in ("list", "tuple") and isinstance(it.func, cst.Name) \
                and len(it.args) == 1:
            it = it.args[0].value
        positions: tuple[str, ...] = ALL
        bounds: tuple[int | None, int | None] = (None, None)
        if isinstance(it, cst.Subscript) and len(it.slice) == 1 and isinstance(it.slice[0].slice, cst.Slice):
            sliced = _slice_positions(it.slice[0].slice)
            if sliced is None and not (isinstance(it.value, (cst.Name, cst.Attribute))
                                       and isinstance(self.ev(st, it), TupVal)):
                return None  # (a literal list's other slices, `streams[2:]`: the items stream_slice keeps)
            if sliced is not None:
                positions, it = sliced, it.value
                bounds = {ALL: (None, None), (MIDDLE, LAST): (1, None), (FIRST, MIDDLE): (None, -1)}[sliced]
            if isinstance(it, cst.Call) and call_name(it) in ("list", "tuple") and isinstance(it.func, cst.Name) \
                    and len(it.args) == 1:
                it = it.args[0].value
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "reversed" \
                and len(it.args) == 1:
            it = it.args[0].value
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range":
            index = _range_positions(it)
            if index is None or not isinstance(target, cst.Name) or positions != ALL:
                return None
            if element_use(node.body, target.value) is None:
                return None
            self.note_round_indexes(node, index, None, False)  # `if i > 0:` in a round (roundtests.py)
            return [[(target, IVal(p))] for p in index]
        parts = self._element_parts(st, it, target, node)
        if parts is None:  # (also a slice of the enumeration: its indexes are still those of every collection)
            parts = _parallel_parts(it, target, node.body)
            if parts is not None:
                self.note_round_indexes(node, positions, None, bounds != (None, None))
        if parts is None:
            return None
        indexed = next((coll for _t, coll, k in parts if coll is not None and k not in (VALUE, "index")), None)
        if any(k == "index" for _t, _c, k in parts) and indexed is not None:
            items = self.ev(st, indexed)
            self.note_round_indexes(node, positions, items if isinstance(items, TupVal) else None,
                                    bounds != (None, None))
        rounds = []
        for p in positions:
            binding = []
            for tnode, coll, kind in parts:
                binding.append((tnode, self._element(st, coll, kind, p, bounds) if coll is not None else
                                (IVal(p) if kind == "index" else None)))
            rounds.append(binding)
        return rounds

    def _element_parts(self, st: State, it: cst.BaseExpression, target: cst.BaseExpression, node: cst.For):
        """[(target node, collection expr or None, kind)] for ``xs`` / ``enumerate(xs)`` / ``zip(a, b)`` /
        ``d.values()`` / ``d.items()``; None when no part is a stream / event collection."""
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("enumerate", "zip"):
            if any(a.keyword is not None or a.star for a in it.args) or not it.args:
                return None
            elts = _unpacked(target, 2 if it.func.value == "enumerate" else len(it.args))
            if elts is None:
                return None
            if it.func.value == "enumerate":
                if len(it.args) != 1:
                    return None
                inner = self._element_parts(st, it.args[0].value, elts[1], node)
                return None if inner is None else [(elts[0], None, "index"), *inner]
            parts = []
            for tnode, arg in zip(elts, it.args):
                inner = self._element_parts(st, arg.value, tnode, node)
                # a collection walked in step with the streams: its element of the same position
                parts.extend(inner if inner is not None else [(tnode, arg.value, VALUE)])
            return parts if any(coll is not None and k != VALUE for _t, coll, k in parts) else None
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
                and it.func.attr.value in ("values", "items"):
            if it.func.attr.value == "items":
                elts = _unpacked(target, 2)
                if elts is None:
                    return None
                inner = self._element_parts(st, it.func.value, elts[1], node)
                return None if inner is None else [(elts[0], None, None), *inner]
            it = it.func.value
        if not isinstance(it, (cst.Name, cst.Attribute, cst.Subscript)):
            return None
        if not isinstance(target, cst.Name):
            return None
        kind = self._collection_kind(st, it, node, target.value)
        return None if kind is None else [(target, it, kind)]

    def _collection_kind(self, st: State, coll: cst.BaseExpression, node: cst.For, name: str) -> str | None:
        v = self.ev(st, coll)
        if isinstance(v, TupVal):
            kinds = {self.kind_of(st, i) for i in v.items}
            return kinds.pop() if len(kinds) == 1 and None not in kinds and v.items else None
        key = self.render(st, coll)
        if re.search(re.escape(key) + _LITERAL_INDEX, self._fn_text()) and \
                any(m not in (FIRST, LAST) for m in re.findall(re.escape(key) + _LITERAL_INDEX, self._fn_text())):
            return None  # `streams[2]` written somewhere: its elements are addressed one by one
        declared = self._declared_kind(st, coll, key)
        if declared is False:
            return None
        if declared is not None:
            return declared
        return element_use(node.body, name)

    def _declared_kind(self, st: State, coll: cst.BaseExpression, key: str) -> str | bool | None:
        """STREAM / EVENT when the collection's visible assignments build a list of them, False when
        they build something else, None when none is visible."""
        base = key.split("[", 1)[0]
        if isinstance(coll, cst.Subscript):
            return None
        if base.startswith("self.") and base.count(".") == 1:
            frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                        (self.file, self.fn))
            cls = frame_file.classes.get(frame_fn.class_name or "")
            if cls is None:
                return None
            kind = attr_kind(self.project, frame_file, cls, base[5:])
            if kind is None:
                targets = {f"self.{base[5:]}", f"{cls.name}.{base[5:]}"}
                if any(a.target in targets for m in cls.methods.values() for a in m.assigns):
                    return False
                return None
        elif "." not in base and isinstance(coll, cst.Name):
            values = self.cfn.name_assigns.get(coll.value)
            if not values:
                return None
            kinds = {kind_of_value(self.project, self.cfile, v) for v in values}
            kind = kinds.pop() if len(kinds) == 1 else None
            if kind is None and all(isinstance(v, cst.Call) and self._run_kind(st, v) is None
                                    and self.project.call_target(self.cfile, self.cfile.call_site(v)) is not None
                                    for v in values if self.cfile.call_site(v) is not None) \
                    and all(self.cfile.call_site(v) is not None for v in values):
                return None  # `streams = _side_streams(n)`: a project helper's result says nothing (the loop body decides)
        else:
            return None
        return {STREAM_LIST: STREAM, EVENT_LIST: EVENT}.get(kind or "", False)

    def spliced(self, st: State, whole: cst.BinaryOperation, left: object, right: object) -> TupVal:
        """``a + b`` with a literal list or tuple on one side: the longer tuple. A side that is a collection of
        streams / events of unknown length (``[torch.cuda.Stream() for _ in range(n - 1)]``, ``self.side_streams``)
        or made by a project helper returning one, adds its representative first and last elements, so ``streams = [main] + [Stream() for ...]`` walked by a
        loop is the current stream then side streams (``streams[1]`` ... ``streams[-1]``, named after the list the
        function binds; a named collection keeps its own keys, ``self.side_streams[0]``), and a join over
        ``streams[1:]`` is told from one over ``streams[2:]``; any other side is one unknown item."""
        items: list = []
        for node, v in ((whole.left, left), (whole.right, right)):
            if isinstance(v, TupVal):
                items.extend(v.items)
                continue
            kind = self._run_kind(st, node)
            if kind is None:
                items.append(None)
                continue
            make = SVal if kind == STREAM else EVal
            name = next((n for n, vals in self.cfn.name_assigns.items() if any(x is whole for x in vals)), None) \
                if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.Call)) else None
            last = node is whole.right
            if name is None:
                key = self.render(st, node)
                keys = (f"{key}[0]", f"{key}[-1]")
            else:
                k = len(items)
                keys = (f"{name}[{k}]", f"{name}[-1]" if last else f"{name}[{k + 1}]")
            items.extend(make(k) for k in keys)
            if kind == STREAM:
                self.note_fresh_run(keys, node)  # a run of new streams (roundtests.py)
        return TupVal(tuple(items))

    def _run_kind(self, st: State, node: cst.BaseExpression) -> str | None:
        """STREAM / EVENT when ``node`` is a collection of them of unknown length, else None."""
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            kind = kind_of_value(self.project, self.cfile, node)
        elif isinstance(node, cst.Call):  # a project helper every non-empty return of which is such a list
            site = self.cfile.call_site(node)
            target = self.project.call_target(self.cfile, site) if site is not None else None
            if target is None:
                return None
            fn, tfile = target
            values = [v for r in fn.returns if r.value is not None for v in
                      (fn.name_assigns.get(r.value.value, [r.value]) if isinstance(r.value, cst.Name) else [r.value])]
            kinds = {kind_of_value(self.project, tfile, v) for v in values
                     if not (isinstance(v, (cst.List, cst.Tuple)) and not v.elements)}
            kind = kinds.pop() if len(kinds) == 1 else None
        elif isinstance(node, (cst.Name, cst.Attribute)):
            declared = self._declared_kind(st, node, self.render(st, node))
            kind = {STREAM: STREAM_LIST, EVENT: EVENT_LIST}.get(declared) if isinstance(declared, str) else None
        else:
            return None
        return {STREAM_LIST: STREAM, EVENT_LIST: EVENT}.get(kind or "")

    @staticmethod
    def stream_slice(base: TupVal, e: cst.Subscript) -> TupVal | None:
        """``streams[1:]`` of a literal collection of streams / events (no step): its items. A bound that is no
        literal is taken at its widest (``streams[1:n]`` as ``streams[1:]``, ``streams[k:]`` as all of it): a join
        over it may cover every element, so it is not taken to leave one out."""
        if len(e.slice) != 1 or not isinstance(e.slice[0].slice, cst.Slice) or e.slice[0].slice.step is not None \
                or not base.items or not all(isinstance(i, (SVal, EVal)) for i in base.items):
            return None
        sl = e.slice[0].slice
        bounds = [None if b is None else int_literal(b) for b in (sl.lower, sl.upper)]
        return TupVal(base.items[bounds[0]:bounds[1]])

    def selection(self, st: State, e: cst.BaseExpression) -> KVal | None:
        """A comprehension selecting elements of a collection of untracked type themselves (``[op for op in
        self.recv_ops if op.src_rank == rank]``, ``{op.task_id: op for op in ops}``: the values) holds the same
        objects: it is that collection (a loop over it walks places of the collection's elements), else None."""
        f = e.for_in
        picked = e.value if isinstance(e, cst.DictComp) else getattr(e, "elt", None)
        if isinstance(e, cst.SetComp) or f.inner_for_in is not None or not isinstance(f.target, cst.Name) \
                or not isinstance(picked, cst.Name) or picked.value != f.target.value:
            return None
        it = self.ev(st, f.iter)
        return it if isinstance(it, KVal) and not it.key.startswith("<") and self.kind_of(st, it) is None else None

    def argument_elements(self, st: State, node: cst.For) -> dict[str, object]:
        """The loop variables bound to elements of a collection the caller handed in (``for static, example in
        zip(static_inputs, example_inputs)``, ``for i, g in enumerate(grads)``) that are evidently tensors:
        the parameter is annotated as a sequence of tensors (``Sequence[torch.Tensor]``), or the loop body
        applies a tensor-only method to the variable (``example.copy_(...)``, ``g.view(-1)``). Like a tensor
        parameter, each is the caller's tensor produced on its current stream shortly before the call (an
        argument storage, reported with medium confidence): a side-stream scope reading or writing it needs
        a fork. Only in the function itself (not in an inlined helper), only parameters the flow does not
        track (stream / event collections are walked by :meth:`element_rounds` first). A loop variable
        walking a zipped / enumerated collection of untracked type is its place (:meth:`placed_element`)."""
        it, target = node.iter, node.target
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("list", "tuple") \
                and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star:
            it = it.args[0].value  # `for k, b in list(self.staged.items())`: a copy of the same elements
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate") \
                and it.args and not any(a.keyword is not None and a.keyword.value != "strict" or a.star
                                        for a in it.args):
            args = [a.value for a in it.args if a.keyword is None]  # (`zip(a, b, strict=True)`: the same pairs)
            elts = _unpacked(target, 2 if it.func.value == "enumerate" else len(args))
            if elts is None or (it.func.value == "enumerate" and len(args) != 1):
                return {}
            pairs = list(zip(elts[1:], args)) if it.func.value == "enumerate" else list(zip(elts, args))
        elif isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
                and it.func.attr.value == "items":  # `for k, op in self.ops_by_id.items()`: the values
            elts = _unpacked(target, 2)
            if elts is None:
                return {}
            pairs = [(elts[1], it.func.value)]
        else:
            pairs = [(target, it)]
        found: dict[str, object] = {}
        params = {p.name.value: p for p in (*self.fn.node.params.posonly_params, *self.fn.node.params.params,
                                              *self.fn.node.params.kwonly_params)}
        for tnode, coll in pairs:
            if not isinstance(tnode, cst.Name):
                continue
            if tnode is not target:  # `for i, b in enumerate(self.buckets)`: a place of its elements
                placed = self.placed_element(st, self.ev(st, coll))
                if placed is not None:
                    found[tnode.value] = placed
            if len(self.frames) != 1 or self.cfg.args_exempt:
                continue
            direct = isinstance(coll, cst.Name) and coll.value in params
            if direct:
                root = coll.value
            else:  # (`batch.args[i]`: its contents; the flow visits a loop many times: once per loop)
                memo = derived(self.project, "param_root")
                key = (id(node), id(coll))
                if key not in memo:
                    memo[key] = param_root(self.fn, coll, node)
                root = memo[key]
            v = st.env.get(root) if root is not None else None
            if not (isinstance(v, KVal) and v.opaque and v.key == root):
                continue
            ann = params[root].annotation if direct else None
            if not (element_tensor_annotation(ann.annotation if ann is not None else None)
                    or self._tensor_used(node.body, tnode.value) or tensor_narrowed(node.body, tnode.value)):
                continue
            S = self.new_storage(st, "arg", MAIN, None, Access(MAIN, 0, None, {}))
            S.container = coll.value if direct else None  # (its lifetime is the caller's list's: flow/argdrops.py)
            found[tnode.value] = self.new_tensor(st, S.sid)
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(it, cst.Name) and it.value in params \
                and len(self.frames) == 1 and not self.cfg.args_exempt:
            found.update(self._record_elements(st, target, params[it.value]))
        return found

    def starred_item(self, st: State, e: cst.BaseExpression) -> object:
        """``*inputs`` in a tuple / list display (``for t in (idx, *inputs): t.record_stream(s)``): a tracked
        tensor value standing for the tensors handed in (its elements share its storage); for a parameter
        annotated as a sequence of tensors (``inputs: Iterable[torch.Tensor]``), the caller's tensors, like
        :meth:`argument_elements`' elements; else nothing known."""
        v = self.ev(st, e)
        if isinstance(v, TVal):
            return None if self.is_host(st, v) else v
        params = {p.name.value: p for p in (*self.fn.node.params.posonly_params, *self.fn.node.params.params,
                                              *self.fn.node.params.kwonly_params)}
        if not (isinstance(e, cst.Name) and isinstance(v, KVal) and v.opaque and v.key == e.value
                and e.value in params) or len(self.frames) != 1 or self.cfg.args_exempt:
            return None
        ann = params[e.value].annotation
        if not element_tensor_annotation(ann.annotation if ann is not None else None):
            return None
        S = self.new_storage(st, "arg", MAIN, e.value, Access(MAIN, 0, None, {}))
        S.container = e.value  # (its lifetime is the caller's collection's: flow/argdrops.py)
        return self.new_tensor(st, S.sid)

    def _record_elements(self, st: State, target: cst.BaseExpression, param: cst.Param) -> dict[str, object]:
        """``for name, tensor in named_tensors`` over a parameter annotated as a sequence of tuples
        (``list[tuple[str, torch.Tensor]]``): the loop variables at the tensor positions are the caller's
        tensors, like :meth:`argument_elements`' elements."""
        v = st.env.get(param.name.value)
        if not (isinstance(v, KVal) and v.opaque and v.key == param.name.value) or param.annotation is None:
            return {}
        fields = tuple_fields(param.annotation.annotation)
        elts = _unpacked(target, len(fields)) if fields else None
        found: dict[str, object] = {}
        for elt, field in zip(elts or (), fields or ()):
            if isinstance(elt, cst.Name) and "Tensor" in field or isinstance(elt, cst.Name) and "Parameter" in field:
                S = self.new_storage(st, "arg", MAIN, None, Access(MAIN, 0, None, {}))
                S.container = param.name.value
                found[elt.value] = self.new_tensor(st, S.sid)
        return found

    def _tensor_used(self, body: cst.CSTNode, name: str) -> bool:
        """Does ``body`` apply a tensor-only method to ``name`` (not one a class of the module defines), or test
        it as a tensor (``if isinstance(name, torch.Tensor):``) and copy it to the host (``name.to("cpu",
        non_blocking=True)``, ``name.cpu()``: device memory, not a host batch being uploaded)?"""
        own = {m for cls in self.cfile.classes.values() for m in cls.methods}
        stack: list[cst.CSTNode] = [body]
        while stack:
            n = stack.pop()
            if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(n, cst.If) and tensor_test(n.test, name) and _copied_to_host(n.body, name):
                return True
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) \
                    and n.func.value.value == name and tensor_only_method(n.func.attr.value) \
                    and n.func.attr.value not in own:
                return True
            stack.extend(children(n))
        return False

    def round_part(self, st: State, target: cst.Subscript) -> str | None:
        """The representative position whose own part of a tensor ``target`` writes in a round of an element loop:
        ``out[i] = ...`` or ``out[idx[i]] = ...`` (an index the round's variable selects: the rows of one expert /
        species / replica, which the loop's other elements do not write), None for any other subscript."""
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            return None
        index = target.slice[0].slice.value
        names = {n.value for n in [index, *descendants(index)] if isinstance(n, cst.Name)}
        positions = {v.pos for n in names if isinstance(v := st.env.get(n), IVal)}
        return positions.pop() if len(positions) == 1 else None

    def _fn_text(self) -> str:
        text = self._elem_texts.get(id(self.cfn))
        if text is None:
            text = self._elem_texts[id(self.cfn)] = self.cfile.code(self.cfn.node)
        return text

    def _element(self, st: State, coll: cst.BaseExpression, kind: str, pos: str,
                 bounds: tuple[int | None, int | None]) -> object:
        v = self.ev(st, coll)
        if isinstance(v, TupVal):  # a literal list: its real items
            items = v.items[bounds[0]:bounds[1]]
            if not items:
                return None
            if pos == MIDDLE and bounds != (None, None):  # the whole list's second item, if the slice keeps it
                mid = 1 - (bounds[0] or 0)  # (`[s0, s1, main][:-1]`: s1; `[main, s1, s2, s3][1:]`: s1)
                return items[mid] if 0 <= mid < len(items) else items[0]
            return items[0] if pos == FIRST or (pos == MIDDLE and len(items) <= 2) else \
                items[-1] if pos == LAST else items[1]
        if kind == VALUE:
            return self._value_element(st, v, pos)
        key = f"{self.render(st, coll)}[{pos}]"
        return SVal(key) if kind == STREAM else EVal(key)

    def _value_element(self, st: State, v: object, pos: str) -> object:
        """The element at a representative position of a collection zipped with streams
        (``for s, grad in zip(self.comm_streams, grads)``): a view of that element's part of a tracked
        tensor, the element's place in a collection of untracked type (``grads[0]``: a tensor once an op
        writes it), else nothing known."""
        if isinstance(v, TVal) and not self.is_host(st, v):
            view = self.new_tensor(st, v.sid, v.vid)
            view.part = pos
            return view
        if isinstance(v, KVal) and not v.key.startswith("<"):
            return KVal(f"{v.key}[{pos}]", v.glob, v.opaque)
        return None


def _copied_to_host(body: cst.CSTNode, name: str) -> bool:
    """``name.cpu()`` / ``name.to("cpu", ...)`` / ``name.to(torch.device("cpu"), ...)`` in ``body``
    (placement.host_target; not ``pin_memory()``, which only a host tensor takes)."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) \
                and n.func.value.value == name and n.func.attr.value != "pin_memory" \
                and host_target(n, n.func.attr.value):
            return True
        stack.extend(children(n))
    return False


def tuple_fields(annotation: cst.BaseExpression) -> list[str] | None:
    """The field annotations (as code) of a sequence-of-tuples annotation: ``list[tuple[str, Tensor]]`` ->
    ``["str", "Tensor"]``; None for any other annotation."""
    code = node_code
    if not (isinstance(annotation, cst.Subscript) and len(annotation.slice) == 1
            and code(annotation.value).rsplit(".", 1)[-1] in ("List", "list", "Sequence", "Iterable", "Tuple", "tuple")):
        return None
    inner = annotation.slice[0].slice
    inner = inner.value if isinstance(inner, cst.Index) else None
    if not (isinstance(inner, cst.Subscript) and code(inner.value).rsplit(".", 1)[-1] in ("Tuple", "tuple")):
        return None
    out = [code(e.slice.value) for e in inner.slice if isinstance(e.slice, cst.Index)]
    return None if "..." in out else out


def _parallel_parts(it: cst.BaseExpression, target: cst.BaseExpression, body: cst.CSTNode) -> list | None:
    """``for i, net in enumerate(nets)`` over a collection that holds no streams or events, whose body uses
    ``streams[i]`` / ``events[i]`` (the enumeration index itself) as a stream or an event: the collections are
    walked in step (one expert / replica / species per stream, as an index loop ``for i in range(len(nets))``
    whose body subscripts them), so the index takes the representative positions (``net`` stays unknown). Only a
    loop producing on the elements (a stream scope, a fork, a record): one that only joins ``events[i]`` keeps the
    collapsed reading. None for anything else (a zip, ``streams[i - 1]``: collapsed); a slice of the enumeration
    is the caller's (:meth:`Elements.element_rounds` keeps the slice's positions)."""
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate"
            and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star):
        return None
    elts = _unpacked(target, 2)
    if elts is None or not isinstance(elts[0], cst.Name) \
            or element_use(body, elts[0].value, True) is None:
        return None  # (a loop that only waits on `events[i]` keeps the reading of flow/elementwaits.py)
    return [(elts[0], None, "index"), (elts[1], None, None)]


def _unpacked(target: cst.BaseExpression, n: int) -> list[cst.BaseExpression] | None:
    if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == n \
            and not any(isinstance(el, cst.StarredElement) for el in target.elements):
        return [el.value for el in target.elements]
    return None


__all__ = ["Elements"]
