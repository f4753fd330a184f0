"""Parsing an edited buffer again by parsing only the top-level statements the edit touched (issue 15).

An editor sends the whole buffer after every keystroke; a 3,000-line module costs a LibCST parse of about a
third of its analysis. LibCST nodes carry no positions, so the top-level statements of the previous tree
that lie wholly in the unchanged head and tail of the text are exactly the nodes a full parse would build
for them; only the statements in between are parsed, as a module of their own, and spliced in.

What makes the splice the tree a full parse gives, and when it is refused (a full parse then):

- the changed lines start strictly after the first line of a statement that is not the first one (so the
  module's header comments and the previous statement's indented trailing comments, whose owner a parse
  decides from the lines after them, are untouched), and they end before the start (leading blank and
  comment lines included) of a statement that is not past the end of the module;
- the module's default indentation is not lost with the edited lines (when no block precedes them and the
  new lines have none, the old ones had none either), and no indented comment line lies before the next untouched statement (the edited
  statement's block could own it);
- the new lines are parsed between two dummy ``pass`` lines at column 0, so that their leading lines and an
  indented block's trailing comments are given to a statement or a block footer exactly as between two
  top-level statements of the whole module; both dummies must come back as plain ``pass`` lines without
  leading lines (else the lines after the edit would have belonged to the next statement);
- the part module has the whole text's default indentation and newline (nodes leave out what equals the
  module's default), only ``\\n`` line ends (no ``\\r``), and generates exactly the new lines back;
- the caller has checked the whole new text with Python's own parser first (a syntax error anywhere is
  reported as by a full parse).

tests/test_reparse.py compares spliced trees with full parses (``deep_equals``) over many edits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from streamlint._lazy import cst

if TYPE_CHECKING:
    import libcst

_DUMMY = "pass\n"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True) if "\r" not in text else []


def splice(old_text: str, old_module: "libcst.Module", starts: list[int] | None, new_text: str,
           parse: Callable[[str], "libcst.Module"]) -> "libcst.Module | None":
    """The tree of ``new_text``, made from ``old_module`` (the tree of ``old_text``, whose top-level
    statements' code generation starts at the 1-based ``starts``) by parsing only the changed statements
    with ``parse``; None when the edit does not allow it (the caller parses the whole text)."""
    body = old_module.body
    if not starts or len(starts) != len(body) or "\r" in old_text or "\r" in new_text or "\f" in new_text:
        return None
    old, new = old_text.split("\n"), new_text.split("\n")  # (the last item: the text after the last newline)
    limit = min(len(old), len(new))
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    if head == len(old) == len(new):
        return None  # the same text: nothing to reuse it for
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    first_changed, end_changed = head, len(old) - tail  # 0-based old lines [first_changed, end_changed)
    # the statement the edit starts in: its first own line (after its leading lines) before the edit
    i = None
    for k in range(len(body) - 1, 0, -1):
        own = starts[k] - 1 + len(body[k].leading_lines)
        if own < first_changed:
            i = k
            break
    if i is None:
        return None
    # the first statement after it whose lines (leading ones included) are all in the unchanged tail
    j = next((k for k in range(i + 1, len(body)) if starts[k] - 1 >= end_changed), None)
    if j is None:
        return None
    own_j = starts[j] - 1 + len(body[j].leading_lines)
    if any(line[:1] in (" ", "\t") and line.lstrip().startswith("#") for line in old[starts[j] - 1:own_j]):
        return None  # an indented comment before the next statement: the edited block may own it
    delta = len(new) - len(old)
    lo, hi = starts[i] - 1, starts[j] - 1 + delta  # the new lines to parse: [lo, hi)
    if hi <= lo:
        return None
    segment = "".join(line + "\n" for line in new[lo:hi])
    try:
        part = parse(_DUMMY + segment + _DUMMY)
    except Exception:  # noqa: BLE001 - whatever the part parse says, the full parse decides
        return None
    if part.default_indent != old_module.default_indent or part.default_newline != old_module.default_newline \
            or part.header or part.footer or len(part.body) < 2 or not part.has_trailing_newline:
        return None
    for dummy in (part.body[0], part.body[-1]):
        if not (isinstance(dummy, cst.SimpleStatementLine) and not dummy.leading_lines and len(dummy.body) == 1
                and isinstance(dummy.body[0], cst.Pass) and dummy.body[0].semicolon is cst.MaybeSentinel.DEFAULT
                and dummy.trailing_whitespace.comment is None):
            return None
    middle = tuple(part.body[1:-1])
    if not _blocks(body[:i]) and not _blocks(middle) and _blocks(body[i:j]):
        return None  # the old default indentation came from the edited lines; a later block decides it now
    if part.with_changes(body=middle).code != segment:
        return None
    return old_module.with_changes(body=(*body[:i], *middle, *body[j:]))


def _blocks(statements) -> bool:
    return any(isinstance(stmt, cst.BaseCompoundStatement) for stmt in statements)


__all__ = ["splice"]
