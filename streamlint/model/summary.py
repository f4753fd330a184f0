"""Module summaries: the compact facts other files ask of a module, taken without LibCST.

A project-wide question ("which modules compile something?") used to parse, with LibCST, every file
whose bytes contain a marker: in a real Ascend repository that is most of the tree. The answer is
now narrowed in three steps, each a superset of the next, so the files that reach the full model are
exactly the ones that could matter:

1. a byte search (``Project.may_contain``), as before;
2. a byte-level pattern (:func:`may_compile_bytes`): the word ``compile`` / ``cache_compile`` as a
   name, other than ``re.compile`` in a file that never rebinds ``re``;
3. a summary from the standard ``ast`` module (:func:`summarize`, several times faster than LibCST),
   computed once per content and cached by the content's sha256 (:class:`SummaryStore`, kept in the
   project cache): does the module call a name that can resolve to a compile API?

Only modules whose summary says yes are parsed with LibCST and given to
:func:`streamlint.model.compile.compile_site`, which decides exactly as before. Step 3 is
conservative: a call resolves to a compile API (``FileModel.resolve`` then ``apis.canonical``) only
when the last part of its dotted callee, or of the import / assignment alias the callee names, is the
last part of such an API's name; the summary keeps every call of that shape.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from typing import Callable

from streamlint.model import apis
from streamlint.model.apis import Role

SUMMARY_FORMAT = 1  # bump when what a summary holds or how it is computed changes


def _compile_leaves() -> frozenset[str]:
    """Last parts of every name that canonicalises to a compile API (``compile``, ``cache_compile``)."""
    roles = (Role.TORCH_COMPILE, Role.CACHE_COMPILE)
    names = {name for name, spec in apis.SPECS.items() if spec.role in roles}
    names |= {alias for alias, target in apis._EXACT_ALIASES.items()
              if apis.SPECS.get(target) is not None and apis.SPECS[target].role in roles}
    return frozenset(name.rsplit(".", 1)[-1] for name in names)


COMPILE_LEAVES = _compile_leaves()
_LEAF_WORDS = b"|".join(re.escape(leaf.encode()) for leaf in sorted(COMPILE_LEAVES, key=len, reverse=True))
_COMPILE_WORD = re.compile(rb"(?<![A-Za-z0-9_])(?:" + _LEAF_WORDS + rb")(?![A-Za-z0-9_])")
# `re.compile(` of the regular-expression module: not a compile site, unless `re` may name something
# else in this file. Any binding of a name (import as, assignment, definition, parameter, loop or `with`
# target, walrus, global) shows it as a bare name, not followed by `.`; only a plain `import re` line
# may show it so and still bind the module.
_RE_COMPILE = re.compile(rb"(?<![A-Za-z0-9_.])re\s*\.\s*compile(?![A-Za-z0-9_])")
_BARE_RE = re.compile(rb"(?<![A-Za-z0-9_.])re(?![A-Za-z0-9_])(?!\s*\.)")
_PLAIN_IMPORT_LINE = re.compile(rb"^[ \t]*import[ \t]+[A-Za-z0-9_., \t]+$")


def may_compile_bytes(data: bytes) -> bool:
    """Could this file contain a compile site? A byte-level superset of :func:`summarize`'s answer."""
    if b"compile" not in data:
        return False
    words = _COMPILE_WORD.findall(data)
    if not words:
        return False
    if len(words) > len(_RE_COMPILE.findall(data)):
        return True
    for bare in _BARE_RE.finditer(data):  # only `re.compile` calls: is `re` the regex module?
        start = data.rfind(b"\n", 0, bare.start()) + 1
        end = data.find(b"\n", bare.end())
        line = data[start:end if end >= 0 else len(data)].rstrip(b"\r")
        if not _PLAIN_IMPORT_LINE.match(line) or b" as " in line:
            return True
    return False


@dataclass(frozen=True)
class ModuleSummary:
    """The facts of one module's content that project-wide questions ask (see the module docstring).
    ``calls`` is None when the stdlib parser rejects the content: then nothing is excluded."""

    calls: frozenset[str] | None  # last parts of every name a call in the module may resolve to
    compiles: bool  # calls a name that may resolve to torch.compile / cache_compile

    def may_call(self, leaf: str) -> bool:
        return self.calls is None or leaf in self.calls

    def to_json(self) -> list:
        return [None if self.calls is None else sorted(self.calls), int(self.compiles)]

    @classmethod
    def from_json(cls, value: object) -> "ModuleSummary | None":
        if not (isinstance(value, list) and len(value) == 2 and value[1] in (0, 1)):
            return None
        calls = value[0]
        if calls is None:
            return cls(None, bool(value[1]))
        if not isinstance(calls, list) or not all(isinstance(c, str) for c in calls):
            return None
        return cls(frozenset(calls), bool(value[1]))


def _leaf(expr: ast.expr | None) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


