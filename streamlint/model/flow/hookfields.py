"""The calls of a method handed by reference into a project record of hooks.

A runtime hands its step methods to the engine as a record of callbacks (``Callbacks(after_step=self._after_step,
...)``, a project dataclass or class keeping each as a field) and the engine calls them through the record
(``self._callbacks.after_step(slot, ...)``). The method's name then appears only by reference, so the caller
searches take it for a callback run by unseen code (:func:`~streamlint.model.flow.fieldfacts._referenced`), and the
stream its callers have current is unknown.

:func:`hook_sites` reads those calls when the project shows all of them: every mention of the method's name other
than a call or its ``def`` is the value of a keyword argument ``k=self.<name>`` of a call building a PROJECT class
(in the method's own file), and every mention of each such field name ``k`` through an attribute, in the files naming it, is a call
(``x.k(...)``), a test (``x.k is not None``, ``if x.k:``), an assignment target or an annotation (``self.k = k``,
another registration), and none is a quoted name (``getattr(hooks, "k")``); bare names ``k`` are other functions,
parameters, keywords or prose. A field handed on (``fn = hooks.k``, ``run(hooks.k)``), a record
built by a library call (``Thread(target=self._run)``), a record class whose fields a file naming it may read by
reflection (``astuple(hooks)``, ``vars(cb)``, ``getattr(cb, name)``), a mention in another file's code, or too many
files: None
(unseen callers remain). The sites are every ``x.k(...)`` call of the project (``self.k(...)`` in the record
class included): possibly also other objects' hooks of that field (a superset, as the callers' searches by name
are); their receiver is the record, not the method's object, so a caller cannot name the method's streams
(:mod:`~streamlint.model.flow.callerscopes` takes their scopes for streams that may be the method's, never for the
very field)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel
from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.options import MAX_CALLER_FILES

if TYPE_CHECKING:
    from streamlint.model.project import Project

MAX_HOOK_SITES = 12


def _mentions(project: Project, path: str, word: str) -> list[tuple[bytes, bytes]] | None:
    """(text before, text after) on the line of every code mention of ``word`` in ``path`` (comments and
    docstring prose skipped)."""
    from streamlint.model.flow.fieldfacts import _in_docstring

    data = project.file_bytes(path)
    if data is None:
        return None
    out = []
    for m in re.finditer(rb"(?<![\w])" + re.escape(word.encode()) + rb"\b", data):
        start = data.rfind(b"\n", 0, m.start()) + 1
        end = data.find(b"\n", m.end())
        before, after = data[start:m.start()], data[m.end():end if end >= 0 else len(data)]
        if b"#" in before or _in_docstring(project, path, data, m.start()):
            continue
        out.append((before, after))
    return out


_KEYWORD = re.compile(rb"(?<![\w.])(\w+)\s*=\s*self\.$")
_QUOTED = re.compile(rb"^['\"]|['\"]$")
_FIELD_USE = re.compile(rb"^\s*(?:\(|is\s+(?:not\s+)?None\b|=(?!=)|:)")


def _hook_keywords(project: Project, file: FileModel, fn: FunctionInfo) -> set[str] | None:
    """The keyword names ``k`` under which ``fn`` is handed (``k=self.<name>``) to calls building project classes,
    when that is the only way its name is mentioned other than called; else None."""
    name = fn.node.name.value
    paths = project.paths_containing((name.encode(),))
    if not paths or len(paths) > MAX_CALLER_FILES:
        return None
    keywords: set[str] = set()
    for path in paths:
        found = _mentions(project, path, name)
        if found is None:
            return None
        for before, after in found:
            if re.match(rb"\s*\(", after) and not before.rstrip().endswith(b"="):
                continue  # (a call, or its def)
            m = _KEYWORD.search(before)
            if m is None or os.path.abspath(path) != os.path.abspath(file.path) or not re.match(rb"\s*[,)]", after):
                return None  # (handed on otherwise, or named in another file: an unseen caller)
            keywords.add(m.group(1).decode())
    if not keywords or not all(_built_class(project, file, fn, k) for k in keywords):
        return None
    return keywords


def _built_class(project: Project, file: FileModel, fn: FunctionInfo, keyword: str) -> bool:
    """Is every call of ``file`` handing ``self.<name>`` as ``keyword`` a construction of a project class?"""
    name = fn.node.name.value
    seen = False
    for site in file.calls:
        arg = next((a for a in site.node.args if a.keyword is not None and a.keyword.value == keyword
                    and isinstance(a.value, cst.Attribute) and a.value.attr.value == name
                    and isinstance(a.value.value, cst.Name) and a.value.value.value == "self"), None)
        if arg is None:
            continue
        sym = project.symbol(site.target, file) if site.target is not None else None
        if sym is None or not isinstance(sym[0], ClassInfo) or _reflected(project, sym[0].name):
            return False
        seen = True
    return seen


_REFLECT = re.compile(rb"\b(?:astuple|asdict|vars|fields)\s*\(\s*(?!(?:self|cls)\s*\))|(?<!self)(?<!cls)\.__dict__"
                      rb"|\bgetattr\s*\(\s*(?!(?:self|cls)\s*,)[^,()]+,(?!\s*['\"])")


def _reflected(project: Project, record: str) -> bool:
    """May the record's fields be read by reflection (``for hook in astuple(hooks): hook()``, ``vars(cb)``,
    ``getattr(cb, name)``, ``cb.__dict__``; not of ``self`` / ``cls``) in a file naming its class? Those calls of
    the hooks are not seen."""
    paths = project.paths_containing((record.encode(),))
    return len(paths) > MAX_CALLER_FILES or any(_REFLECT.search(project.file_bytes(p) or b"") for p in paths)


def hook_sites(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    """Every call of ``fn`` made through a hook record's field (module docstring), else None. Memoised per
    project."""
    if fn.class_name is None or fn.params[:1] != ("self",) or fn.parent is not None \
            or fn.node.name.value.startswith("__"):
        return None
    memo = project.derived("hook_sites")
    if id(fn) not in memo:
        memo[id(fn)] = _hook_sites(project, file, fn)
    return memo[id(fn)]


def _hook_sites(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    keywords = _hook_keywords(project, file, fn)
    if keywords is None:
        return None
    sites: list[tuple[FileModel, object]] = []
    for k in sorted(keywords):
        paths = project.paths_containing((k.encode(),))
        if len(paths) > MAX_CALLER_FILES:
            return None
        for path in paths:
            found = _mentions(project, path, k)
            if found is None:
                return None
            for before, after in found:
                if before.endswith(b".") and not _FIELD_USE.match(after) or _QUOTED.search(before) and _QUOTED.match(after):
                    return None  # (the hook handed on, read into a name, named by string: its calls are not all seen)
                # (a call or test through the record, a keyword / target / annotation, a parameter or another
                # function of that name, prose in a message)
            model = project.file(path)
            if model is None:
                return None
            sites += [(model, site) for site in model.calls if site.method == k
                      and isinstance(site.node.func, cst.Attribute) and site.receiver is not None]
            # (`self.k()` too: the record class calling its own field, `def fire(self): self.on_drain()`, is a
            # caller of the hook; on an object with a method `k` it is one more site, as the searches by name)
    if not sites or len(sites) > MAX_HOOK_SITES:
        return None
    return sites


__all__ = ["hook_sites"]
