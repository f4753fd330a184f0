"""The real-code corpus: pinned public releases, downloaded, checked and unpacked as plain files.

Stable API (the injection harness codes against it)::

    from bench.realcode.corpus import load_manifest, ensure_tree, trees

    for tree in trees():            # or trees(["vllm-ascend"]) / trees(["vllm-ascend==0.9.1"])
        tree.name, tree.version, tree.root   # root: Path of the unpacked tree

Nothing here builds, installs or imports a downloaded package, nor runs its setup: wheels come from
``pip download --no-deps --only-binary :all:``; sdists are located through pip's configured index by
pip's own link finder and fetched with pip's session (``pip download`` of an sdist would run its build
backend to get the metadata). The sha256 is checked against the manifest before anything is unpacked,
and only regular ``*.py`` / ``*.pyi`` members are written, each checked to stay inside the tree.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

MANIFEST = Path(__file__).with_name("manifest.toml")
KINDS = ("wheel", "sdist")
UNPACKED_SUFFIXES = (".py", ".pyi")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMPLETE = ".streamlint-realcode-complete"


class CorpusError(Exception):
    """A manifest, download or archive problem (the message says which)."""


class ManifestError(CorpusError):
    pass


class ChecksumError(CorpusError):
    pass


class UnsafeArchive(CorpusError):
    pass


class IndexUnreachable(CorpusError):
    """The package index could not be reached (no network, DNS failure, ...)."""


@dataclass(frozen=True)
class Release:
    name: str
    version: str
    kind: str
    filename: str
    sha256: str
    platform: str | None = None
    python_version: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


@dataclass(frozen=True)
class Tree:
    name: str
    version: str
    root: Path
    release: Release


def cache_dir() -> Path:
    env = os.environ.get("STREAMLINT_REALCODE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "streamlint-realcode"


def load_manifest(path: Path | str | None = None) -> list[Release]:
    """Parse and validate the manifest; raises ManifestError with the entry at fault."""
    path = Path(path) if path is not None else MANIFEST
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    entries = data.get("package")
    if not isinstance(entries, list) or not entries:
        raise ManifestError(f"{path}: no [[package]] entries")
    releases: list[Release] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"{path}: package #{i + 1}"
        if not isinstance(entry, dict):
            raise ManifestError(f"{where}: not a table")
        for field in ("name", "version", "kind", "filename", "sha256"):
            if not isinstance(entry.get(field), str) or not entry[field]:
                raise ManifestError(f"{where}: missing or empty `{field}`")
        unknown = set(entry) - {"name", "version", "kind", "filename", "sha256", "platform", "python_version"}
        if unknown:
            raise ManifestError(f"{where}: unknown field(s) {sorted(unknown)}")
        if entry["kind"] not in KINDS:
            raise ManifestError(f"{where}: kind must be one of {KINDS}, not {entry['kind']!r}")
        sha = entry["sha256"].lower()
        if not _SHA256.match(sha):
            raise ManifestError(f"{where}: sha256 must be 64 hex digits")
        filename = entry["filename"]
        if "/" in filename or "\\" in filename or filename in (".", ".."):
            raise ManifestError(f"{where}: filename must be a plain file name")
        if entry["kind"] == "wheel" and not filename.endswith(".whl"):
            raise ManifestError(f"{where}: a wheel's filename ends in .whl")
        if entry["kind"] == "sdist" and not filename.endswith((".tar.gz", ".zip", ".tgz")):
            raise ManifestError(f"{where}: an sdist's filename ends in .tar.gz, .tgz or .zip")
        rel = Release(entry["name"], entry["version"], entry["kind"], filename, sha,
                      entry.get("platform"), entry.get("python_version"))
        if rel.key in seen:
            raise ManifestError(f"{where}: {rel.key} listed twice")
        seen.add(rel.key)
        releases.append(rel)
    return releases


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, release: Release) -> None:
    got = sha256_of(path)
    if got != release.sha256:
        raise ChecksumError(f"{path.name}: sha256 {got} does not match the manifest's {release.sha256}")


# --------------------------------------------------------------------------------------------- unpack

def _safe_member(name: str) -> PurePosixPath | None:
    """The member's relative path, or None for a directory entry; raises UnsafeArchive when it would
    leave the tree (absolute, drive letter, `..`)."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        raise UnsafeArchive(f"absolute member path {name!r}")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafeArchive(f"member path leaves the tree: {name!r}")
    if not parts:
        return None
    return PurePosixPath(*parts)


