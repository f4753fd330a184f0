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
    """:func:`compute_positions`, computed only as far as asked.

    With the module's stdlib tree (``tree``), a node is found among the top-level statements by a walk
    (cheaper than code generation) and only its statement is generated, starting at the line the stdlib
    tree gives for it; the line where the generation ends must be where the next statement starts, or the
    shortcut is abandoned for the module. A node inside a statement of a top-level class's body (a method
    of a 2,000-line class) is generated one level deeper: that statement alone, with the block's
    indentation, from its line in the stdlib tree, checked against the next statement of the body (for the
    last one, where the block's footer ends before the next top-level statement); if the check fails, the
    whole class is generated as above. Otherwise (no tree, the last statement, a node outside the
    body, a check that failed) the code generator runs one top-level statement at a time, in order,
    until the node has its range, with exactly the calls of ``Module._codegen`` (header, body, footer,
    trailing newline). Every range is the one :func:`compute_positions` gives.
    """

    def __init__(self, module: cst.Module, tree: object | None = None, text: str | None = None) -> None:
        self.module = module
        self._text = text  # the module's source: where the last statement's generation must end
        self.state = _PositionState(module.default_indent, module.default_newline)
        self._steps = self._run()
        self._started = False
        self._starts = _statement_starts(module, tree) if tree is not None else None
        self._owner: dict[int, int] = {}  # id(node) -> index of its top-level statement (walked ones)
        # id(node) -> index of its statement in the body of a top-level class or function (walked ones)
        self._member: dict[int, int] = {}
        self._member_starts: dict[int, list[int] | None] = {}  # top-level index -> its body's statement starts
        self._tree = tree
        self._walked = 0
        self._generated: set[int] = set()
        self._generated_members: set[tuple[int, int]] = set()

    def _locate(self, node: cst.CSTNode) -> int | None:
        from streamlint.model.walk import children

        found = self._owner.get(id(node))
        body = self.module.body
        owner, member = self._owner, self._member
        while found is None and self._walked < len(body):
            index = self._walked
            self._walked += 1
            top = body[index]
            members = _members(top)
            if members is None:
                self._walk_into([top], index)
            else:  # a class: each statement of its body walked on its own (its own generation, below)
                block = top.body
                owner[id(top)] = owner[id(block)] = index
                self._walk_into([n for n in children(top) if n is not block], index)
                self._walk_into([block.header, *block.footer], index)
                for k, stmt in enumerate(members):
                    self._walk_into([stmt], index, member, k)
            found = owner.get(id(node))
        return found

    def region(self, node: cst.CSTNode) -> tuple[int, int | None] | None:
        """(index of the top-level statement holding ``node``, index of the statement of a top-level class's body
        holding it or None), found by the walk of :meth:`_locate`; None when ``node`` is not in the module."""
        index = self._locate(node)
        return None if index is None else (index, self._member.get(id(node)))

    def located(self, node: cst.CSTNode) -> tuple[int, int | None] | None:
        """:meth:`region` of a node the walk has met already, without walking further (None: not met yet; after
        :meth:`region` of a node, every node of its top-level statement and the statements before has been met)."""
        index = self._owner.get(id(node))
        return None if index is None else (index, self._member.get(id(node)))

    def _walk_into(self, stack: list[cst.CSTNode], index: int, member: dict[int, int] | None = None,
                   k: int = -1) -> None:
        from streamlint.model.syntax import memoised
        from streamlint.model.walk import children

        owner = self._owner
        while stack:
            current = stack.pop()
            owner[id(current)] = index
            if member is not None:
                member[id(current)] = k
            if type(current) in (cst.FunctionDef, cst.IndentedBlock):
                # a function or block the analysis walked already (``syntax.local_nodes``): its nodes without
                # a walk, the nested definitions (yielded, not entered there) walked on their own
                local = memoised("local_nodes", current)
                if isinstance(local, tuple):
                    for n in local:
                        owner[id(n)] = index
                        if member is not None:
                            member[id(n)] = k
                        if n is not current and type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
                            stack.append(n)
                    continue
            stack.extend(children(current))

    def _generate_alone(self, index: int) -> bool:
        """Positions of one top-level statement generated on its own, from its known first line."""
        starts = self._starts
        assert starts is not None
        state = _PositionState(self.module.default_indent, self.module.default_newline)
        state.line = starts[index]
        self.module.body[index]._codegen(state)
        if (state.line, state.column) != (self._end_line(index), 0):
            return False
        computed = self.state.computed
        for key, value in state.computed.items():
            computed.setdefault(key, value)
        return True

    def _generate_member(self, index: int, k: int) -> bool:
        """Positions of statement ``k`` of the body of top-level class ``index`` generated on its own (a method
        of a 2,000-line class costs its own code generation, not the class's), from its first line in the
        stdlib tree; the generation must end where the next statement of the body starts (for the last one:
        where the block's footer starts, before the next top-level statement), else nothing is kept."""
        if index not in self._member_starts:
            self._member_starts[index] = self._body_starts(index)
        starts = self._member_starts[index]
        if starts is None:
            return False
        block = self.module.body[index].body  # type: ignore[attr-defined]
        if k + 1 < len(starts):
            end: int | None = starts[k + 1]
        else:
            following = self._end_line(index)
            end = None if following is None else following - len(block.footer)
        state = _PositionState(self.module.default_indent, self.module.default_newline)
        state.increase_indent(self.module.default_indent if block.indent is None else block.indent)
        state.line = starts[k]
        block.body[k]._codegen(state)
        if (state.line, state.column) != (end, 0):
            return False
        computed = self.state.computed
        for key, value in state.computed.items():
            computed.setdefault(key, value)
        return True

    def _body_starts(self, index: int) -> list[int] | None:
        """The first line of each statement of top-level class ``index``'s body (leading lines included)."""
        paired = _paired(self.module.body, getattr(self._tree, "body", None))
        if paired is None or paired[index] is None:
            return None
        return _starts(self.module.body[index].body.body, getattr(paired[index], "body", None))  # type: ignore

    def _end_line(self, index: int) -> int | None:
        """The line at which the generation of top-level statement ``index`` alone must end: where the next
        one starts, or for the last one, where the module's footer (its trailing blank and comment lines)
        starts, from the source's line count (None: unknown, no shortcut)."""
        starts = self._starts
        assert starts is not None
        if index + 1 < len(starts):
            return starts[index + 1]
        if self._text is None:
            return None
        module = self.module
        lines = len(_NEWLINE.findall(self._text)) + 1  # the line after the last newline
        return lines - len(module.footer) + (0 if module.has_trailing_newline else 1)

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
        if found is None and self._starts is not None and not self._started:
            index = self._locate(node)
            k = self._member.get(id(node))
            if index is not None and k is not None and index not in self._generated \
                    and (index, k) not in self._generated_members:
                self._generated_members.add((index, k))
                if self._generate_member(index, k):
                    found = computed.get(node)
            if found is None and index is not None \
                    and (index + 1 < len(self.module.body) or self._text is not None) and index not in self._generated:
                self._generated.add(index)
                if self._generate_alone(index):
                    found = computed.get(node)
                else:
                    self._starts = None  # the stdlib lines do not match this module: in order from now on
        if found is None:
            self._started = True
        while found is None and self._steps is not None:
            if next(self._steps, StopIteration) is StopIteration:
                self._steps = None
            found = computed.get(node)
        return found


