"""Control flow: statements, branches, loops and ``with`` scopes.

Branches fork paths (bounded by ``MAX_PATHS``); ``if`` tests are correlated by expression so
``if self.flag: fork ... if self.flag: join`` never yields the impossible mix; loops run twice; early
returns end a path (after the ``finally`` blocks around them: finals.py); ``try`` runs body/else/finally. A stream scope pushes its stream for the body and
remembers the last op queued on it (for the join checks)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.captures import capture_kind
from streamlint.model.ctxfactories import stream_condition
from streamlint.model.file import string_value
from streamlint.model.flow.calls import block_returns, node_mentions_ordering
from streamlint.model.flow.coarse import coarse_choice, ordering_test
from streamlint.model.flow.counters import NVal
from streamlint.model.flow.leaves import closure_container
from streamlint.model.flow.promises import carried, record_fields
from streamlint.model.flow.results import Unjoined
from streamlint.model.flow.reuse import round_streams, settle_loop_frees
from streamlint.model.flow.guards import known_none, null_context_choice, ordering_query, same_operator_operands, \
    stream_type_test
from streamlint.model.flow.handles import handle_binding
from streamlint.model.flow.heldhandles import held_handle
from streamlint.model.flow.guessedresults import inherit_guess
from streamlint.model.flow.hostnames import host_handle, host_object
from streamlint.model.flow.handlestreams import handle_stream
from streamlint.model.flow.wrapperforks import entry_event_waits, forks_on_entry, joins_on_exit, yields_caller_stream
from streamlint.model.flow.values import (AnalysisBudgetExceeded, CVal, CtxVal, EVal, HVal, KVal, LOOP_UNROLL, MAX_PATHS,
                                          MAX_STEPS, NONE, SVal, ScopeRun, State, TVal, TupVal, FieldsVal)
from streamlint.model.streams import declared_globals, MAIN, STREAM
from streamlint.model.syntax import contains, endless, literal_truth, strip_not, target_names, walked_names
from streamlint.model.tensoruse import tensor_places
from streamlint.model.placement import HOST_META, device_copy_call
from streamlint.model.wrappers import mode_of_test

MAX_TUPLE_ITER = 8  # a loop over a literal tuple of at most this many elements runs once per element


class ControlFlow:
    """Statements, branches, loops and scopes (mixin of :class:`~streamlint.model.flow.interp.Interp`).

    Interp state it uses: ``anchor``, ``cfg``, ``clock``, ``depth``, ``project``, ``rest``, ``single``,
    ``steps``, ``stream_tests``, ``unjoined``. It asks calls (activation); exprs (ev); orderings (kind_of,
    render, scope_stream, stream_key); storage (bind, escape, finalize, invalidate, new_tensor, op, tensors,
    unbind).
    """

    def mentions_ordering(self, node: cst.CSTNode) -> bool:
        if id(node) not in self._mentions:
            self._mentions[id(node)] = node_mentions_ordering(node)
        return self._mentions[id(node)]

    # ---- statements
    def block(self, stmts, states: list[State]) -> list[State]:
        stmts = list(stmts)
        for index, stmt in enumerate(stmts):
            nxt: list[State] = []
            for st in states:
                if st.done or st.flow is not None:
                    nxt.append(st)
                else:
                    self.rest = stmts[index + 1:]
                    nxt.extend(self.stmt(stmt, st))
            states = nxt[:MAX_PATHS]
            if not states:
                break
        return states

    def stmt(self, node: cst.CSTNode, st: State) -> list[State]:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise AnalysisBudgetExceeded
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseSmallStatement)):  # (alone: `if c: s.wait_stream(m)`)
            states = [st]
            for small in node.body if isinstance(node, cst.SimpleStatementLine) else (node,):
                nxt = []
                for s in states:
                    if s.done or s.flow is not None:
                        nxt.append(s)
                        continue
                    if self.depth == 0:
                        self.anchor = small
                        self.note_loose_uses(s, small)
                    else:
                        self.inner = (self.cfile, small)
                    nxt.extend(self.small(small, s))
                states = nxt
            return states
        if self.depth == 0:
            self.anchor = node
        else:
            self.inner = (self.cfile, node)
        if isinstance(node, cst.If):
            return self.if_(node, st)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, st)
        if isinstance(node, cst.With):
            return self.with_item(node, 0, st)
        if isinstance(node, cst.Try):
            return self.try_(node, st)  # (flow/finals.py)
        return [st]

    def small(self, node: cst.CSTNode, st: State) -> list[State]:
        if isinstance(node, cst.Expr):
            v = node.value
            if isinstance(v, cst.Yield):
                self.yielded(st, node)  # a hand-off to the consumer, as a return (escapes.py)
                self.with_body(st)
                return [st]
            self.ev(st, v)
            return [st]
        if isinstance(node, cst.Assign):
            chosen = self.choice_assign(node, st)  # `xs = (a, b) if f else (c,)`, `s = [a, b][i]`: choices.py
            if chosen is not None:
                return chosen
        if isinstance(node, cst.Assign):
            v = self.ev(st, node.value)
            for t in node.targets:
                self.assign(st, t.target, v, node.value)
            return [st]
        if isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.assign(st, node.target, self.ev(st, node.value), node.value)
            return [st]
        if isinstance(node, cst.AugAssign):
            target = self.ev(st, node.target)
            v = self.ev(st, node.value)
            if self.tensors(st, target) and not isinstance(target, KVal):
                self.op(st, node, [v], [target], result=False)
            elif isinstance(target, KVal) and isinstance(node.target, cst.Attribute) \
                    and self.cfile.code(node.target) in tensor_places(self.project, self.cfile, self.cfn):
                self.op(st, node, [v], [target], result=False)  # `bucket.grad_data *= s`: a place used as a tensor
            elif isinstance(node.target, cst.Name):
                self.bind(st, node.target.value, self.op(st, node, [target, v]) if self.tensors(st, v) else None,
                          node)
            return [st]
        if isinstance(node, cst.Del):
            targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
            for t in targets:
                expr = t.value if isinstance(t, cst.Element) else t
                if isinstance(expr, cst.Name) and expr.value in st.env:
                    old = st.env.pop(expr.value)
                    self.invalidate(st, expr.value)
                    self.unbind(st, old, "del", node)
                elif isinstance(expr, cst.Attribute) and st.loose_uses:
                    self.unset_place(st, expr)  # `del p.grad`
            return [st]
        if isinstance(node, cst.Return):
            v = self.ev(st, node.value) if node.value is not None else None
            if self.depth:
                st.done, st.ret = True, v
                return [st]
            for st in self.run_finals(st):  # the enclosing `finally` blocks run before the caller goes on
                self.returned.append(st)  # (a class protocol's producer summary reads these too: protocols.py)
                self.unjoined_escape(st, v, node)
                self.pending_exit(st, v, node)
                self.escape(st, v)
                st.ret = v  # what the function hands out (a published event carries the join: storage.published_after)
                self.finalize(st)
            return []
        if isinstance(node, cst.Raise):
            return [] if not self.depth else [st]
        if isinstance(node, cst.Assert):  # its test is a host check: not interpreted as device work
            self.host_read(st, node.test, "an assert")
            key, positive = self.test_key(st, node.test)
            if key is not None and key not in st.assume and (not self.single or key.startswith("self.")):
                st.assume[key] = positive  # the code after `assert t` runs only where t holds
                if not self.single:
                    self.constrain(st, node.test, True)
            return [st]
        if isinstance(node, cst.Break):
            st.flow = "break"
        elif isinstance(node, cst.Continue):
            st.flow = "continue"
        return [st]

    def assign(self, st: State, target: cst.BaseExpression, v: object, value_node: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            if isinstance(v, TVal) and host_object(self.project, self.cfile, self.cfn, target.value, value_node):
                v = KVal(target.value, opaque=True)  # `results[0].outputs`, `n = conn.load()`; `slots[n:]`: hostnames
            elif isinstance(v, TVal) and (handle_binding(self.project, self.cfile, self.cfn, target.value, value_node)
                                          or held_handle(self.project, self.cfile, self.cfn, target.value, value_node)):
                v = HVal(target.value)  # `work = original(*args, async_op=True)`, then `work.wait()` (handles.py)
            elif isinstance(v, TVal) and host_handle(self.project, self.cfile, self.cfn, target.value, value_node):
                v = KVal(target.value, opaque=True)  # `mem = get_workspace(...)`, `mem.put_signal()`: no tensor
            if isinstance(v, SVal) and v.key.startswith("<stream@") and value_node is not None \
                    and isinstance(value_node, cst.Call) and target.value not in st.env \
                    and v not in st.globs.values():  # (a stream a module global holds keeps its identity)
                v = SVal(target.value)  # a stream created here: name it after its variable
            v = handle_stream(self, st, target.value, value_node) or v  # `s = ExternalStream(handle)`: handlestreams
            compared = self.stream_compare(st, value_node)
            if compared is not None:
                v = KVal(target.value, opaque=True, test=compared)
            if v is None and isinstance(value_node, cst.Comparison) and len(value_node.comparisons) == 1 \
                    and isinstance(value_node.comparisons[0].operator, (cst.Is, cst.IsNot)):
                key, positive = self.test_key(st, value_node)  # `has_ctx = meta.ctx is not None`: a flag alias
                if key is not None:
                    v = KVal(target.value, opaque=True, test=key if positive else f"!{key}")
            if v is None and isinstance(value_node, cst.Call) and not value_node.args \
                    and isinstance(value_node.func, (cst.Name, cst.Attribute)):
                getter = self.render(st, value_node)
                if not getter.startswith(("torch.", "torch_npu.")):
                    v = KVal(target.value, opaque=True, test=getter)  # e.g. ctx = get_comm_context()
            if v is None and isinstance(value_node, (cst.Name, cst.Attribute)) and not isinstance(v, TVal) \
                    and not (isinstance(value_node, cst.Attribute) and value_node.attr.value in HOST_META):
                rendered = self.render(st, value_node)  # (`dt = pool.dtype`: host metadata, no place of a tensor)
                v = KVal(rendered) if rendered.startswith("self.") else None
            v = self.unknown_handed(st, target.value, value_node, v)  # `out = fn(*inputs)` returned (listreads.py)
            v = self.opaque_result(st, target.value, value_node, v)  # `out = thunk()` handed back (opaqueresults.py)
            self.bind(st, target.value, v, value_node)
            if (got := self.__dict__.get("list_return")) and got[0] == id(value_node) and got[1]:
                st.held[target.value] = got[1]  # the local list an inlined helper returned (frames.returned_container)
            self.note_not_none(st, target, v, value_node)  # `work = works_k + works_v`: never None (notnone.py)
            self.hold_dict(st, target.value, value_node)  # `staged = {"values": pinned}`: the dict holds them
            if isinstance(value_node, cst.Call) and any(a.keyword is not None for a in value_node.args):
                self.record_object(st, target.value, value_node)
            if v is not None and target.value in declared_globals(self.cfn):
                st.globs[(self.cfile.module_name, target.value)] = v  # `global _S; _S = stream`: a module place
            if v is None and isinstance(value_node, cst.BooleanOperation):
                self.conjunction_flag(st, target, value_node)  # (flagclauses.py)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [el.value for el in target.elements]
            items = self.unpack(st, v, len(elements))
            for el, item in zip(elements, items):
                if not isinstance(el, cst.StarredElement):
                    self.assign(st, el, item, value_node)
        elif isinstance(target, cst.Attribute):
            if st.loose_uses:  # `p.grad = None`: the tensor the attribute held loses that owner
                self.unset_place(st, target, value_node)
            self.escape(st, self.displayed(v, value_node), into=target)  # (a dict display: its values are kept)
            key = self.field_rebind(st, target, value_node)  # (rendered; an index symbol's rebinding: indexsyms.py)
            self.note_event_field(st, target, v, key)  # `req.ready = Event()`: travels with req (escapes.py)
            if key.startswith("self.") and key.count(".") == 1:
                # read back in this call (`self.inputs = [...]; f(*self.inputs)`): the same tensors; the same
                # stream (`self._caller = current_stream(); ...; self._engine = self._caller`: the current one)
                if isinstance(v, (TVal, TupVal)) or isinstance(v, SVal) and not v.key.startswith("<stream@"):
                    st.env[key] = v
                else:
                    st.env.pop(key, None)
            if key.startswith("self.") or key.count(".") == 1 and isinstance(target.value, cst.Name):
                # what the object holds at the exits (a class protocol's producer; a record's: recordwriters.py)
                self.field_writes.setdefault(key, []).extend(tv.sid for tv in self.tensors(st, v))
                if isinstance(v, EVal):  # `cand.ready = ev`: the event the record holds (recordwriters.py)
                    self.__dict__.setdefault("field_events", {})[key] = v.key
            if st.assume:
                for k in [k for k in st.assume if key in k]:
                    del st.assume[k]
            self.note_literal(st, key, v)  # `self._pending = True`, `self.mode = "drop"`: later tests know (fieldliterals.py)
        elif isinstance(target, cst.Subscript):
            base = self.ev(st, target.value)
            keys = [self.ev(st, el.slice.value) for el in target.slice if isinstance(el.slice, cst.Index)]
            if len(target.slice) == len(keys) == 1 and isinstance(keys[0], CVal) and isinstance(keys[0].value, str):
                base = self.keyed_entry(st, base, keys[0].value)  # `meta["zero"] = ...`: that entry only
            elif isinstance(base, TVal) and (pos := self.round_part(st, target)) is not None:
                base = self.new_tensor(st, base.sid, base.vid)  # `out[i] = ...` in a round of an element loop:
                base.part = pos  # that element's own part (as a read of `out[i]`, exprs.subscript)
            tensor_value = isinstance(v, (TVal, TupVal)) or (isinstance(v, CVal) and isinstance(v.value, str)
                                                              and v.value.replace(".", "").isdigit()) \
                or device_copy_call(value_node)  # (`pool[i] = host.to(self.device)`: a tensor, whatever `host` is)
            if isinstance(target.value, cst.Name) and not isinstance(base, TVal):
                v = self.opaque_result(st, target.value.value, value_node, v)  # `results[i] = thunk()` (opaqueresults.py)
            if isinstance(base, TVal) or (isinstance(base, KVal) and tensor_value and self.tensors(st, base)):
                self.op(st, target, [v], [base], result=False, read_writes=False)
            else:
                self.escape(st, self.displayed(v, value_node), into=target)  # a container slot (dict / list of
                # events, tensors, objects; a dict display's values: `self._pending[k] = {"buf": b, "ready": ev}`)
                self.slot_put(st, target, v)
                if isinstance(target.value, cst.Name) and (target.value.value in st.env
                                                           or closure_container(self.cfn, target.value.value)):
                    held = tuple(tv.sid for tv in self.tensors(st, v))
                    if held:  # the local list now holds them: handing it back hands them back
                        name = target.value.value
                        st.held[name] = tuple(dict.fromkeys(st.held.get(name, ()) + held))
                else:  # a slot of a slot (`state[mode]["scale"] = host`): the outer container holds pending copies
                    self.hold_pending(st, target, v)

    def record_object(self, st: State, name: str, call: cst.Call) -> None:
        """``ctx = StepEvents(done=events[layer][KEY])``: ``ctx.done`` is that event (promises.py)."""
        fields = record_fields(self.project, self.cfile, call)
        held = {}
        for a in call.args:
            if a.keyword is not None and a.keyword.value in fields \
                    and isinstance(a.value, (cst.Name, cst.Attribute, cst.Subscript)):
                v = self.ev(st, a.value)
                if carried(v):
                    held[a.keyword.value] = v
                elif v is None and isinstance(a.value, (cst.Attribute, cst.Subscript)):
                    held[a.keyword.value] = KVal(self.render(st, a.value))
        if held:
            st.fields[name] = held

    def unpack(self, st: State, v: object, n: int) -> list[object]:
        if isinstance(v, FieldsVal):
            return [v] * n  # a record (or a list of records) of a project call: each part stands for it all
        if isinstance(v, TupVal) and len(v.items) == n:
            return list(v.items)
        if isinstance(v, TVal):
            if v.multi == "view":
                base = st.vals.get(v.base) if v.base is not None else None
                parent = base if base is not None else v
                return [self.new_tensor(st, parent.sid, parent.vid) for _ in range(n)]
            S = st.stores.get(v.sid)
            out: list[object] = []
            for _ in range(n):
                if S is None:
                    out.append(None)
                    continue
                clone = S.clone()
                clone.sid = self.new_id()
                clone.name = None
                st.stores[clone.sid] = clone
                inherit_guess(self, v.sid, clone.sid)  # (a part of a guessed result is one: guessedresults.py)
                out.append(self.new_tensor(st, clone.sid))
            return out
        if isinstance(v, KVal) and not self.depth and v.key in self.__dict__.get("container_params", ()):
            return [KVal(f"{v.key}[{i}]", v.glob) for i in range(n)]  # `a, b = outputs`: as `outputs[0]`
        return self.family_parts(st, v, n)  # (`t, ev = self.q.popleft()`: its tensor / event parts)

    def decide(self, st: State, test: cst.BaseExpression) -> bool | None:
        if (literal := literal_truth(test)) is not None:  # `if True:` / `if 0:` take one arm (syntax.literal_truth)
            return literal
        if (parsed := mode_of_test(test)) is not None:
            return (self.cfg.mode in parsed[1]) == parsed[2]
        if (first := self.first_round_test(st, test)) is not None:  # (before the bounds kept by the test's text)
            return first
        if (rounded := self.round_test(st, test)) is not None:  # a collection walk's round: its index, its stream
            return rounded
        if (bounded := self.bound_test(st, test)) is not None:  # `i <= n` once an earlier round learnt of n
            return bounded
        if (counted := self.counter_test(st, test)) is not None:
            return counted
        if (ordering := ordering_query(test)) is not None:
            return ordering
        if (assigned := self.literal_test(st, test)) is not None:  # `self.sync_at == "early"` (fieldliterals.py)
            return assigned
        key, positive = self.test_key(st, test)
        if key is not None and key in st.assume:
            return st.assume[key] == positive
        if key is not None:
            for clause in st.clauses:
                mine = [lit for lit in clause if lit[0] == key]
                others = [lit for lit in clause if lit[0] != key]
                if len(mine) == 1 and all(k in st.assume and st.assume[k] != p for k, p in others):
                    return mine[0][1] == positive
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comp = test.comparisons[0]
            if isinstance(comp.operator, (cst.Is, cst.IsNot)) and isinstance(comp.comparator, cst.Name) \
                    and comp.comparator.value == "None" and isinstance(test.left, cst.Name):
                v = st.env.get(test.left.value, "?")
                if v == "?":
                    return None
                is_none = v is NONE
                if isinstance(v, EVal) and v.key == test.left.value in self.fn.all_params and v.key not in self.given_events:
                    return None  # an event the caller hands in may be None (`cuda_graph_event` when not given)
                if isinstance(v, (TVal, SVal, EVal)):
                    is_none = False
                elif not is_none:
                    return None
                return is_none if isinstance(comp.operator, cst.Is) else not is_none
        if isinstance(test, cst.Name) and isinstance(st.env.get(test.value), CVal):
            return bool(st.env[test.value].value)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.decide(st, test.expression)
            return None if inner is None else not inner
        if isinstance(test, cst.BooleanOperation):
            # `if a and b:` joining what `if a: ... if b:` forked: decided by what the path knows of each
            left, right = self.decide(st, test.left), self.decide(st, test.right)
            short = isinstance(test.operator, cst.Or)  # the operand value that decides alone
            if left is short or right is short:
                return short
            if left is not None and right is not None:
                return left
        return None

    def test_key(self, st: State, test: cst.BaseExpression) -> tuple[str | None, bool]:
        test, positive = strip_not(test)
        if (tested := stream_type_test(test)) and (choice := null_context_choice(self.cfn.node.body, tested)):
            key, p = self.test_key(st, choice[0])  # `isinstance(s, Stream)` is the test `s` was bound under
            return key, bool(positive ^ choice[1] ^ p)
        if isinstance(test, cst.Name) and isinstance(st.env.get(test.value), KVal) and st.env[test.value].test:
            alias = st.env[test.value].test
            return (alias[1:], not positive) if alias.startswith("!") else (alias, positive)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)) \
                and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
            left, _ = self.test_key(st, test.left)
            if left is not None:
                is_op = isinstance(test.comparisons[0].operator, cst.Is)
                return f"{left} is None", positive if is_op else not positive
        if isinstance(test, (cst.Name, cst.Attribute, cst.Subscript)):
            return self.render(st, test), positive
        if isinstance(test, cst.Call) and not test.args:
            return self.render(st, test), positive
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "getattr" \
                and len(test.args) in (2, 3) and string_value(test.args[1].value) is not None:
            return f"{self.render(st, test.args[0].value)}.{string_value(test.args[1].value)}", positive
        if isinstance(test, (cst.Comparison, cst.BooleanOperation)):
            return self.cfile.code(test), positive
        return None, positive

    def branch(self, st: State, test: cst.BaseExpression, outcomes: list[tuple[bool, object]]) -> list[State]:
        """Run each (outcome, runner) consistent with what the path already assumes about ``test``."""
        known, (key, positive) = self.decide(st, test), self.test_key(st, test)
        compared = self.stream_compare(st, test)  # `if cur != side: side.wait_stream(cur)`: equal on the else path
        if compared is not None:
            key, positive = compared, True
            a, b, equal_when_true = self.stream_tests[compared]
            known = equal_when_true if a == b else st.assume.get(compared, known)
        todo = [(o, r) for o, r in outcomes if known is None or o == known]
        if len(todo) > 1 and (self.single or self.coarse and not any(getattr(r, "relevant", True) for _, r in todo)):
            todo = [self._preferred(todo) if self.single else coarse_choice(todo)]
        results: list[State] = []
        for i, (outcome, runner) in enumerate(todo):
            s = st if i == len(todo) - 1 else st.clone()
            if key is not None and key in self.stream_tests:
                a, b, equal_when_true = self.stream_tests[key]
                if (outcome == positive) == equal_when_true:
                    self.same_stream(s, a, b)  # one stream under two names (roundtests.py)
            if key is not None and (not self.single or key.startswith("self.") or "()" in key):
                s.assume[key] = outcome == positive
                if not self.single or self.steer is not None:  # (a steered run's helper: fieldliterals.py)
                    self.constrain(s, test, outcome)
                    self.propagate(s)  # what the flags' clauses force now (flagclauses.py)
            self.device_test(s, test, outcome)
            self.poll_test(s, test, outcome)  # `if ev.query():` the host saw it complete (flow/polls.py)
            self.release_test(s, test, outcome)  # a release stream None: its buffers not in use (releasestreams.py)
            self.counter_test(s, test, outcome)
            self.note_bound(s, test, outcome)
            results.extend(runner(s))
        return results

    def constrain(self, st: State, test: cst.BaseExpression, outcome: bool) -> None:
        """Facts about the operands of ``a or b`` / ``a and b`` once the test's outcome is known."""
        negate = False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, not negate
        if not isinstance(test, cst.BooleanOperation):
            return
        value = outcome != negate
        is_or = isinstance(test.operator, cst.Or)
        literals = []
        for operand in same_operator_operands(test):  # (`a and b and c`: the three of them)
            known = ordering_query(operand)
            if known is not None:  # a device-ordering query has one value on every analysed path
                if is_or == value and known == is_or:
                    return  # it alone makes `a or b` true / `a and b` false: nothing learnt of the other
                continue
            key, positive = self.test_key(st, operand)
            if key is None:
                return
            literals.append((key, positive))
        if is_or == value and len(literals) == 1:  # the other operand was the query: this one decided it
            k, p = literals[0]
            st.assume.setdefault(k, p if is_or else not p)
        elif is_or == value:  # `a or b` true / `a and b` false: at least one literal (negated for and)
            st.clauses.append(tuple((k, p if is_or else not p) for k, p in literals))
        else:  # `a or b` false: both false; `a and b` true: both true
            for k, p in literals:
                st.assume.setdefault(k, p if value else not p)

    def if_(self, node: cst.If, st: State) -> list[State]:
        rest = self.rest
        self.ev(st, node.test)
        self.host_read(st, node.test, "a branch test")

        def then(s: State) -> list[State]:
            return self.block(node.body.body, [s])

        def other(s: State) -> list[State]:
            if node.orelse is None:
                self.absent_event_waits(s, node)  # `if rec.ev is not None: s.wait_event(rec.ev)`: absentevents.py
                return [s]
            if isinstance(node.orelse, cst.If):
                return self.stmt(node.orelse, s)
            return self.block(node.orelse.body.body, [s])

        then.node, other.node = node.body, node.orelse  # type: ignore[attr-defined]
        other.relevant = (node.orelse is not None and self.mentions_ordering(node.orelse)) or (  # type: ignore[attr-defined]
            node.orelse is None and block_returns(node.body) and any(self.mentions_ordering(r) for r in rest))
        then.relevant = self.mentions_ordering(node.body) or (  # type: ignore[attr-defined]
            self.coarse and not other.relevant and ordering_test(self, node.test))
        return self.branch(st, node.test, [(True, then), (False, other)])

    def loop(self, node, st: State) -> list[State]:
        """A ``for`` / ``while`` loop, its body run ``LOOP_UNROLL`` times (once in single mode); a ``for``
        over a literal tuple holding tensors (``for t in (x, mix, sqr): t.record_stream(s)``, or a name
        bound to one) runs once per element, with the loop variable bound to that element."""
        entry_fanout = st.fanout  # (stream picks bound the paths they make per loop: flow/choices.py)
        elements = None
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            items = self.ev(st, node.iter)
            if isinstance(items, TupVal) and not isinstance(items, FieldsVal) \
                    and 0 < len(items.items) <= MAX_TUPLE_ITER \
                    and any(self.tensors(st, v) for v in items.items):
                elements = items.items
        bindings = self.element_rounds(st, node) if elements is None and isinstance(node, cst.For) else None
        counts = self.counter_rounds(st, node) if elements is None and bindings is None \
            and isinstance(node, cst.For) else None
        rounds = elements if elements is not None else bindings if bindings is not None \
            else counts if counts is not None else [None] * (1 if self.single else LOOP_UNROLL)
        states = [st]
        finished: list[State] = []
        for round_no, element in enumerate(rounds):
            nxt: list[State] = []
            start = (self.next_id, self.clock)  # (what this round allocates and queues: reuse.settle_loop_frees)
            for s in states:
                if counts is not None:  # an alternating-streams loop read with its counter's values
                    self.ev(s, node.iter)
                    if not self.counter_in_range(s, node, element):
                        finished.append(s)
                        continue
                    self.bind(s, node.target.value, NVal(element), node)
                elif elements is not None:
                    self.bind(s, node.target.value, element, node)
                elif bindings is not None:  # one representative element of a stream / event collection
                    self.ev(s, node.iter)
                    for target, value in element:
                        for name in target_names(target):
                            self.bind(s, name, value if isinstance(target, cst.Name) else None, node)
                elif isinstance(node, cst.For):
                    items = self.ev(s, node.iter)
                    walked = walked_names(node.iter)
                    handed = self.argument_elements(s, node)  # the caller's tensors, element by element
                    handed.update(self.covering_bindings(s, node))  # every index picking streams (indexsets.py)
                    for name in target_names(node.target):
                        self.bind(s, name, handed[name] if name in handed else self.copies_value(s, node, name)
                                  or (self.placed_element(s, items) if isinstance(node.target, cst.Name) else None)
                                  or self.typed_element(node, name), node)
                        if walked:
                            s.elem_of[name] = walked
                    self.hold_elements(s, node.iter, node.target)  # a local list of pending host copies
                    self.note_round(s, node, round_no)  # the index / first element of this round (rounds.py)
                else:
                    self.ev(s, node.test)
                    if self.decide(s, node.test) is False:
                        self.poll_test(s, node.test, False)  # `while not ev.query():` left: it completed
                        finished.append(s)
                        continue
                nxt.extend(self.block(node.body.body, [s]))
            states = []
            busy = round_streams(nxt, *start)
            for s in nxt:
                if s.flow == "break":
                    s.flow = None
                    finished.append(s)
                elif s.done:
                    finished.append(s)
                else:
                    s.flow = None
                    states.append(s)
                    if elements is None and counts is None:  # another round may follow: its allocations come first
                        settle_loop_frees(self, s, node, busy)
            states = states[:MAX_PATHS]
        states = self.leave_rounds(states, node, len(rounds)) if bindings is None and counts is None else states
        if endless(node):
            states = []  # `while True:` left by no break: only its returns (and raises) leave it
        self.poll_exits(states, node)  # `while not ev.query():` left after the rounds run: it completed
        self.end_covers(states + finished, node)  # a covering loop's variable is one element again (indexsets.py)
        if node.orelse is not None:
            states = self.block(node.orelse.body.body, states)
        for s in states + finished:
            s.fanout = entry_fanout
        return (states + finished)[:MAX_PATHS]

    def typed_element(self, node: cst.For, name: str) -> KVal | None:
        """``for cand in self.pending.get(k, ())`` over a container annotated with a project class's elements: the
        record, whose fields are places as a parameter's are (elementtypes.py)."""
        from streamlint.model.flow.elementtypes import element_class
        if not isinstance(node.target, cst.Name) or element_class(self.project, self.cfile, self.cfn, name) is None:
            return None
        return KVal(name)

    def with_item(self, node: cst.With, i: int, st: State) -> list[State]:
        if i == len(node.items):
            return self.block(node.body.body, [st])
        item = node.items[i]
        held = st.env.get(item.item.value) if isinstance(item.item, cst.Name) else None
        if isinstance(held, CtxVal):  # `ctx = torch.cuda.stream(s) if c else nullcontext()` ... `with ctx:`
            return self.stream_scope(node, i, st, held.key)
        site = self.cfile.scope_site(item)
        uses = self.project.scope_use(self.cfile, site).uses if site is not None and not (
            isinstance(item.item, cst.Name) and item.item.value in st.env) else ()  # (a context built before)
        stream_use = next((u for u in uses if u.role in apis.STREAM_SCOPE_ROLES
                           and (u.modes is None or self.cfg.mode in u.modes)), None)
        if stream_use is not None and stream_use.role is Role.NATIVE_STREAM_CONTEXT \
                and known_none(self, st, stream_use.arg("stream")):
            stream_use = None  # torch.npu.stream(None) does not switch, nor a stream this path knows is None
        if stream_use is not None:
            key = self.scope_stream(st, stream_use)
            activation = self.activation(st, stream_use)
            if activation is None and isinstance(item.item, cst.IfExp):
                # `with torch.cuda.stream(s) if flag else nullcontext():` switches only when `flag` holds
                choice = item.item
                if contains(choice.body, stream_use.node):
                    activation = (choice.test, True)
                elif contains(choice.orelse, stream_use.node):
                    activation = (choice.test, False)
            if activation is None and stream_use.role is Role.NATIVE_STREAM_CONTEXT:  # `self.side = Stream() if c
                # else None`: `torch.cuda.stream(self.side)` switches only where `c` holds (model/ctxfactories.py)
                activation = stream_condition(self.project, self.cfile, self.cfn, stream_use.arg("stream"))
            forks = forks_on_entry(self.project, self.cfile, stream_use)  # the wrapper forks its stream first
            joins = joins_on_exit(self.project, self.cfile, stream_use)  # ... and joins it back on exit
            events = entry_event_waits(self.project, self.cfile, stream_use)  # ... or waits an event of the object

            caller = yields_caller_stream(self.project, self.cfile, stream_use) and item.asname is not None \
                and isinstance(item.asname.name, cst.Name)
            def active(s: State) -> list[State]:
                if caller:  # `with on_side(dev) as caller:` names the stream current at the entry
                    s.env[item.asname.name.value] = SVal(s.cur)
                if forks:
                    self.wait_stream(s, key, s.cur)
                for event in events:
                    self.wait_event(s, key, self.event_key(s, None, cst.parse_expression(event)))
                out = self.stream_scope(node, i, s, key)
                for r in out if joins else ():
                    if not r.done:
                        self.wait_stream(r, r.cur, key)
                return out

            def inactive(s: State) -> list[State]:
                return self.with_item(node, i + 1, s)

            if activation is None:
                return active(st)
            test, positive = activation
            if test is None:
                return active(st) if positive else inactive(st)
            active.relevant = True  # type: ignore[attr-defined]
            return self.branch(st, test, [(positive, active), (not positive, inactive)])
        capture = "sync" if any(u.role is Role.GRAPH_CAPTURE for u in uses) \
            else capture_kind(self.project, self.cfile, site) if not uses else None
        if capture is not None:
            # `torch.cuda.graph` / `torch.npu.graph` (or a project capture object entering it): __enter__
            # synchronises the device before capture begins, and the captured work does not run at capture
            # time (it runs at replay, on the replaying stream). A capture object calling capture_begin()
            # itself does not synchronise: its captured work is not checked here at all (model/captures.py).
            self.ev(st, item.item)
            if capture == "sync":
                self.sync_all(st)
            st.regions.append((self.clock, st.cur, capture))
            out = self.with_item(node, i + 1, st)
            for r in out:
                if r.done or not r.regions:
                    continue
                start, stream, kind = r.regions.pop()
                if kind != "sync":
                    self.captured_outputs(r, start)  # (replays.py)
                    continue
                know = r.know(stream)
                for run in r.runs:
                    if run.top and run.start >= start and run.stream != stream and run.last is not None \
                            and know.get(run.stream, -1) < run.last:
                        self.unjoined.setdefault((id(run.node), "capture"),
                                                 Unjoined(run.node, run.stream, "capture", self.cfg.mode))
                self.tick()
                self.sync_all(r)  # nothing captured is pending on any stream after the capture
            return out
        v, code = self.ev(st, item.item), self.cfile.code(item.item)
        if not uses and isinstance(item.item, (cst.Name, cst.Attribute)) and (self.kind_of(st, v) == STREAM or any(
                site.method in ("wait_stream", "record_event", "synchronize") and isinstance(site.node.func, cst.Attribute)
                and (self.cfile.code(site.node.func.value) == code or site.method == "wait_stream" and site.node.args
                     and self.cfile.code(site.node.args[0].value) == code) for site in self.cfn.calls)):
            key = self.stream_key(st, v, item.item)  # `with stream:` switches to it (when it is one: guards.py)
            if isinstance(item.item, cst.Name) and (choice := null_context_choice(self.cfn.node.body, item.item.value)):
                return self.branch(st, choice[0], [(choice[1], lambda s: self.stream_scope(node, i, s, key)),
                                                   (not choice[1], lambda s: self.with_item(node, i + 1, s))])
            return self.stream_scope(node, i, st, key)
        return self.with_item(node, i + 1, st)

    def stream_scope(self, node: cst.With, i: int, s: State, key: str) -> list[State]:
        """The rest of the ``with`` (items after ``i``, then the body) running on stream ``key``."""
        run = ScopeRun(node, key, self.clock, None, self.depth == 0)
        s.runs.append(run)
        s.stack.append(key)
        idx = len(s.runs) - 1
        out = self.with_item(node, i + 1, s)
        for r in out:
            if r.done:
                continue
            if r.stack and r.stack[-1] == key:
                r.stack.pop()
            last = r.last_op.get(key)
            r.runs[idx].last = last if last is not None and last > r.runs[idx].start else None
        return out

