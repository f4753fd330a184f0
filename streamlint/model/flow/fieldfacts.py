"""Facts about an object's fields and a method's callers that stream identity rests on (shared by
:mod:`~streamlint.model.flow.ambient` and :mod:`~streamlint.model.flow.provenance`).

- :func:`stable_field`: ``self.<attr>`` is one object for the object's life (assigned only while it is built, by
  no subclass, on no other receiver: :func:`_rebound_outside`);
- :func:`mutated`: a container field changed in place somewhere (``.append``, ``x[i] = ...``, ``+=``);
- :func:`_reflected_set` / :func:`_self_by_name`: a field set by name (``setattr``, ``__dict__``);
- :func:`_referenced`: a method's name mentioned other than in a call (a callback, a hook table, a string);
- :func:`_unseen_base`: a base class that may call the method unseen (``nn.Module.__call__`` runs ``forward``);
- :func:`_deferred`: a call written in a lambda or a nested def (run later, by whoever is handed it)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.callers import callers_of
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.walk import descendants

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_DEPTH = 3  # project base classes followed up
MAX_SITES = 12  # call sites of a method followed
_FIELD = re.compile(r"self\.\w+")


def _assigns(cls: ClassInfo, target: str) -> list[tuple[FunctionInfo, cst.BaseExpression]]:
    return [(m, a.value) for m in cls.methods.values() for a in m.assigns if a.target == target]


_REF = r"(?<![\w]){name}\b(?!\s*\()"


def _referenced(project: Project, name: str, home: str | None = None) -> bool:
    """:func:`referenced_scan`, asked as a project-wide question (``Project.ask``: a cached result depends on its
    answer, not on the bytes it read)."""
    home = os.path.abspath(home) if home is not None else None  # (a recorded question means one file from anywhere)
    return project.ask("referenced", (name, home), lambda: referenced_scan(project, name, home))


def referenced_scan(project: Project, name: str, home: str | None = None) -> bool:
    """Is the method's name mentioned in the project other than followed by ``(`` (a call or its ``def``): a
    callback handed by reference (``Thread(target=self._post)``, ``hooks.post = self._post``), a name in a
    table, a string (``getattr(self, "_post")``)? Any such mention may be an unseen caller. Byte level over the
    files naming it; a mention in a comment or in a docstring's prose is none, and outside the defining file
    ``home`` only an attribute (``.name``) or a quoted name can reach the method (a bare name there is another
    function's)."""
    paths = project.paths_containing((name.encode(),))
    if not paths or len(paths) > 4 * MAX_CALLER_FILES:  # (byte searches only: a file is parsed only for a mention
        return True  # that may be a reference, to tell a docstring's prose; a name that is part of longer words,
        # `generate` of `generated_decode`, is in many files that never name the method)
    ref = re.compile(_REF.format(name=re.escape(name)).encode())
    for path in paths:
        data = project.file_bytes(path) or b""
        for m in ref.finditer(data):
            before = data[data.rfind(b"\n", 0, m.start()) + 1:m.start()]
            if b"#" in before or _in_docstring(project, path, data, m.start()):
                continue  # (a comment, or prose in a docstring: "Use this when calling from outside advance()")
            if home is not None and os.path.abspath(path) == os.path.abspath(home) \
                    or before[-1:] in (b".", b"'", b'"'):  # (`./mod.py` and the absolute path are one file)
                return True
    return False


def _in_docstring(project: Project, path: str, data: bytes, at: int) -> bool:
    """Is the offset ``at`` of the file ``path`` inside a docstring: the string that is the first statement of
    the module, a class or a function? A triple-quoted string that is data (``HOOKS = \"\"\"on_evict: ...\"\"\"``)
    is none. Found with the syntax tree of the file (only files naming a method are read); none when it does
    not parse."""
    memo = project.derived("docstring_spans")
    if path not in memo:
        model = project.loaded(path)  # (a file the run holds: its tree, not a second parse of a large module)
        memo[path] = _model_spans(model, data) if model is not None else _docstring_spans(data)
    return any(start <= at < end for start, end in memo[path])


def _model_spans(model, data: bytes) -> tuple[tuple[int, int], ...]:
    """:func:`_docstring_spans` from the file's LibCST tree: the first statement of the module, a class or a function
    that is a plain string (no bytes, no f-string), as byte offsets of ``data``."""
    lines = data.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        text = lines[line - 1].decode("utf-8", "replace") if 0 < line <= len(lines) else ""
        return starts[min(line, len(starts)) - 1] + len(text[:col].encode("utf-8"))

    def plain(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.SimpleString):
            return "b" not in e.prefix.lower()
        return isinstance(e, cst.ConcatenatedString) and plain(e.left) and plain(e.right)

    spans = []
    for node in descendants(model.module):  # (the module, and every class and function at any depth)
        if not isinstance(node, (cst.Module, cst.ClassDef, cst.FunctionDef)):
            continue
        body = node.body if isinstance(node, cst.Module) else getattr(node.body, "body", ())
        first = body[0] if body else None
        if isinstance(first, cst.SimpleStatementLine):
            first = first.body[0]
        if isinstance(first, cst.Expr) and plain(first.value):
            sp = model.span(first.value)
            spans.append((offset(sp.start_line, sp.start_col), offset(sp.end_line, sp.end_col)))
    return tuple(spans)


def _docstring_spans(data: bytes) -> tuple[tuple[int, int], ...]:
    import ast

    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str) and first.end_lineno is not None \
                    and first.end_col_offset is not None and first.end_lineno < len(starts):
                spans.append((starts[first.lineno - 1] + first.col_offset,
                              starts[first.end_lineno - 1] + first.end_col_offset))
    return tuple(spans)


