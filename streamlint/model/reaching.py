"""Which project modules may reach a file through the call graph, from bytes only (issue 15: "reverse
questions without parsing").

Every cross-module step the call graph takes (``Project.call_targets``, ``compile._targets``: a function, a
constructor, an attribute's class, a base class) resolves a dotted name through the calling module's import
table or its own names (``parallel.dependencies`` relies on the same fact), and a dotted module name leads to
a file by path (``ModulePaths.module_path``): its last part is the file's stem, or the directory's name for a
package's ``__init__.py``. So a module with a call that can run a function of file ``H`` spells ``H``'s module
word (:func:`module_word`) as a whole word somewhere in its bytes (an import, a dotted use, a string), or it
imports from an ancestor package without naming it (``from .. import f``, ``from . import f``) and sits under
the directory of ``H``, an ``__init__.py``. The modules that may reach ``H`` transitively are the closure of
that relation backwards from ``H``: a superset (comments and strings count), never parsed, found by byte
searches memoised by the project (``paths_containing``).

Forwards (:func:`reached_from`, from those modules to the sites that compile what their callers pass) a step may
also be a call found by name, not by path: the relation there accepts a module's dotted name too (its
``__init__.py`` chain, whatever directories hold it).

Used by ``PathIndex`` to compute what the compile sites reach only for the sites that may reach the asked
function's module, instead of parsing every module that may compile and everything it reaches.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from streamlint.model import bytescan

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries

# ``from`` followed by a dot: a relative import (``from . import x``, ``from ..pkg import y``), across a
# line continuation too (a literal first: a pattern starting with a look-behind is tried at every byte)
_RELATIVE = re.compile(rb"from(?:[ \t]|\\\r?\n)+\.")
_NAME_OR_DOT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def _relative_import(data: bytes) -> bool:
    return any(m.start() == 0 or data[m.start() - 1] not in _NAME_OR_DOT for m in _RELATIVE.finditer(data))


def module_word(path: str) -> str:
    """The last part of every dotted module name that leads to ``path``."""
    directory, base = os.path.split(os.path.abspath(path))
    if base == "__init__.py":
        return os.path.basename(directory)
    return base.rsplit(".", 1)[0] if "." in base else base


def _path_words(root: str, importer: str, target: str) -> "list[str] | None":
    """The directory names an ``importer`` must spell for a dotted name of it to lead to ``target``, besides its
    module word (None: any file may, ``importer`` or ``target`` is outside ``root``). Module names are looked up
    below the importer's source root, the directories above it up to the project root, and ``root/src``
    (``ModulePaths.module_path``): below the deepest directory ``importer`` and ``target`` share, every directory
    on the way to ``target`` is a part of the name (``src`` right under the project root excepted), and the
    parts above it are the importer's own packages, which a relative import does not spell."""
    if not (importer.startswith(root + os.sep) and target.startswith(root + os.sep)):
        return None
    mine = os.path.dirname(importer).split(os.sep)
    theirs = os.path.dirname(target).split(os.sep)
    shared = 0
    while shared < min(len(mine), len(theirs)) and mine[shared] == theirs[shared]:
        shared += 1
    rest = theirs[shared:]
    if rest and rest[0] == "src" and os.sep.join(theirs[:shared]) == root:
        rest = rest[1:]
    if os.path.basename(target) == "__init__.py" and rest:
        rest = rest[:-1]  # (the package's own name is its module word)
    return rest


def _spells(data: "bytes | None", word: str) -> bool:
    """``word`` as a whole word in ``data`` (None: unreadable, it may; so may a word that is not text)."""
    if not word.isascii():  # (a file in another source encoding spells it in other bytes: it may)
        return True
    try:
        return data is None or bytescan.spells(data, word)
    except UnicodeEncodeError:
        return True


def _spells_path(data: bytes, root: str, importer: str, target: str) -> bool:
    """Does ``importer`` (its bytes ``data``; empty: unreadable, it may) spell the directory names of
    :func:`_path_words` too?"""
    words = _path_words(root, importer, target)
    return words is None or not data or all(_spells(data, part) for part in words)