# canonical spellings whose last part differs from the spelling's (`torchair.ops.NpuStreamSwitch`)
_RENAMES: dict[str, set[str]] = {}
for _alias, _target in apis._EXACT_ALIASES.items():
    _a, _t = _alias.rsplit(".", 1)[-1], _target.rsplit(".", 1)[-1]
    if _a != _t:
        _RENAMES.setdefault(_a, set()).add(_t)


def summarize(data: bytes) -> ModuleSummary:
    """The summary of a module's content (never raises: content ``ast`` cannot parse keeps everything)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the linted code's own warnings (invalid escapes …)
            tree = ast.parse(data)
        calls = _called_names(tree)
        compiles = bool(calls & COMPILE_LEAVES) and _may_call_compile(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ModuleSummary(None, True)
    return ModuleSummary(calls, compiles)


def _chain(expr: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return parts[::-1]


def _may_call_compile(tree: ast.Module) -> bool:
    """Is there a call that ``FileModel.resolve`` may lead to a compile API? A dotted callee keeps its
    last part through resolution, so ``h.x.compile(...)`` counts and ``h.x.run(...)`` does not. The head
    ``h`` decides the rest: bound by plain absolute imports alone (``import re``), the call counts only
    when one of them leads to a compile API (``re.compile`` does not); a parameter or an unbound name
    resolves to nothing; a function or class defined here is ``<module>.<name>``; any other binding
    (assignment, loop or ``with`` target, relative or star import …) and ``self`` keep the call."""
    imported: dict[str, set[str]] = {}
    defined: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imported.setdefault(alias.asname, set()).add(alias.name)
                else:
                    head = alias.name.split(".", 1)[0]
                    imported.setdefault(head, set()).add(head)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name
                if node.level or not node.module or alias.name == "*":
                    bound.add(name)
                else:
                    imported.setdefault(name, set()).add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    roles = (Role.TORCH_COMPILE, Role.CACHE_COMPILE)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain = _chain(node.func)
        if chain is None or (len(chain) > 1 and chain[-1] not in COMPILE_LEAVES):
            continue
        head, rest = chain[0], chain[1:]
        if head in bound or head == "self":
            return True
        if head in defined and (rest or head in COMPILE_LEAVES):
            return True
        for target in imported.get(head, ()):
            spec = apis.lookup(".".join([target, *rest]))
            if spec is not None and spec.role in roles:
                return True
    return False


def _called_names(tree: ast.Module) -> frozenset[str]:
    """Last parts of every qualified name a call of the module may resolve to (``FileModel.resolve``):
    the callee's own last part, and through aliases (imports as, assignments of names, loop variables
    over attributes) the last part of what the alias is bound to, transitively."""
    bindings: dict[str, set[str]] = {}  # bound name -> last parts of what it may be bound to
    called: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            leaf = _leaf(node.func)
            if leaf is not None:
                called.add(leaf)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname:
                    bindings.setdefault(alias.asname, set()).add(alias.name.rsplit(".", 1)[-1])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            source = _leaf(node.value)
            if source is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bindings.setdefault(target.id, set()).add(source)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            sources = {n.attr for n in ast.walk(node.iter) if isinstance(n, ast.Attribute)}
            for target in ast.walk(node.target):
                if isinstance(target, ast.Name):
                    bindings.setdefault(target.id, set()).update(sources)
    stack = list(called)
    while stack:  # aliases of aliases (`c = torch.compile; cc = c`), in any order
        for source in bindings.get(stack.pop(), ()):
            if source not in called:
                called.add(source)
                stack.append(source)
    for name in list(called):
        called.update(_RENAMES.get(name, ()))
    return frozenset(called)


class SummaryStore:
    """Summaries by content sha256: filled during a run, loaded from and saved to the project cache
    (:class:`streamlint.cache.SummaryCache`) so that a later run of any file reuses them."""

    def __init__(self, entries: dict[str, ModuleSummary] | None = None) -> None:
        self.entries: dict[str, ModuleSummary] = dict(entries or {})
        # reads the project cache's summaries, on the first question (a run that asks none reads nothing)
        self.source: Callable[[], dict[str, ModuleSummary]] | None = None
        self.used: set[str] = set()  # digests asked for in this run
        self.computed = 0  # summaries made in this run (not found in the store)
        self.dirty = False

    def get(self, digest: str, data: bytes) -> ModuleSummary:
        if self.source is not None:
            source, self.source = self.source, None
            self.merge(source())
        self.used.add(digest)
        found = self.entries.get(digest)
        if found is None:
            found = self.entries[digest] = summarize(data)
            self.computed += 1
            self.dirty = True
        return found

    def merge(self, entries: dict[str, ModuleSummary]) -> None:
        """Summaries read from the project cache (the ones of this run win)."""
        for digest, summary in entries.items():
            self.entries.setdefault(digest, summary)


__all__ = ["COMPILE_LEAVES", "ModuleSummary", "SummaryStore", "may_compile_bytes", "summarize"]