def _rebound_outside(project: Project, attr: str) -> bool:
    """:func:`rebound_scan`, asked as a project-wide question (``Project.ask``)."""
    return project.ask("rebound-outside", (attr,), lambda: rebound_scan(project, attr))


def rebound_scan(project: Project, attr: str) -> bool:
    """Is ``<obj>.<attr>`` assigned somewhere in the project on a receiver other than ``self`` (``engine.stream
    = s``, ``self._codec.stream = s``)? Byte level over the files naming it; True when too many to read."""
    paths = project.paths_containing(tuple(f".{attr}{op}".encode() for op in (" =", "=", " +=")))
    if len(paths) > 4 * MAX_CALLER_FILES:  # (byte searches only, no parse)
        return True
    if not paths:
        return _reflected_set(project, attr)
    tail = re.compile(rb"\." + re.escape(attr).encode() + rb"\s*(?:=(?!=)|\+=)")
    return any(_other_receiver(project.file_bytes(path) or b"", tail) for path in paths) \
        or _reflected_set(project, attr)


_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _other_receiver(data: bytes, tail: re.Pattern) -> bool:
    """Does ``<w1>.<w2>...<wk>`` + ``tail`` (``.attr =``) occur with some ``wi`` other than ``self``? The same
    answer as searching ``\\b(?!self\\b)\\w+(?:\\.\\w+)*`` + ``tail`` (a match may start at any word of the dotted
    chain), found from the literal ``.attr`` instead of trying that pattern at every word of the file."""
    for m in tail.finditer(data):
        end = m.start()
        while True:
            start = end
            while start > 0 and data[start - 1] in _WORD:
                start -= 1
            if start == end:
                break  # no word right before the dot
            if data[start:end] != b"self":
                return True
            if start == 0 or data[start - 1] != 0x2E:  # (a '.': the chain goes on to the left)
                break
            end = start - 1
    return False


def _reflected_set(project: Project, attr: str) -> bool:
    """Is ``attr`` set by name somewhere: ``setattr(o, "attr", v)``, ``object.__setattr__(o, "attr", v)``,
    ``o.__dict__["attr"] = v``? Byte level over the files quoting it; True when too many to read."""
    quoted = tuple(q + attr.encode() + q for q in (b'"', b"'"))
    paths = project.paths_containing(quoted)
    if len(paths) > 4 * MAX_CALLER_FILES:
        return True
    if not paths:
        return False  # (no pattern compiled for nothing to search)
    return any(set_by_name(project.file_bytes(path) or b"", attr.encode()) for path in paths)


_SPACE = frozenset(b" \t\n\r\f\v")


def set_by_name(data: bytes, name: bytes) -> bool:
    """Does ``data`` match ``(?:setattr|__dict__|vars\\s*\\()[^\\n]*?["']NAME["']`` (a quoted ``name`` after one of those
    on its line)? Found from the quoted name's occurrences (few) instead of trying the pattern at every position of
    the file (~1 ms per 100 KB module, asked per field): the same answer."""
    at = data.find(name)
    while at >= 0:
        q, end = at - 1, at + len(name)
        if q >= 0 and data[q] in b"\"'" and end < len(data) and data[end] in b"\"'":
            line = data.rfind(b"\n", 0, q) + 1
            if data.find(b"setattr", line, q) >= 0 or data.find(b"__dict__", line, q) >= 0:
                return True
            paren = data.find(b"(", line, q)
            while paren >= 0:  # `vars\s*(`: the whitespace before the parenthesis may span lines
                back = paren
                while back > 0 and data[back - 1] in _SPACE:
                    back -= 1
                if data[max(back - 4, 0):back] == b"vars":
                    return True
                paren = data.find(b"(", paren + 1, q)
        at = data.find(name, at + 1)
    return False


_MUTATE = rb"\.{attr}\s*(?:\.\s*(?:append|extend|insert|pop|remove|clear|update|setdefault|add|discard|sort|reverse|__setitem__)\s*\(|\[[^\]\n]*\]\s*(?:=(?!=)|[-+*/|&]=)|[-+*/|&]=)"


def mutated(project: Project, attr: str) -> bool:
    """:func:`mutated_scan`, asked as a project-wide question (``Project.ask``)."""
    return project.ask("mutated", (attr,), lambda: mutated_scan(project, attr))


