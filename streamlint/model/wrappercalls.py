"""Files whose only stream work is a call of a project wrapper defined in another module: the byte prefilter's
second look.

The engine analyses a file only when its bytes spell a marker of an enabled rule (``apis.STREAM_MARKERS``: the word
"stream", ``Event``, ``torchair``, …). A module that reaches a stream API only through a project wrapper
(``with overlap_scope(comm):`` where ``overlap_scope`` forwards to ``torch.npu.stream`` in ``parallel/ctx.py``)
spells none, and was never analysed. :func:`wrapper_callers` finds those files without parsing every file:

1. candidate wrappers, by bytes: the functions defined in the marked files whose body spells a marker, is short
   (a wrapper has few statements, ``MAX_WRAPPER_STATEMENTS``) and has no loop, not a dunder; then the functions
   whose body calls a candidate (a wrapper of a wrapper, in any file), three levels;
2. the unmarked files that call a candidate (``name(`` after a word boundary);
3. only the candidates such a file calls are confirmed, by the wrapper inference
   (:meth:`~streamlint.model.project.Project.wrapper`; their defining files are parsed, files the run analyses
   anyway), and the files calling a confirmed one, or a wrapper the settings declare, are analysed.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Callable

from streamlint.model.wrappers import MAX_WRAPPER_STATEMENTS

if TYPE_CHECKING:
    from streamlint.model.project import Project

_DEF = re.compile(rb"([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(")
_LOOP = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:for|while)[ \t(]", re.M)
_NOT_WRAPPERS = frozenset({b"forward", b"__call__", b"__init__"})  # (wrappers.infer_wrapper: never a wrapper)
MAX_BODY_LINES = 4 * MAX_WRAPPER_STATEMENTS  # (a docstring and continued lines besides the statements)
LEVELS = 3


def _bodies(data: bytes) -> list[tuple[bytes, bytes]]:
    """(name, body) of every ``def`` in the module's bytes whose body is short (:data:`MAX_BODY_LINES`): the lines
    after its header (which ends at the first line closing its brackets) indented deeper than the ``def`` (blank and
    comment lines included); a one-line ``def`` is its own body."""
    if b"def" not in data:
        return []
    lines = data.splitlines(keepends=True)
    out = []
    for at, line in enumerate(lines):
        m = _DEF.match(line)
        if m is None:
            continue
        indent = _indent(m.group(1))
        depth, first = 0, None
        for i in range(at, min(at + MAX_BODY_LINES, len(lines))):
            code = lines[i].split(b"#", 1)[0]
            depth += code.count(b"(") + code.count(b"[") - code.count(b")") - code.count(b"]")
            if depth <= 0:
                first = i + 1
                break
        if first is None:
            continue
        if not lines[first - 1].split(b"#", 1)[0].rstrip().endswith(b":"):  # `def side(s): return stream(s)`
            out.append((m.group(2), lines[first - 1]))
            continue
        end = first
        while end < len(lines) and end - first <= MAX_BODY_LINES:
            line = lines[end]
            text = line.strip()
            if text and not text.startswith(b"#") and _indent(line[:len(line) - len(line.lstrip())]) <= indent:
                break
            end += 1
        if end - first <= MAX_BODY_LINES:
            out.append((m.group(2), b"".join(lines[first:end])))
    return out


def _indent(prefix: bytes) -> int:
    return len(prefix.expandtabs())


def _candidates(project: Project, marked: Callable[[bytes], bool], marked_paths: list[str]) -> dict[bytes, set[str]]:
    """name -> the files defining a candidate wrapper of that name (module docstring, step 1)."""
    found: dict[bytes, set[str]] = {}

    def scan(paths: list[str], forwards: Callable[[bytes], bool]) -> set[bytes]:
        new: set[bytes] = set()
        for path in paths:
            data = project.file_bytes(path)
            for name, body in _bodies(data) if data else ():
                if name in _NOT_WRAPPERS or name.startswith(b"__") or _LOOP.search(body) or not forwards(body):
                    continue
                if name not in found:
                    new.add(name)
                found.setdefault(name, set()).add(path)
        return new

    level = scan(marked_paths, marked)
    for _ in range(LEVELS - 1):
        if not level:
            break
        calls = re.compile(rb"(?<![A-Za-z0-9_.])(?:" + b"|".join(sorted(level)) + rb")[ \t]*\(")
        paths = sorted({p for name in level for p in project.paths_containing((name,))})
        level = scan(paths, lambda body: calls.search(body) is not None)
    return found


def wrapper_callers(project: Project, marked: Callable[[bytes], bool], literals: tuple[bytes, ...],
                    declared: tuple[str, ...] = ()) -> frozenset[str]:
    """The absolute paths of the project files without a marker (``marked`` false) that call a project wrapper of a
    stream API, or a wrapper ``declared`` in the settings (module docstring). ``literals``: byte strings one of which
    every marked file contains (a superset search first)."""
    memo = project.derived("wrapper_callers")
    key = (literals, declared)
    if key in memo:
        return memo[key]
    memo[key] = frozenset()  # (a recursion through the wrapper inference asks the prefilter: nothing yet)
    marked_paths = [p for p in project.paths_containing(literals) if marked(project.file_bytes(p) or b"")]
    candidates = _candidates(project, marked, marked_paths)
    names = {name.rsplit(".", 1)[-1].encode() for name in declared}
    callers: dict[bytes, list[str]] = {}
    marked_set = set(marked_paths)
    for name in sorted(set(candidates) | names):
        call = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name) + rb"[ \t]*\(")
        hits = [p for p in project.paths_containing((name,)) if p not in marked_set
                and call.search(project.file_bytes(p) or b"") is not None]
        if hits:
            callers[name] = hits
    out: set[str] = set()
    for name, hits in callers.items():
        if name in names or _confirmed(project, name.decode(), candidates.get(name, ())):
            out.update(os.path.abspath(p) for p in hits)
    memo[key] = frozenset(out)
    return memo[key]


def _confirmed(project: Project, name: str, paths) -> bool:
    """Is a function called ``name`` defined in one of ``paths`` a wrapper of a stream API (the wrapper inference)?"""
    for path in sorted(paths):
        model = project.file(path)
        for fn in model.iter_functions() if model is not None else ():
            if fn.node.name.value == name and project.wrapper(fn, model) is not None:
                return True
    return False


__all__ = ["wrapper_callers"]
