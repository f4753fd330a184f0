"""Where the value of a racing read goes (issue 16, precision of SL201: a read race is a defect through what
its value reaches).

A read on one stream of a tensor another stream is still producing yields garbage only for whoever uses the
result. Two shapes of the statement holding the read tell the analysis how far that goes:

* **discarded** (:func:`discarded_read`): the statement computes a fresh value from tensor operators,
  functions of ``torch`` / ``torch.nn.functional`` and methods of values it just computed (no ``out=``, no
  in-place ``*_`` call, no ``save`` / ``load`` / ``set_*``, no ``torch.ops`` / ``torch.distributed`` or any other
  code, which may keep or write something) and assigns it to names the function never reads (``_ = x * 2`` in a
  warm-up loop before a capture). Nothing it computed is ever used: the race has no effect,
  and the flow records none (``Storage.race``). A result read later, an in-place op, a call of a project or
  library function (a module may update buffers), or a write keeps the race.
* **message only** (:func:`message_only`): every name the statement binds is read only inside f-strings (a
  profiler range label, a log line). The garbage can reach only that text: the race stays, at low
  confidence, since whether a wrong diagnostic matters is the author's intent, which the analysis cannot see.
"""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.syntax import ancestry, local_nodes, node_code, target_names


_FRESH = (cst.Call, cst.BinaryOperation, cst.UnaryOperation)  # a receiver that is a value just computed
_PURE_MODULES = frozenset({"torch", "torch.nn.functional", "F"})  # functions computing a value from their arguments
_EFFECTS = frozenset({"record_stream", "register_hook", "backward", "share_memory_", "pin_memory"})


def _pure(expr: cst.CSTNode) -> bool:
    """Is ``expr`` built only of names, fields, constants, operators, subscripts, calls of ``torch.*`` functions
    and methods of a value it just computed (``(x @ w).relu()``), none with ``out=``, an in-place name or an
    effect (``record_stream``, ``backward``)?"""
    for n in local_nodes(expr):
        if isinstance(n, (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.NamedExpr, cst.Await, cst.Yield)):
            return False
        if isinstance(n, cst.Call):
            func = n.func
            name = func.attr.value if isinstance(func, cst.Attribute) else None
            fresh = isinstance(func, cst.Attribute) and isinstance(func.value, _FRESH)  # (`(x @ w).relu()`)
            module = node_code(func.value) if isinstance(func, cst.Attribute) and not fresh else None
            if not (fresh or module in _PURE_MODULES) or name is None or name.endswith("_") or name in _EFFECTS \
                    or name.startswith(("save", "load", "set_", "manual_seed", "_")) \
                    or any(a.keyword is not None and a.keyword.value == "out" for a in n.args):
                return False  # (`torch.ops.*`, `torch.distributed.*`, `torch.save`: effects beyond the value)
    return True


def _bound(stmt: cst.CSTNode) -> list[str] | None:
    """The names a plain assignment binds (``_`` included), None otherwise (an attribute or subscript target
    stores the value somewhere; an expression statement is run for its effect)."""
    if not isinstance(stmt, cst.Assign):  # (a call whose result is dropped, `torch.save(x, f)`, runs for its effect)
        return None
    names: list[str] = []
    for t in stmt.targets:
        stack: list[cst.CSTNode] = [t.target]
        while stack:
            x = stack.pop()
            if isinstance(x, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in x.elements)
            elif not isinstance(x, cst.Name):
                return None  # (a field, an element, a starred target: the value is kept somewhere)
        names += target_names(t.target)
    return names


def _loads(fn: cst.FunctionDef, name: str) -> list[cst.Name]:
    """The ``Name`` nodes of ``fn`` spelled ``name`` that read it (not the targets of an assignment, a ``for``
    or a ``with``; nested definitions count as reads)."""
    stores: set[int] = set()
    every: list[cst.Name] = []
    for n in local_nodes(fn):
        targets: list[cst.CSTNode] = []
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AnnAssign, cst.For)):
            targets = [n.target]
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            targets = [n.asname.name]
        for t in targets:
            stack = [t]
            while stack:
                x = stack.pop()
                if isinstance(x, cst.Name):
                    stores.add(id(x))
                elif isinstance(x, (cst.Tuple, cst.List)):
                    stack.extend(e.value for e in x.elements)
                elif isinstance(x, cst.StarredElement):
                    stack.append(x.value)
        if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) and n is not fn:
            every += [m for m in local_nodes(n) if isinstance(m, cst.Name) and m.value == name]
        elif isinstance(n, cst.Name) and n.value == name:
            every.append(n)
    return [n for n in every if id(n) not in stores]


def discarded_read(fn: cst.FunctionDef, stmt: cst.CSTNode) -> bool:
    """Does ``stmt`` (a small statement of ``fn``) compute a value of tensor operators and ``torch.*``
    functions only and drop it (see the module docstring)?"""
    names = _bound(stmt)
    if names is None or not _pure(stmt.value):  # type: ignore[attr-defined]
        return False
    return all(not _loads(fn, name) for name in names)


def message_only(fn: cst.FunctionDef, stmt: cst.CSTNode) -> str | None:
    """The name ``stmt`` binds when every name it binds is read, and only inside f-strings (a label, a log
    line), else None."""
    names = _bound(stmt)
    if not names:
        return None
    for name in names:
        loads = _loads(fn, name)
        if not loads:
            return None
        for load in loads:
            path = ancestry(fn, load) or []
            if not any(isinstance(p, cst.FormattedString) for p in path):
                return None
    return names[0]
