"""Which element of a collection an index expression names, relative to another (issue 16, precision of SL201:
"an offloaded cache's ring of device buffers").

A layer-ahead prefetch touches element ``k + 1`` (or the other buffer of a two-buffer ring, ``(k + 1) & 1`` while
the current stream works on ``k & 1``; or ``self.buf[self.active]`` after ``self.active`` was flipped) while the
current stream writes element ``k``. The flow keys a collection's elements as one storage, and told two elements
apart only by literal indices (``kv[0]`` / ``kv[1]``) or the rows of an index loop (rounds.py). Here an index is
read as a *symbol* over a root, the one binding of a variable it is computed from:

- ``(root, "o", c)``: the root plus the constant ``c`` (``k``, ``k + 1``, ``k - 1``);
- ``(root, "m<m>", r)``: the root plus an offset, modulo ``m`` (``k & 1``, ``(k + 1) % 2``), residue ``r``;
- ``(root, "f", n)``: the root flipped ``n`` times, a flip being a rebinding whose value never equals the old one
  (``x = 1 - x``, ``x ^ 1``, ``x = 0 if x == 1 else 1``, ``(x + 1) % 2``): two flips may be the start again.

A root is a binding: a local's (its stamp, set when :meth:`~streamlint.model.flow.storage.Storages.bind` rebinds
it, per frame), a parameter of the analysed function never rebound, a helper parameter bound to the caller's
symbol of its argument (``_prefetch(k + 1)``), a ``self.*`` field until this path rebinds it. Two symbols of the
same root are distinct elements when their offsets differ (same kind), their residues differ (same modulus), or
their flip counts differ by an odd number (an offset 0 being no flip). Anything else (another root, a rebinding on
one path only, an unknown helper parameter, an index the forms above do not cover) may be the same element, as
before. Where the path took ``if k == 0:`` (analysed function only), ``k`` is the literal 0, so ``k + 1`` is the
element ``1``, told apart from ``kv[0]`` as literals are.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import KVal, State
from streamlint.model.syntax import int_literal

SYM = "#ix:"  # env key prefix of a name's symbol (per frame: the env is)


def parts_distinct(a: str | None, b: str | None) -> bool:
    """Whether two element parts (``TVal.part``) are certainly different elements."""
    if a is None or b is None:
        return False
    if not (a.startswith(SYM) or b.startswith(SYM)):
        return a != b  # (literal indices, the rows of an index loop, mapping entries: as before)
    if not (a.startswith(SYM) and b.startswith(SYM)):
        return False  # a symbol and a literal: maybe the same element
    (ra, ka, va), (rb, kb, vb) = (p[len(SYM):].rsplit(":", 2) for p in (a, b))
    if ra != rb:
        return False
    va, vb = int(va), int(vb)
    if ka == kb:
        return (va - vb) % 2 == 1 if ka == "f" else va != vb
    if {ka, kb} == {"o", "f"}:
        off, flips = (va, vb) if ka == "o" else (vb, va)
        return off == 0 and flips % 2 == 1
    return False


def _part(sym) -> str | None:
    if isinstance(sym, int):
        return str(sym) if sym >= 0 else None
    return f"{SYM}{sym[0]}:{sym[1]}:{sym[2]}" if sym is not None else None


def _modulus(op: cst.BaseBinaryOp, right: cst.BaseExpression) -> int | None:
    n = int_literal(right)
    if n is None or n <= 0:
        return None
    if isinstance(op, cst.Modulo):
        return n
    if isinstance(op, cst.BitAnd) and n & (n + 1) == 0:
        return n + 1  # `k & 1`, `k & 3`: modulo 2, 4
    return None


class IndexSyms:
    """Interp mixin: symbols of index expressions, their parts, rebinding of names and fields."""

    def index_sym(self, st: State, e: cst.BaseExpression | None):
        """The symbol of an index expression (an int when it is a known literal), else None."""
        if e is None:
            return None
        if (n := int_literal(e)) is not None:
            return n
        if isinstance(e, cst.Name):
            return self._name_sym(st, e.value)
        if isinstance(e, cst.Attribute):
            key = self.render(st, e)
            return st.ixfields.get(key, (f"{key}@0", "o", 0)) if key.startswith("self.") else None
        if isinstance(e, cst.BinaryOperation):
            left, c = self.index_sym(st, e.left), int_literal(e.right)
            if isinstance(e.operator, cst.Add) and c is None and int_literal(e.left) is not None:
                left, c = self.index_sym(st, e.right), int_literal(e.left)
            if left is None:
                return None
            if isinstance(e.operator, (cst.Add, cst.Subtract)) and c is not None:
                c = c if isinstance(e.operator, cst.Add) else -c
                if isinstance(left, int):
                    return left + c
                return (left[0], "o", left[2] + c) if left[1] == "o" else None
            m = _modulus(e.operator, e.right)
            if m is not None:
                if isinstance(left, int):
                    return left % m
                return (left[0], f"m{m}", left[2] % m) if left[1] == "o" else None
        return None

    def _name_sym(self, st: State, name: str):
        sym = st.env.get(SYM + name)
        if sym is None and not self.depth and name in self.fn.all_params and name not in st.bound_at \
                and st.env.get(name) == KVal(name, opaque=True):
            sym = (f"{name}@param", "o", 0)  # a parameter of the analysed function, never rebound
        if sym is not None and not isinstance(sym, int) and not self.depth:
            for key, held in st.assume.items():  # `if k == 0:` on this path: k is 0 here
                lhs, _, rhs = key.replace(" ", "").partition("==")
                if held is True and name in (lhs, rhs) and int_literal_text(rhs if lhs == name else lhs) is not None:
                    return int_literal_text(rhs if lhs == name else lhs)
        return sym

    def sym_part(self, st: State, e: cst.BaseExpression) -> str | None:
        """The part (``TVal.part``) of the element an index expression names, by its symbol."""
        return _part(self.index_sym(st, e))

    def _rebound_sym(self, st: State, old, value: cst.BaseExpression | None, target: str, stamp: int):
        """The symbol a name / field ``target`` holds after ``target = value`` (``value`` an AugAssign: that)."""
        if isinstance(value, cst.AugAssign):
            op = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.BitXorAssign: cst.BitXor}.get(
                type(value.operator))
            value = cst.BinaryOperation(value.target, op(), value.value) if op is not None else None
        new = self.index_sym(st, value) if isinstance(value, cst.BaseExpression) else None
        if isinstance(new, int) or new is not None and new[1] == "o":
            return new  # `k = j + 1`, `x = x - 1`: an exact offset
        if old is not None and not isinstance(old, int) and old[1] in ("o", "f") \
                and (old[1] == "f" or old[2] == 0) and self._flips(st, value, target):
            return (old[0], "f", old[2] + 1 if old[1] == "f" else 1)
        return new if new is not None else (f"{target}@{stamp}", "o", 0)

    def _flips(self, st: State, e, target: str) -> bool:
        """Is ``e`` a value of ``target`` that never equals it (``1 - x``, ``x ^ 1``, ``0 if x == 1 else 1``,
        ``(x + 1) % 2``)?"""
        def same(n) -> bool:
            return isinstance(n, (cst.Name, cst.Attribute)) and self.render(st, n) == target

        if isinstance(e, cst.BinaryOperation):
            if isinstance(e.operator, cst.Subtract) and int_literal(e.left) is not None and same(e.right):
                return True  # `1 - x`: only x = 0.5 would equal it
            if isinstance(e.operator, cst.BitXor) and same(e.left) and int_literal(e.right) not in (None, 0):
                return True
            m = _modulus(e.operator, e.right)
            inner = e.left
            return m is not None and isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Add) \
                and same(inner.left) and int_literal(inner.right) is not None and int_literal(inner.right) % m != 0
        if isinstance(e, cst.IfExp) and isinstance(e.test, cst.Comparison) and len(e.test.comparisons) == 1:
            cmp = e.test.comparisons[0]
            b = int_literal(cmp.comparator) if same(e.test.left) else int_literal(e.test.left) \
                if same(cmp.comparator) else None
            body, orelse = int_literal(e.body), int_literal(e.orelse)
            if b is None or body is None or orelse is None or body == orelse:
                return False
            if isinstance(cmp.operator, cst.Equal):
                return orelse == b  # `a if x == b else b`: never x
            return isinstance(cmp.operator, cst.NotEqual) and body == b
        return False

    def rebind_name_sym(self, st: State, name: str, node) -> None:
        """``name`` is bound again (before its new value is in the env): its symbol from now on."""
        old = st.env.get(SYM + name) or self._name_sym(st, name)
        st.env[SYM + name] = self._rebound_sym(st, old, node, name, self.stamp())

    def field_rebind(self, st: State, target: cst.Attribute, value: cst.BaseExpression | None) -> str:
        """``self.x = value``: the field's key (rendered), its symbol updated."""
        key = self.render(st, target)
        if key.startswith("self."):
            old = st.ixfields.get(key, (f"{key}@0", "o", 0))
            st.ixfields = {**st.ixfields, key: self._rebound_sym(st, old, value, key, self.stamp())}
        return key


def int_literal_text(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


__all__ = ["IndexSyms", "SYM", "parts_distinct"]
