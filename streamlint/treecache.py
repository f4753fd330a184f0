"""LibCST trees of reached modules, kept by content in the project cache (issue 15).

A module parsed only for another file's question (``Engine._load_model``: what a callee does, whether a
name is a stream wrapper) is parsed again by every run that reaches it; the parse is most of what a warm
or pre-commit run of a few files costs. Its tree is kept here, by the sha256 of the module's bytes, and a
later run that reaches the same content rebuilds the tree from the entry (~4x faster than parsing: 0.12 s
CPU against 0.47 s for 350 KB of torch-npu modules; 0.7 MB of entries).

Safety: the cache directory may come from the linted repository, so an entry must never run code nor
crash the run:

- the encoding is plain data only: ``marshal`` of tuples / lists / str / bool / None / int / Ellipsis
  (no pickle; ``marshal.loads`` only ever sees an authenticated payload, i.e. one this code wrote);
- each entry is authenticated with an HMAC-SHA256 whose key lives outside the linted repository, in the
  user's cache directory (``$XDG_CACHE_HOME/streamlint/tree-key`` or ``~/.cache/streamlint/tree-key``,
  created 0600 on first use, refused when it is not a regular file of ours, readable by others, or
  inside the project); the MAC covers the format, the code key, the content digest and the payload,
  so a planted, truncated, foreign or renamed entry is a miss;
- the decoder rebuilds only LibCST node classes (by name, from LibCST's own namespace), checks each
  node's field count and each field's value against the kinds its annotation allows; anything else,
  or any exception while decoding, is a miss (the module is parsed as before). (The subtrees shared in
  an entry would let a forged one expand exponentially: the MAC is what keeps forged entries out.)

A node is encoded as ``(class index, field...)`` in the class's dataclass field order; a sequence field
as a list; ``MaybeSentinel.DEFAULT`` as ``...``; equal encoded subtrees as one object (:func:`encode`); the
whitespace leaves the parser shares
(``SimpleWhitespace``, ``Newline``: see ``engine._parse_unvalidated``) as an int into a leaf table, rebuilt
once per value, so the rebuilt tree shares them as a parse does. Files: ``v<N>/tree-<sha256>.bin``; the
entries are bounded in total size (:data:`MAX_BYTES`, oldest used first evicted; a hit refreshes the
file's time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import marshal
import os
import stat
import sys
import typing
from pathlib import Path

from streamlint import _lazy
from streamlint._lazy import cst
from streamlint.cache import CACHE_FORMAT, prepare_directory, write_atomic

FORMAT = 1
MAX_BYTES = 192 * 1024 * 1024  # the tree entries of one project cache, in all (~4.5 bytes per byte of source)
_MAGIC = b"SLTREE1\n"
_MAC_SIZE = 32
_KEY_SIZE = 32
_KEY_ENV = "XDG_CACHE_HOME"
_SHARED = ("SimpleWhitespace", "Newline")  # the leaves the parser builds once per value

# the encoded kinds of a field's value (type of the marshalled value)
_NODE, _LEAF, _SEQ = tuple, int, list
_KINDS: dict[object, frozenset[type]] = {}


def key_file() -> Path:
    base = os.environ.get(_KEY_ENV) or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "streamlint" / "tree-key"


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_size != _KEY_SIZE \
                or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
            return None
        key = os.read(fd, _KEY_SIZE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return key if len(key) == _KEY_SIZE else None


def hmac_key(project_root: str | Path, cache_dir: str | Path) -> bytes | None:
    """The user's key for tree entries, made on first use; None (no tree cache) when it cannot be read or
    made, or when it would lie inside the linted project or its cache directory (a key the repository can
    plant authenticates nothing)."""
    path = key_file()
    real = os.path.realpath(path)
    for inside in (project_root, cache_dir):
        top = os.path.realpath(inside)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return None
    key = _read_key(path)
    if key is not None or path.exists() or path.is_symlink():
        return key
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.parent / f".tree-key.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, os.urandom(_KEY_SIZE))
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # (atomic and never replaces: of two first runs, both read the winner's key)
        except OSError:
            pass
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    return _read_key(path)


def code_key() -> bytes:
    """What an entry's encoding depends on besides the module: this format, marshal's (the Python version)
    and LibCST's node classes (its version)."""
    import libcst

    return f"{FORMAT}\0{sys.version_info[:2]}\0{getattr(libcst, '__version__', '?')}".encode()