def _wanted(rel: PurePosixPath) -> bool:
    return rel.name.endswith(UNPACKED_SUFFIXES)


def _write(dest: Path, rel: PurePosixPath, data: bytes) -> None:
    target = dest.joinpath(*rel.parts)
    resolved_dest = dest.resolve()
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    # Only directories we created lie between dest and target (no symlinks are ever written), but
    # check anyway: the resolved parent must be inside dest.
    if not parent.resolve().is_relative_to(resolved_dest):
        raise UnsafeArchive(f"member path leaves the tree: {rel}")
    with open(target, "wb") as fh:
        fh.write(data)


def unpack(archive: Path, dest: Path) -> int:
    """Unpack the regular *.py / *.pyi members of a zip (wheel) or tar archive into dest.

    Every member path is checked first, so an archive with a member that would leave the tree (absolute,
    `..`) is refused whole (UnsafeArchive) before anything is written. Symlinks, hard links, devices
    and FIFOs are skipped. Returns the number of files written.
    """
    dest.mkdir(parents=True, exist_ok=True)
    written = 0
    name = archive.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            plan = []
            for info in infos:
                rel = _safe_member(info.filename)
                mode = info.external_attr >> 16
                if rel is None or info.is_dir() or stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                    continue
                if _wanted(rel):
                    plan.append((info, rel))
            for info, rel in plan:
                _write(dest, rel, zf.read(info))
                written += 1
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(archive, "r:*") as tf:
            members = tf.getmembers()
            plan = []
            for member in members:
                rel = _safe_member(member.name)
                if rel is None or not member.isreg():
                    continue
                if _wanted(rel):
                    plan.append((member, rel))
            for member, rel in plan:
                fh = tf.extractfile(member)
                if fh is None:
                    continue
                _write(dest, rel, fh.read())
                written += 1
    else:
        raise CorpusError(f"{name}: unknown archive type")
    return written


# ------------------------------------------------------------------------------------------- download

_NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known|"
    r"Network is unreachable|Connection refused|ConnectTimeout|ReadTimeout|Failed to establish|"
    r"Could not fetch URL|ProxyError|SSLError", re.I)