def reaching_paths(project: "ProjectQueries", path: str, budget: int,
                   spelling: "dict[str, list[str]] | None" = None) -> "set[str] | None":
    """The project files whose functions may reach a function of ``path`` through calls (``path`` itself
    included), by the byte relation above; None when the closure needs more than ``budget`` word searches
    in all (the caller then answers for the whole project, as it would have without this). ``spelling``: the
    searches made so far (module word -> the files that spell it), shared by the calls of one project index
    and counted in ``budget``."""
    start = os.path.abspath(path)
    root = os.path.abspath(project.root)
    found = {start}
    stack = [start]
    if spelling is None:
        spelling = {}
    relative: "list[str] | None" = None
    while stack:
        target = stack.pop()
        word = module_word(target)
        if not word.isascii():
            return None  # (its bytes depend on each importer's source encoding: the whole project answers)
        if word not in spelling:
            if len(spelling) >= budget:
                return None
            raw = word.encode("utf-8", "surrogateescape")
            spelling[word] = [other for other in project.paths_containing((raw,))
                              if _spells(project.file_bytes(other), word)]
        hits = [other for other in spelling[word] if other not in found
                and _spells_path(project.file_bytes(other) or b"", root, other, target)]
        if os.path.basename(target) == "__init__.py":
            if relative is None:
                relative = [other for other in project.paths_containing((b"from",))
                            if _relative_import(project.file_bytes(other) or b"from .")]
            below = os.path.dirname(target) + os.sep
            hits += [other for other in relative if other.startswith(below) and other not in found]
        for other in hits:
            if other not in found:
                found.add(other)
                stack.append(other)
    return found


_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def reached_from(project: "ProjectQueries", starts: "set[str]", wanted: "set[str]",
                 byte_budget: int) -> "tuple[set[str] | None, int]":
    """The files of ``wanted`` that the modules ``starts`` may reach forwards, with the bytes read (None past
    ``byte_budget`` bytes read). A module ``M`` reaches a file ``F`` when

    - ``M`` spells ``F``'s module word and either the directory names of :func:`_path_words` (a call resolved
      by path, as backwards) or the parts of ``F``'s dotted module name that are not parts of ``M``'s own
      (:func:`_name_words`); or
    - ``M`` has ``F``'s dotted module name (two flat directories with a ``utils.py`` each); or
    - ``M`` imports relatively and ``F`` is the ``__init__.py`` of one of its packages.

    A step forwards may be a call of a compile site's function found by name, not by path
    (``compile.caller_arguments``: the caller's resolved dotted name equals ``FileModel.module_name`` + the
    function), and a module name is the file's ``__init__.py`` chain: ``from npu_utils import compile_model``
    reaches ``tools/npu_utils.py`` (``tools/`` without ``__init__.py``: its own source root) or
    ``vendor/npu_utils/__init__.py`` without spelling ``tools`` or ``vendor``; a relative import
    (``from .compiler import f``) names the caller's own packages without spelling them, and a module's own
    functions are named with its own module name, which it need not spell."""
    found: set[str] = set()
    left = {os.path.abspath(p) for p in wanted}
    by_word: dict[bytes, list[str]] = {}
    by_name: dict[str, list[str]] = {}
    names: dict[str, list[str]] = {}
    for path in project.all_files():
        path = os.path.abspath(path)
        by_word.setdefault(module_word(path).encode("utf-8", "surrogateescape"), []).append(path)
        names[path] = project.module_name(path)[0].split(".")
        by_name.setdefault(".".join(names[path]), []).append(path)
    root = os.path.abspath(project.root)
    seen = {os.path.abspath(p) for p in starts}
    stack = list(seen)
    read = 0
    while stack and left:
        path = stack.pop()
        if path in left:
            left.discard(path)
            found.add(path)
        data = project.file_bytes(path)
        if data is None:
            continue
        read += len(data)
        if read > byte_budget:
            return None, read
        spelt = set(_IDENTIFIER.findall(data))
        own = names.get(path) or project.module_name(path)[0].split(".")
        reached = [other for word in spelt for other in by_word.get(word, ())
                   if _all_spelt(_path_words(root, path, other) or (), spelt)
                   or _all_spelt(_name_words(own, names.get(other, ())), spelt)]
        reached += by_name.get(".".join(own), ())
        if _relative_import(data):  # its ancestor packages
            directory = os.path.dirname(path)
            while True:
                init = os.path.join(directory, "__init__.py")
                if init not in by_word.get(os.path.basename(directory).encode("utf-8", "surrogateescape"), ()):
                    break
                reached.append(init)
                directory = os.path.dirname(directory)
        for other in reached:
            if other not in seen:
                seen.add(other)
                stack.append(other)
    # (a module word that is not an ASCII identifier is never found by the tokens: given)
    return found | {p for p in left if not module_word(p).isascii()}, read


def _name_words(own: "list[str]", theirs: "list[str]") -> "list[str]":
    """The parts of dotted module name ``theirs`` (its last part, the module word, aside) that a module named
    ``own`` must spell to write a dotted name starting with it: those after the parts the two share from the
    start (a relative import names ``own``'s packages, and a module's own functions its own name, unspelled)."""
    shared = 0
    while shared < min(len(own), len(theirs) - 1) and own[shared] == theirs[shared]:
        shared += 1
    return theirs[shared:-1]


def _all_spelt(parts, spelt: "set[bytes]") -> bool:
    return all(part.encode("utf-8", "surrogateescape") in spelt or not part.isascii() for part in parts)


__all__ = ["module_word", "reached_from", "reaching_paths"]