# ---- encoding

def _fields(kind: type, memo: dict) -> tuple[str, ...]:
    names = memo.get(kind)
    if names is None:
        names = memo[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


def encode(module: "cst.Module") -> bytes | None:
    """The tree as plain data (marshal), or None when it holds a value of a kind the format does not know.
    Equal encoded subtrees are one object (hash-consed: ``self``, ``x.y``, a comma with its spaces), which
    marshal writes once and loads once (a third of the size, ~10x faster to load); the decoder builds a new
    node at each place such a subtree is used, so no node is shared that a parse would not share."""
    classes: list[str] = []
    index: dict[type, int] = {}
    leaves: dict[tuple[type, str], int] = {}
    table: list[tuple[int, str]] = []
    names: dict = {}
    made: dict[tuple, object] = {}  # an encoded value's key -> the one object for it
    shared = tuple(getattr(cst, name) for name in _SHARED)
    sentinel = cst.MaybeSentinel.DEFAULT
    node_type = cst.CSTNode

    def number(kind: type) -> int:
        found = index.get(kind)
        if found is None:
            found = index[kind] = len(classes)
            classes.append(kind.__name__)
        return found

    def one(value: object, key: tuple) -> object:
        found = made.get(key)
        if found is None:
            found = made[key] = value
        return found

    def ref(value: object) -> object:  # (an encoded value in a key: a leaf's int tagged apart from a bool)
        return (_NODE, id(value)) if type(value) is _NODE else (_LEAF, value)

    def enc(node: object) -> object:
        kind = type(node)
        if kind in shared:
            value = node.value  # type: ignore[attr-defined]
            at = leaves.get((kind, value))
            if at is None:
                at = leaves[(kind, value)] = len(table)
                table.append((number(kind), value))
            return at
        out: list[object] = [number(kind)]
        key: list[object] = [out[0]]
        for name in _fields(kind, names):
            value = getattr(node, name)
            vt = type(value)
            if vt is str or value is None:
                out.append(value)
                key.append(value)
            elif vt is bool:
                out.append(value)
                key.append((bool, value))
            elif value is sentinel:
                out.append(...)
                key.append(...)
            elif vt is tuple or vt is list:
                items = [enc(child) for child in value]
                seq = one(items, (_SEQ, *map(ref, items)))
                out.append(seq)
                key.append((_SEQ, id(seq)))
            elif isinstance(value, node_type):
                child = enc(value)
                out.append(child)
                key.append(ref(child))
            else:
                raise TypeError(f"{kind.__name__}.{name}: {vt.__name__}")
        return one(tuple(out), tuple(key))

    try:
        root = enc(module)
        return marshal.dumps((classes, table, root), 4)
    except (TypeError, ValueError, RecursionError):
        return None


# ---- decoding

def _kinds_of(annotation: object) -> set[type]:
    """The encoded value types a field annotated ``annotation`` may hold."""
    if annotation is str:
        return {str}
    if annotation is bool:
        return {bool}
    if annotation is type(None) or annotation is None:
        return {type(None)}
    if annotation is cst.MaybeSentinel:
        return {type(...)}
    if isinstance(annotation, type) and issubclass(annotation, cst.CSTNode):
        return {_NODE, _LEAF} if any(issubclass(getattr(cst, s), annotation) for s in _SHARED) else {_NODE}
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        return set().union(*(_kinds_of(arg) for arg in typing.get_args(annotation)))
    if origin is not None and isinstance(origin, type) and issubclass(origin, typing.Sequence) \
            and origin is not str:  # (collections.abc.Sequence)
        return {_SEQ}
    if origin is typing.Literal:
        return {type(arg) for arg in typing.get_args(annotation)}
    if annotation is typing.Any or isinstance(annotation, typing.TypeVar):
        return {str, bool, type(None), type(...), _NODE, _LEAF, _SEQ}
    return set()  # an annotation this format does not know: an entry holding such a field never decodes


def _node_classes() -> dict[str, tuple[type, tuple[frozenset[type], ...]]]:
    """LibCST's node classes by name, each with the value kinds of its fields (computed once)."""
    found = _CLASSES.get("")
    if found is not None:
        return found
    made: dict[str, tuple[type, tuple[frozenset[type], ...]]] = {}
    _lazy.load(cst)
    for name, kind in list(vars(cst).items()):
        if isinstance(kind, type) and issubclass(kind, cst.CSTNode) and dataclasses.is_dataclass(kind) \
                and not getattr(kind, "__abstractmethods__", None):
            try:
                hints = typing.get_type_hints(kind)
            except Exception:  # (an annotation that does not resolve: the class is not decodable)
                continue
            made[name] = (kind, tuple(frozenset(_kinds_of(hints[f.name])) for f in dataclasses.fields(kind)))
    _CLASSES[""] = made
    return made


_CLASSES: dict[str, dict] = {}


class Refused(ValueError):
    """An entry that is not a tree this format writes."""


def _no_validation(self: object) -> None:
    return None


def decode(payload: bytes) -> "cst.Module | None":
    """The tree an entry holds, or None when the entry is not one this format writes (never raises)."""
    node = cst.CSTNode
    validate = node.__dict__["__post_init__"]
    node.__post_init__ = _no_validation  # (the trees were made by the parser: valid; as _parse_unvalidated)
    try:
        return _decode(payload)
    except Exception:  # (a malformed entry of any shape: a miss)
        return None
    finally:
        node.__post_init__ = validate


_DECODERS: dict[type, object] = {}


def _decoder(kind: type, kinds: tuple[frozenset[type], ...]) -> "typing.Callable[[tuple, list, list], object]":
    """The decoder of one node class, ``(encoded, decoders, leaves) -> node``: checks the field count and
    each field's kind, decodes the children, builds the node. Its code is generated once per class from the
    class's dataclass fields (indices and kinds only: nothing of an entry is ever compiled)."""
    found = _DECODERS.get(kind)
    if found is not None:
        return found  # type: ignore[return-value]
    lines = ["def decode(t, D, L):", f" if len(t) != {len(kinds) + 1}: raise R"]
    env: dict[str, object] = {"R": Refused, "C": kind, "S": cst.MaybeSentinel.DEFAULT}
    for j, allowed in enumerate(kinds, 1):
        a = f"a{j}"
        env[f"K{j}"] = allowed
        lines.append(f" {a} = t[{j}]")
        if allowed <= {str, bool, type(None)}:
            lines.append(f" if type({a}) not in K{j}: raise R")
        elif allowed == {_NODE}:
            lines.append(f" if type({a}) is not tuple: raise R")
            lines.append(f" {a} = D[{a}[0]]({a}, D, L)")
        elif allowed == {_SEQ}:
            lines.append(f" if type({a}) is not list: raise R")
            lines.append(f" {a} = tuple([D[c[0]](c, D, L) if type(c) is tuple else L[c] for c in {a}])")
        else:
            lines += [f" k = type({a})", f" if k not in K{j}: raise R",
                      f" if k is tuple: {a} = D[{a}[0]]({a}, D, L)",
                      f" elif k is int: {a} = L[{a}]",
                      f" elif k is list: {a} = tuple([D[c[0]](c, D, L) if type(c) is tuple else L[c] for c in {a}])",
                      f" elif {a} is ...: {a} = S"]
    lines.append(f" return C({', '.join(f'a{j}' for j in range(1, len(kinds) + 1))})")
    exec("\n".join(lines), env)  # noqa: S102 (our own template over LibCST's field list)
    found = _DECODERS[kind] = env["decode"]
    return found  # type: ignore[return-value]


def _decode(payload: bytes) -> "cst.Module":
    value = marshal.loads(payload)
    if type(value) is not tuple or len(value) != 3 or type(value[0]) is not list or type(value[1]) is not list \
            or type(value[2]) is not tuple:
        raise Refused("not a tree entry")
    known = _node_classes()
    classes, decoders = [], []
    for name in value[0]:
        if type(name) is not str or name not in known:
            raise Refused(f"not a LibCST node class: {name!r}")
        kind, field_kinds = known[name]
        classes.append(kind)
        decoders.append(_decoder(kind, field_kinds))
    leaves = []
    for entry in value[1]:
        if type(entry) is not tuple or len(entry) != 2 or type(entry[0]) is not int \
                or not (entry[1] is None or type(entry[1]) is str) \
                or classes[entry[0]].__name__ not in _SHARED:
            raise Refused("not a shared leaf")
        leaves.append(classes[entry[0]](entry[1]))
    root = value[2]
    module = decoders[root[0]](root, decoders, leaves)
    if type(module) is not cst.Module:
        raise Refused("not a module")
    return module


# ---- the store

class TreeCache:
    """Tree entries of one project cache directory, authenticated with the user's key."""

    def __init__(self, directory: Path, key: bytes) -> None:
        self.folder = directory
        self.key = key
        self.code = b""  # (code_key(), at the first entry read or written: it imports LibCST)
        self.wrote = 0
        self.hits = 0

    @classmethod
    def open(cls, directory: Path, project_root: str | Path) -> "TreeCache | None":
        key = hmac_key(project_root, directory)
        return cls(directory / f"v{CACHE_FORMAT}", key) if key is not None else None

    def _file(self, digest: str) -> Path:
        return self.folder / f"tree-{digest}.bin"

    def _mac(self, digest: str, payload: bytes) -> bytes:
        if not self.code:
            self.code = code_key()
        return hmac.new(self.key, b"%s\0%s\0" % (self.code, digest.encode("ascii")) + payload,
                        hashlib.sha256).digest()

    def get(self, digest: str) -> "cst.Module | None":
        path = self._file(digest)
        try:
            if self.folder.is_symlink():
                return None
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                with os.fdopen(fd, "rb", closefd=False) as fh:
                    data = fh.read()
            finally:
                os.close(fd)
        except OSError:
            return None
        head = len(_MAGIC) + _MAC_SIZE
        if len(data) <= head or not data.startswith(_MAGIC):
            return None
        payload = data[head:]
        if not hmac.compare_digest(data[len(_MAGIC):head], self._mac(digest, payload)):
            return None
        module = decode(payload)
        if module is not None:
            self.hits += 1
            try:
                os.utime(path)  # (used: the last to be evicted)
            except OSError:
                pass
        return module

    def put(self, digest: str, module: "cst.Module") -> None:
        payload = encode(module)
        if payload is None:
            return
        try:
            if not self.wrote and (not prepare_directory(self.folder.parent) or self.folder.is_symlink()):
                return
            self.folder.mkdir(exist_ok=True)
            write_atomic(self._file(digest), _MAGIC + self._mac(digest, payload) + payload)
            self.wrote += 1
        except OSError:
            pass

    def trim(self, limit: int = MAX_BYTES) -> None:
        """Evict the oldest entries past ``limit`` bytes in all (only after a run that wrote some)."""
        if not self.wrote:
            return
        try:
            if self.folder.is_symlink():
                return
            entries = []
            for item in os.scandir(self.folder):
                if item.name.startswith("tree-") and item.name.endswith(".bin") and item.is_file(follow_symlinks=False):
                    st = item.stat(follow_symlinks=False)
                    entries.append((st.st_mtime_ns, st.st_size, item.path))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= limit:
                break
            try:
                os.unlink(path)
                total -= size
            except OSError:
                pass
        self.wrote = 0