def _pip_download_wheel(release: Release, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--retries", "1", "--timeout", "30", "-d", str(into)]
    if release.platform:
        cmd += ["--platform", release.platform]
    if release.python_version:
        cmd += ["--python-version", release.python_version]
    cmd.append(f"{release.name}=={release.version}")
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        if _NETWORK_ERRORS.search(out):
            raise IndexUnreachable(f"package index unreachable while fetching {release.key}: "
                                   + _last_line(out))
        raise CorpusError(f"pip download {release.name}=={release.version} failed: {_last_line(out)}")
    path = into / release.filename
    if not path.exists():
        got = sorted(p.name for p in into.iterdir())
        raise CorpusError(f"pip download {release.key} gave {got}, not {release.filename}")
    return path


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def _pip_index_urls() -> list[str]:
    """pip's configured index URLs (index-url then extra-index-url), the way pip itself reads them."""
    try:
        from pip._internal.configuration import Configuration
        conf = Configuration(isolated=False)
        conf.load()
        values = dict(conf.items())
    except Exception:  # noqa: BLE001 - fall back to the default index
        values = {}
    def pick(key: str) -> str | None:  # the environment overrides the configuration files, as in pip
        for scope in (":env:", "download", "global"):
            if f"{scope}.{key}" in values:
                return values[f"{scope}.{key}"]
        return None

    index = pick("index-url") or "https://pypi.org/simple"
    extra = (pick("extra-index-url") or "").split()
    return [index, *extra]


def _pip_fetch_sdist(release: Release, into: Path) -> Path:
    """Locate the sdist through pip's finder on the configured indexes and download it with pip's session.

    This never runs the sdist's build backend (which `pip download` would, to read its metadata)."""
    try:
        from pip._internal.index.collector import LinkCollector
        from pip._internal.index.package_finder import PackageFinder
        from pip._internal.models.search_scope import SearchScope
        from pip._internal.models.selection_prefs import SelectionPreferences
        from pip._internal.network.session import PipSession
    except Exception as exc:  # noqa: BLE001
        raise CorpusError(f"pip's finder is not importable ({exc}); cannot fetch sdist {release.filename}") from exc
    session = PipSession(retries=1)
    session.timeout = 30
    scope = SearchScope.create(find_links=[], index_urls=_pip_index_urls(), no_index=False)
    finder = PackageFinder.create(
        link_collector=LinkCollector(session=session, search_scope=scope),
        selection_prefs=SelectionPreferences(allow_yanked=True, allow_all_prereleases=True))
    import logging
    logging.getLogger("pip._internal").setLevel(logging.ERROR)
    try:
        candidates = finder.find_all_candidates(release.name)
    except Exception as exc:  # noqa: BLE001
        raise IndexUnreachable(f"package index unreachable while fetching {release.key}: {exc}") from exc
    links = [c.link for c in candidates if c.link.filename == release.filename]
    if not links:
        if not candidates:
            raise IndexUnreachable(f"package index unreachable or {release.name} unknown: no files listed "
                                   f"for {release.name} on {', '.join(_pip_index_urls())}")
        raise CorpusError(f"{release.filename} is not listed on the index for {release.name}")
    url = links[0].url.split("#", 1)[0]
    path = into / release.filename
    try:
        with session.get(url, stream=True, timeout=60) as resp:
            resp.raise_for_status()
            with open(path, "wb") as fh:
                for chunk in resp.iter_content(1 << 20):
                    fh.write(chunk)
    except Exception as exc:  # noqa: BLE001
        if _NETWORK_ERRORS.search(f"{type(exc).__name__} {exc}"):
            raise IndexUnreachable(f"package index unreachable while fetching {release.key}: {exc}") from exc
        raise CorpusError(f"downloading {release.filename} failed: {exc}") from exc
    return path


def download(release: Release, cache: Path | None = None) -> Path:
    """The verified archive of a release in the cache (downloaded when missing or corrupt)."""
    cache = cache or cache_dir()
    dl = cache / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    path = dl / release.filename
    if path.exists():
        try:
            verify(path, release)
            return path
        except ChecksumError:
            path.unlink()
    with tempfile.TemporaryDirectory(dir=dl, prefix=".tmp-") as tmp:
        tmpdir = Path(tmp)
        got = (_pip_download_wheel if release.kind == "wheel" else _pip_fetch_sdist)(release, tmpdir)
        verify(got, release)
        os.replace(got, path)
    return path


def tree_dir(release: Release, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "trees" / release.key


def ensure_tree(release: Release, cache: Path | None = None, *, offline: bool = False) -> Path:
    """The root of the release's unpacked tree, downloading and unpacking it when missing."""
    cache = cache or cache_dir()
    root = tree_dir(release, cache)
    marker = root / _COMPLETE
    if marker.exists() and marker.read_text(encoding="utf-8").strip() == release.sha256:
        return root
    if offline:
        raise CorpusError(f"{release.key} is not in the cache ({root}) and --offline was given")
    archive = download(release, cache)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{release.key}-"))
    try:
        unpack(archive, tmp)
        (tmp / _COMPLETE).write_text(release.sha256 + "\n", encoding="utf-8")
        if root.exists():
            shutil.rmtree(root)
        os.replace(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def select(releases: list[Release], names: Iterable[str] | None) -> list[Release]:
    """Filter by `name` (every pinned version) or `name==version`; unknown names raise CorpusError."""
    if names is None:
        return list(releases)
    out: list[Release] = []
    for want in names:
        name, _, version = want.partition("==")
        hits = [r for r in releases if r.name == name and (not version or r.version == version)]
        if not hits:
            raise CorpusError(f"{want!r} is not in the manifest")
        out += [r for r in hits if r not in out]
    return out


def trees(names: Iterable[str] | None = None, *, manifest: Path | str | None = None,
          cache: Path | None = None, offline: bool = False) -> Iterator[Tree]:
    """Yield every selected release's unpacked tree, downloading the missing ones."""
    for release in select(load_manifest(manifest), names):
        yield Tree(release.name, release.version, ensure_tree(release, cache, offline=offline), release)
