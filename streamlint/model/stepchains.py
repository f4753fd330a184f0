"""Protocol steps of a side stream: which methods of a class enter a stream with no wait of their own only as later
steps of a sequence whose first step waits (the entry discipline across methods).

An overlapped block split into methods a dispatcher calls in a fixed order (``pre_comm(x)``, ``fc1()``, ``fc2()``,
``post_comm()``, ``output = get_output()``) often waits on the current stream once, in the first step, and lets the
later steps enter the stream directly. The order is stated in the code by the fields the steps hand each other:
each later step requires a field (``assert self.cached_fc1_input is not None``, or ``if self.f is None: raise``,
before it enters the stream) that only its predecessor binds to a value and that the step itself sets back to
``None`` (it consumes what one run of its predecessor left). Following the predecessors back reaches a step whose
entries all wait: every later step then runs after that wait, in the same run of the protocol.

:func:`protocol_steps` answers per class and stream: the *chained* steps (entries that count as waited, the entry
discipline holding for the stream) and the *open* steps (the first and every step followed by another: a block the
current stream read and dropped while the protocol is open may go to the next step's allocation, which waits on
nothing). The last step closes the run: what it hands back, dropped after it returns, is covered by the first
step's wait of the next run. Any other method binding the field to a value (construction too) is a second producer:
no order is stated then.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.syntax import is_none, local_nodes


def protocol_steps(cls: ClassInfo, entries: dict[str, tuple[list[cst.With], bool]]) -> tuple[set[str], set[str]]:
    """For one stream of ``cls``: ``entries`` maps each method entering it to (its ``with`` statements onto it,
    whether all of them begin with or follow a wait). Returns (chained, open): the methods whose unwaited entries
    are later steps of a protocol begun by a waiting step, and the steps of such protocols that another step follows
    (the waiting first step included)."""
    pred: dict[str, str] = {}
    for name, (withs, waited) in entries.items():
        fn = cls.methods.get(name)
        if waited or fn is None or not withs:
            continue
        for field in _required_fields(fn, withs):
            setters = [m for m, f in cls.methods.items() if _binds_value(f, field)]
            if len(setters) == 1 and setters[0] != name and setters[0] in entries and _clears(fn, field):
                pred[name] = setters[0]
                break
    chained: set[str] = set()
    open_steps: set[str] = set()
    for name in pred:
        seen, cur = [name], pred[name]
        while cur in pred and cur not in seen:
            seen.append(cur)
            cur = pred[cur]
        if cur in seen or not entries[cur][1]:
            continue  # a cycle, or a first step that does not wait
        chained.add(name)
        open_steps.update(seen[1:])
        open_steps.add(cur)
    return chained, open_steps


def _required_fields(fn: FunctionInfo, withs: list[cst.With]) -> list[str]:
    """The ``self.*`` fields the method requires before its first ``with`` onto the stream: ``assert self.f is not
    None`` / ``assert self.f``, or ``if self.f is None: raise ...``, among the top-level statements before it."""
    body = fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else ()
    out: list[str] = []
    for stmt in body:
        if any(stmt is w for w in withs):
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assert) and (field := _not_none_test(small.test)):
                    out.append(field)
        elif isinstance(stmt, cst.If) and stmt.orelse is None and _raises(stmt.body) \
                and (field := _none_test(stmt.test)):
            out.append(field)
    return out


def _self_field(e: cst.BaseExpression) -> str | None:
    if isinstance(e, cst.Attribute) and isinstance(e.value, cst.Name) and e.value.value == "self":
        return e.attr.value
    return None


def _not_none_test(test: cst.BaseExpression) -> str | None:
    """``self.f is not None`` or bare ``self.f``."""
    if (field := _self_field(test)) is not None:
        return field
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.IsNot) and is_none(test.comparisons[0].comparator):
        return _self_field(test.left)
    return None


def _none_test(test: cst.BaseExpression) -> str | None:
    """``self.f is None`` or ``not self.f``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _self_field(test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.Is) and is_none(test.comparisons[0].comparator):
        return _self_field(test.left)
    return None


def _raises(block: cst.BaseSuite) -> bool:
    stmts = block.body if isinstance(block, cst.IndentedBlock) else ()
    return bool(stmts) and isinstance(stmts[-1], cst.SimpleStatementLine) \
        and any(isinstance(s, cst.Raise) for s in stmts[-1].body)


def _targets(fn: FunctionInfo, field: str):
    """The values bound to ``self.<field>`` in the method (``None`` for a place in a tuple target: a computed part)."""
    for n in local_nodes(fn.node.body):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                if _self_field(t.target) == field:
                    yield n.value
                elif isinstance(t.target, (cst.Tuple, cst.List)) and any(
                        _self_field(el.value) == field for el in t.target.elements):
                    yield None
        elif isinstance(n, cst.AnnAssign) and n.value is not None and _self_field(n.target) == field:
            yield n.value


def _binds_value(fn: FunctionInfo, field: str) -> bool:
    """Does the method bind ``self.<field>`` to something other than ``None``?"""
    return any(v is None or not is_none(v) for v in _targets(fn, field))


def _clears(fn: FunctionInfo, field: str) -> bool:
    """Does the method set ``self.<field>`` back to ``None`` (and to nothing else)?"""
    values = list(_targets(fn, field))
    return bool(values) and all(v is not None and is_none(v) for v in values)


__all__ = ["protocol_steps"]
