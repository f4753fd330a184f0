"""Node positions without LibCST's metadata machinery.

``MetadataWrapper(module).resolve(PositionProvider)`` costs about 2.5x the parse of the module (measured
on the benchmark corpus): it runs the code generator with a position-tracking state that splits every
token with a regular expression and builds two frozen dataclasses per node. :func:`compute_positions`
runs the same code generator with a lean state and returns exactly the same ranges (syntactic positions:
1-based lines, 0-based columns) as plain tuples, at a fraction of the cost.
"""

from __future__ import annotations

import re
from typing import Optional

from streamlint._lazy import cst
from libcst._nodes.internal import CodegenState

_NEWLINE = re.compile(r"\r\n?|\n")

Range = tuple[int, int, int, int]  # start line, start column, end line, end column


class _Syntactic:
    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: "_PositionState", node: cst.CSTNode, start_node: Optional[cst.CSTNode],
                 end_node: Optional[cst.CSTNode]) -> None:
        self.state = state
        self.node = node
        self.start_node = start_node
        self.end_node = end_node

    def __enter__(self) -> None:
        self.start = (self.state.line, self.state.column)

    def __exit__(self, *exc: object) -> None:
        state = self.state
        computed = state.computed
        sl, sc = computed[self.start_node][:2] if self.start_node is not None else self.start
        if self.end_node is not None:
            el, ec = computed[self.end_node][2:]
        else:
            el, ec = state.line, state.column
        computed[self.node] = (sl, sc, el, ec)


class _PositionState(CodegenState):
    """The code generator's state, tracking line and column like LibCST's PositionProvidingCodegenState."""

    __slots__ = ("line", "column", "computed", "_stack")

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.line = 1
        self.column = 0
        self.computed: dict[cst.CSTNode, Range] = {}
        self._stack: list[tuple[int, int]] = []

    def _advance(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
            return
        segments = _NEWLINE.split(value)
        self.line += len(segments) - 1
        self.column = len(segments[-1])

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
        else:
            self._advance(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        sl, sc = self._stack.pop()
        if node not in self.computed:
            self.computed[node] = (sl, sc, self.line, self.column)

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
                                  end_node: Optional[cst.CSTNode] = None) -> _Syntactic:  # type: ignore[override]
        return _Syntactic(self, node, start_node, end_node)


def compute_positions(module: cst.Module) -> dict[cst.CSTNode, Range]:
    """Syntactic positions of every node of ``module`` (as LibCST's ``PositionProvider`` computes them)."""
    state = _PositionState(module.default_indent, module.default_newline)
    module._codegen(state)
    return state.computed


class PositionTable:
    """:func:`compute_positions`, computed only as far as asked: the code generator runs one top-level
    statement at a time, in order, until the node asked for has its range. A finding in the first half
    of a module costs half a code generation; a module without findings costs none.

    The calls into the code generator are exactly those of ``Module._codegen`` (header, body, footer,
    trailing newline), so every range is the one :func:`compute_positions` gives.
    """

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.state = _PositionState(module.default_indent, module.default_newline)
        self._steps = self._run()

    def _run(self):
        module, state = self.module, self.state
        state.before_codegen(module)
        for part in (*module.header, *module.body, *module.footer):
            part._codegen(state)
            yield
        if module.has_trailing_newline:
            if len(state.tokens) == 0:
                state.add_token(state.default_newline)
        else:
            state.pop_trailing_newline()
        state.after_codegen(module)

    def get(self, node: cst.CSTNode) -> Range | None:
        computed = self.state.computed
        found = computed.get(node)
        while found is None and self._steps is not None:
            if next(self._steps, StopIteration) is StopIteration:
                self._steps = None
            found = computed.get(node)
        return found