def mutated_scan(project: Project, attr: str) -> bool:
    """Is a container held in the field ``attr`` changed in place anywhere in the project (``self.slots.append(s)``,
    ``x.slots[0] = s``, ``self.slots += [s]``), or copied into a name that may change it (``slots = self.slots``)?
    Its elements are then not the ones it was built with. Byte level; True when too many files to read."""
    key = attr.encode()
    paths = project.paths_containing((b"." + key,))
    if len(paths) > 4 * MAX_CALLER_FILES:
        return True
    pat = re.compile(_MUTATE.replace(b"{attr}", re.escape(key)) + rb"|=[ \t]*\w+(?:\.\w+)*\." + re.escape(key)
                     + rb"[ \t]*(?:#[^\n]*)?$", re.M)
    return any(pat.search(project.file_bytes(path) or b"") for path in paths)


_BY_NAME = re.compile(r"\bsetattr\s*\(|__setattr__|__dict__|\bvars\s*\(")


def _self_by_name(file: FileModel, cls: ClassInfo) -> bool:
    """Does the class set its own fields by name (``setattr(self, k, v)``, ``self.__dict__.update(kw)``,
    ``vars(self)``)? Any of its fields may then be rebound unseen. Kept on the class; a module whose text has no
    such spelling has none in its classes (their text is a part of it, at most less indented): no generation
    of the class's code then."""
    found = cls.__dict__.get("_self_by_name")
    if found is None:
        found = cls.__dict__["_self_by_name"] = not (file.classes.get(cls.name) is cls
                                                     and not _BY_NAME.search(file.source.text)) \
            and bool(_BY_NAME.search(file.code(cls.node)))
    return found


def stable_field(project: Project, file: FileModel, cls: ClassInfo | None, field: str, anywhere: bool = False) -> bool:
    """Is ``self.<attr>`` of ``cls`` one stream object for the object's life: assigned by the class only in its
    ``__init__`` (``anywhere``: in any one method), by no subclass in the project, and on no other receiver?"""
    if cls is None or not _FIELD.fullmatch(field):
        return False
    memo = project.derived("ambient_stable")
    key = (id(cls), field, anywhere)
    if key not in memo:
        from streamlint.model.accelerators import direct_subclasses

        own = _assigns(cls, field)
        memo[key] = (bool(own) and (anywhere or all(_construction(project, file, cls, m) for m, _ in own))
                     and not any(_assigns(sub, field) for sub, _ in direct_subclasses(project, file, cls))
                     and not _rebound_outside(project, field[5:]) and not _self_by_name(file, cls))
    return memo[key]


def _construction(project: Project, file: FileModel, cls: ClassInfo, method: FunctionInfo) -> bool:
    """Does ``method`` run only while the object is built: ``__init__``, or a method whose every call is
    ``self.method()`` in that ``__init__`` (``self._initialize(...)``), never handed on?"""
    name = method.node.name.value
    if name == "__init__":
        return True
    if method.parent is not None or name.startswith("__") or _referenced(project, name, file.path):
        return False
    sites = callers_of(project, file, method)
    return bool(sites) and all(
        site.function is not None and site.function.node.name.value == "__init__" and site.function.parent is None
        and site.function is cls.methods.get("__init__") and isinstance(site.receiver, cst.Name)
        and site.receiver.value == "self" for _model, site in sites)


_INERT_BASES = frozenset({"object", "builtins.object", "abc.ABC", "typing.Generic", "typing.Protocol",
                          "typing_extensions.Generic", "typing_extensions.Protocol"})


def _unseen_base(project: Project, file: FileModel, cls: ClassInfo, name: str, depth: int = 0) -> bool:
    """May a base class call the method ``name`` unseen: a base outside the project (``nn.Module.__call__`` runs
    ``forward``), or a project base that names it (a template method calls the override)?"""
    for base in cls.bases:
        if not base or base in _INERT_BASES:
            continue  # (a marker base: it defines no method that calls the subclass's)
        found = project.symbol(base, file)
        if found is None or not isinstance(found[0], ClassInfo) or depth > MAX_DEPTH:
            return True
        base_cls, base_file = found[0], found[1]
        if name.encode() in (project.file_bytes(base_file.path) or b"") \
                or _unseen_base(project, base_file, base_cls, name, depth + 1):
            return True
    return False


def _deferred_calls(fn: FunctionInfo) -> set[int]:
    """ids of the calls written inside a lambda in ``fn`` (run later, by whoever is handed it)."""
    found: set[int] = set()

    class _V(cst.CSTVisitor):
        def visit_Lambda(self, node) -> None:
            for sub in descendants(node):
                if isinstance(sub, cst.Call):
                    found.add(id(sub))

    fn.node.visit(_V())
    return found


def _deferred(project: Project, caller: FunctionInfo, site) -> bool:
    """Is this call written in a nested def or a lambda of ``caller`` (run later, on whatever stream then)?"""
    if caller.parent is not None:
        return True
    memo = project.derived("ambient_deferred")
    if id(caller) not in memo:
        memo[id(caller)] = _deferred_calls(caller)
    return id(site.node) in memo[id(caller)]


__all__ = ["MAX_SITES", "mutated", "stable_field"]
