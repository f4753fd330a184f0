"""The records a module's traversal (:mod:`.file`) fills: its functions and classes, its calls, the items of
its ``with`` statements, its attribute / subscript assignments, and the ``if`` guards enclosing each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamlint._lazy import cst


@dataclass(frozen=True)
class Guard:
    """An enclosing `if` test; ``negated`` for the else branch."""

    test: cst.BaseExpression
    negated: bool

    def conditions(self) -> list[tuple[cst.BaseExpression, bool]]:
        """The (test, negated) conditions that all hold under this guard: ``not`` pushed inwards, the
        operands of ``a and b`` in the true branch, of ``a or b`` in the else branch (De Morgan)."""
        return _conditions(self.test, self.negated)


def _conditions(test: cst.BaseExpression, negated: bool) -> list[tuple[cst.BaseExpression, bool]]:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _conditions(test.expression, not negated)
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or if negated else cst.And):
        return _conditions(test.left, negated) + _conditions(test.right, negated)
    return [(test, negated)]


def in_exclusive_branches(a: "tuple[Guard, ...]", b: "tuple[Guard, ...]") -> bool:
    """True when code under guards ``a`` and code under guards ``b`` sit in opposite branches of the
    same `if` (``if torchair_graph_enabled: … else: …``), so they never run together."""
    return any(ga.test is gb.test and ga.negated != gb.negated for ga in a for gb in b)


@dataclass(eq=False)
class ScopeSite:
    """One item of a `with` statement (any context manager; classified by the project)."""

    item: cst.WithItem
    with_node: cst.With
    calls: tuple[cst.Call, ...]  # candidate factory calls (both arms of `a if c else b`)
    function: "FunctionInfo | None"
    parent: "ScopeSite | None"
    guards: tuple[Guard, ...]


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    target: str | None  # resolved dotted name (absolute, or "<module>.<Class>.attr" for self.attr)
    function: "FunctionInfo | None"
    scope: ScopeSite | None  # innermost enclosing `with` item in the same function
    guards: tuple[Guard, ...]
    in_loop: bool
    receiver: cst.BaseExpression | None  # for method calls: the object the method is called on
    method: str | None


@dataclass(frozen=True)
class AttrAssign:
    """``target = value`` where target is an attribute chain or a subscript with a literal key."""

    target: str  # e.g. "config.ge_config.enable_single_stream" or "os.environ[KEY]"
    node: cst.CSTNode
    value: cst.BaseExpression
    function: "FunctionInfo | None"
    guards: tuple[Guard, ...]


@dataclass(eq=False)
class FunctionInfo:
    qualname: str  # module-relative, e.g. "MoE.forward"
    node: cst.FunctionDef
    class_name: str | None
    params: tuple[str, ...]  # positional (incl. self)
    kwonly: tuple[str, ...]
    decorators: tuple[str, ...]
    parent: "FunctionInfo | None"
    local_aliases: dict[str, str] = field(default_factory=dict)
    locals: set[str] = field(default_factory=set)
    calls: list[CallSite] = field(default_factory=list)
    scopes: list[ScopeSite] = field(default_factory=list)
    returns: list[cst.Return] = field(default_factory=list)
    yields: list[cst.Yield] = field(default_factory=list)
    assigns: list[AttrAssign] = field(default_factory=list)
    name_assigns: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    statement_count: int = 0
    has_loop: bool = False

    @property
    def all_params(self) -> tuple[str, ...]:
        return self.params + self.kwonly


@dataclass(eq=False)
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: tuple[str, ...]
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    # self.attr = Factory(...) / nn.ModuleList([Factory(...) ...]): attribute -> constructor target
    attr_types: dict[str, str] = field(default_factory=dict)
    raw_attr_types: dict[str, tuple] = field(default_factory=dict)
    # every class an attribute may hold (``A(...) if c else B(...)``, ``ModuleList(A() if c else B() for ..)``)
    attr_alternatives: dict[str, tuple[str, ...]] = field(default_factory=dict)
    raw_attr_alternatives: dict[str, tuple] = field(default_factory=dict)