def _statement_starts(module: cst.Module, tree: object) -> list[int] | None:
    """The line at which the code generation of each top-level statement begins (its leading blank and
    comment lines included), from the stdlib tree's line numbers; None if the two trees do not pair up."""
    return _starts(module.body, getattr(tree, "body", None))


def _members(stmt: cst.CSTNode) -> "tuple[cst.BaseStatement, ...] | None":
    """The statements of a class's indented body (generated one by one for positions), else None."""
    if type(stmt) is cst.ClassDef and type(stmt.body) is cst.IndentedBlock and stmt.body.body:
        return tuple(stmt.body.body)
    return None


def _paired(body: "tuple[cst.BaseStatement, ...] | list", tree_body: object) -> list[object] | None:
    """For each statement of a LibCST body, its compound stdlib statement (None for a simple line), or None
    if the two bodies do not pair up."""
    import ast

    if not isinstance(tree_body, list):
        return None
    out: list[object] = []
    k = 0
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            k += len(stmt.body)
            out.append(None)
        elif k < len(tree_body) and isinstance(tree_body[k], ast.stmt):
            out.append(tree_body[k])
            k += 1
        else:
            return None
    return out if k == len(tree_body) else None


def _starts(body: "tuple[cst.BaseStatement, ...] | list", tree_body: object) -> list[int] | None:
    """The first line of each statement of a LibCST body (its leading lines included), from the line numbers
    of the same body in the stdlib tree; None if the two do not pair up."""
    import ast

    if not isinstance(tree_body, list):
        return None
    starts: list[int] = []
    k = 0
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            count = len(stmt.body)
            if count == 0 or k + count > len(tree_body):
                return None
            first = tree_body[k].lineno
            k += count
            starts.append(first - len(stmt.leading_lines))
            continue
        if k >= len(tree_body):
            return None
        node = tree_body[k]
        k += 1
        decorators = getattr(stmt, "decorators", ())
        if decorators:
            ast_decorators = getattr(node, "decorator_list", None)
            if not ast_decorators:
                return None
            first = ast_decorators[0].lineno - len(decorators[0].leading_lines)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
            return None
        else:
            first = node.lineno
        starts.append(first - len(stmt.leading_lines))
    return starts if k == len(tree_body) else None
