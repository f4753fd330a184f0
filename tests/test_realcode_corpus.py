"""The real-code corpus fetcher (bench/realcode): manifest parsing, sha256 check, safe unpack. No network."""

from __future__ import annotations

import json
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from bench.realcode import corpus
from bench.realcode.corpus import (
    ChecksumError, CorpusError, ManifestError, Release, UnsafeArchive, ensure_tree, load_manifest, select,
    trees, unpack, verify,
)

GOOD = """
[[package]]
name = "demo"
version = "1.0"
kind = "sdist"
filename = "demo-1.0.tar.gz"
sha256 = "{sha}"

[[package]]
name = "demo"
version = "2.0"
kind = "wheel"
filename = "demo-2.0-py3-none-any.whl"
sha256 = "{sha}"
platform = "manylinux_2_28_x86_64"
python_version = "3.11"
"""


def _manifest(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "manifest.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_pinned_manifest_is_valid():
    releases = load_manifest()
    names = {r.name for r in releases}
    for required in ("vllm-ascend", "vllm", "sglang", "torch-npu", "megatron-core", "deepspeed", "torchrec",
                     "colossalai", "transformer-engine", "fairscale"):
        assert required in names
    for r in releases:
        if r.kind == "wheel" and not r.filename.endswith(("-none-any.whl",)):
            assert r.platform and r.python_version, r.key  # platform wheels record how pip fetched them


def test_manifest_parses_fields(tmp_path):
    releases = load_manifest(_manifest(tmp_path, GOOD.format(sha="a" * 64)))
    assert [(r.key, r.kind) for r in releases] == [("demo-1.0", "sdist"), ("demo-2.0", "wheel")]
    assert releases[1].platform == "manylinux_2_28_x86_64" and releases[1].python_version == "3.11"
    assert [r.version for r in select(releases, ["demo==2.0"])] == ["2.0"]
    assert len(select(releases, ["demo"])) == 2
    with pytest.raises(CorpusError):
        select(releases, ["nothere"])


@pytest.mark.parametrize("mutation, message", [
    (lambda t: t.replace('kind = "sdist"', 'kind = "egg"'), "kind"),
    (lambda t: t.replace("a" * 64, "a" * 63, 1), "sha256"),
    (lambda t: t.replace('filename = "demo-1.0.tar.gz"', 'filename = "../demo-1.0.tar.gz"'), "plain file"),
    (lambda t: t.replace('version = "2.0"', 'version = "1.0"').replace("demo-2.0-py3", "demo-1.0-py3"),
     "twice"),
    (lambda t: t.replace('name = "demo"\nversion = "1.0"', 'version = "1.0"'), "name"),
    (lambda t: t + "\nbogus = [", "manifest.toml"),
    (lambda t: t.replace('platform = "', 'plattform = "'), "unknown field"),
])
def test_manifest_rejects_bad_entries(tmp_path, mutation, message):
    with pytest.raises(ManifestError, match=message):
        load_manifest(_manifest(tmp_path, mutation(GOOD.format(sha="a" * 64))))


def test_sha256_mismatch_is_refused(tmp_path):
    archive = tmp_path / "demo-1.0.tar.gz"
    archive.write_bytes(b"not what was pinned")
    good = hashlib.sha256(b"not what was pinned").hexdigest()
    verify(archive, Release("demo", "1.0", "sdist", archive.name, good))
    with pytest.raises(ChecksumError):
        verify(archive, Release("demo", "1.0", "sdist", archive.name, "0" * 64))


def _tar(path: Path, members: list[tuple[str, bytes | None, str]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data or b"")
                tf.addfile(info, io.BytesIO(data or b""))
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = data.decode() if data else "/etc/passwd"
                tf.addfile(info)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
    return path


def test_unpack_tar_keeps_only_regular_python_files(tmp_path):
    archive = _tar(tmp_path / "demo-1.0.tar.gz", [
        ("demo-1.0/", None, "dir"),
        ("demo-1.0/pkg/mod.py", b"x = 1\n", "file"),
        ("demo-1.0/pkg/stub.pyi", b"x: int\n", "file"),
        ("demo-1.0/setup.cfg", b"[metadata]\n", "file"),
        ("demo-1.0/pkg/link.py", b"/etc/passwd", "symlink"),
        ("demo-1.0/pkg/up.py", b"../../outside.py", "symlink"),
    ])
    dest = tmp_path / "out"
    assert unpack(archive, dest) == 2
    assert (dest / "demo-1.0/pkg/mod.py").read_text() == "x = 1\n"
    assert (dest / "demo-1.0/pkg/stub.pyi").exists()
    assert not (dest / "demo-1.0/setup.cfg").exists()
    assert not (dest / "demo-1.0/pkg/link.py").exists() and not (dest / "demo-1.0/pkg/link.py").is_symlink()
    assert not (dest / "demo-1.0/pkg/up.py").is_symlink()


@pytest.mark.parametrize("evil", ["../escape.py", "demo/../../escape.py", "/tmp/abs_escape.py", "C:/escape.py"])
def test_unpack_tar_refuses_path_traversal(tmp_path, evil):
    archive = _tar(tmp_path / "evil.tar.gz", [("demo/ok.py", b"ok = 1\n", "file"), (evil, b"pwned = 1\n", "file")])
    dest = tmp_path / "sub" / "out"
    with pytest.raises(UnsafeArchive):
        unpack(archive, dest)
    assert not (tmp_path / "sub" / "escape.py").exists() and not (tmp_path / "escape.py").exists()
    assert not (dest / "demo/ok.py").exists()  # refused whole, before anything is written


def test_unpack_zip_refuses_path_traversal_and_skips_symlinks(tmp_path):
    good = tmp_path / "demo-2.0-py3-none-any.whl"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("demo/__init__.py", "a = 1\n")
        zf.writestr("demo-2.0.dist-info/METADATA", "Name: demo\n")
        link = zipfile.ZipInfo("demo/link.py")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/passwd")
    dest = tmp_path / "out"
    assert unpack(good, dest) == 1
    assert (dest / "demo/__init__.py").read_text() == "a = 1\n"
    assert not (dest / "demo/link.py").exists()

    evil = tmp_path / "evil.whl"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("demo/ok.py", "ok = 1\n")
        zf.writestr("../../escape.py", "pwned = 1\n")
    with pytest.raises(UnsafeArchive):
        unpack(evil, tmp_path / "out2")
    assert not (tmp_path / "escape.py").exists() and not (tmp_path.parent / "escape.py").exists()


def test_ensure_tree_from_cached_archive_and_trees_api(tmp_path, monkeypatch):
    """A verified archive already in the cache is unpacked without any download; a corrupt one is
    re-downloaded (here: the download is refused, so the error surfaces)."""
    archive = _tar(tmp_path / "demo-1.0.tar.gz", [("demo-1.0/demo/core.py", b"import torch\n", "file")])
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    (cache / "downloads").mkdir(parents=True)
    archive.rename(cache / "downloads" / "demo-1.0.tar.gz")
    manifest = _manifest(tmp_path, GOOD.format(sha=sha).split("\n[[package]]\nname = \"demo\"\nversion = \"2.0\"")[0])

    def no_network(*_a, **_k):
        raise AssertionError("no download expected")

    monkeypatch.setattr(corpus, "_pip_fetch_sdist", no_network)
    monkeypatch.setattr(corpus, "_pip_download_wheel", no_network)
    [tree] = list(trees(manifest=manifest, cache=cache))
    assert (tree.name, tree.version) == ("demo", "1.0")
    assert tree.root == cache / "trees" / "demo-1.0"
    assert (tree.root / "demo-1.0/demo/core.py").read_text() == "import torch\n"
    # second call: served from the completed tree, even offline
    [again] = list(trees(["demo"], manifest=manifest, cache=cache, offline=True))
    assert again.root == tree.root

    # a corrupt cached archive is not trusted
    release = load_manifest(manifest)[0]
    (cache / "downloads" / "demo-1.0.tar.gz").write_bytes(b"tampered")
    (tree.root / ".streamlint-realcode-complete").unlink()

    def refused(*_a, **_k):
        raise corpus.IndexUnreachable("package index unreachable (test)")

    monkeypatch.setattr(corpus, "_pip_fetch_sdist", refused)
    with pytest.raises(corpus.IndexUnreachable):
        ensure_tree(release, cache)
    assert not (cache / "downloads" / "demo-1.0.tar.gz").exists()
    with pytest.raises(CorpusError, match="offline"):
        ensure_tree(release, cache, offline=True)


def test_stream_using_function_count(tmp_path):
    from bench.realcode.report import count_stream_functions, fp_class, precision_table, read_triage

    (tmp_path / "m.py").write_text(
        "import torch\n"
        "import torch_npu as tn\n"
        "from torchair.scope import npu_stream_switch as sw\n"
        "def a():\n    s = torch.npu.Stream()\n"            # STREAM_NEW
        "def b(x, s):\n    x.record_stream(s)\n"             # tensor lifetime method
        "def c():\n    with sw('1', 3):\n        pass\n"     # aliased TorchAir scope
        "def d():\n    tn.npu.current_stream().wait_stream(x)\n"
        "def e():\n    logging.StreamHandler()\n    q.wait()\n"  # not stream APIs
        "def f():\n    def inner():\n        torch.cuda.synchronize()\n    return inner\n"  # only inner counts
        "async def g():\n    ev = torch.cuda.Event()\n",
        encoding="utf-8")
    (tmp_path / "broken.py").write_text("def (:\n", encoding="utf-8")
    (tmp_path / "plain.py").write_text("def h():\n    return 1\n", encoding="utf-8")
    stream_files: list = []
    files, functions, stream = count_stream_functions(tmp_path, stream_files)
    assert (files, functions, stream) == (3, 9, 6)
    assert [p.name for p in stream_files] == ["m.py"]  # the slice linted for trees too large for the cap

    from bench.realcode.report import normalise
    found = [{"filename": f"{tmp_path}/pkg/a.py"}, {"filename": "pkg/b.py"}]
    assert [f["filename"] for f in normalise(found, tmp_path)] == ["pkg/a.py", "pkg/b.py"]

    triage = tmp_path / "t.tsv"
    triage.write_text(
        "package\tversion\trule\tlocation\tverdict\treason\n"
        "p\t1\tSL201\tf.py:1\tbug\twhich stream\n"
        "p\t1\tSL201\tf.py:2\tfalse-positive\t[host-object-not-tensor] an int\n"
        "p\t1\tSL301\tf.py:3\tunsure\tmaybe\n", encoding="utf-8")
    rows = read_triage(triage)
    assert [r["verdict"] for r in rows] == ["bug", "false-positive", "unsure"]
    assert fp_class(rows[1]["reason"]) == "host-object-not-tensor"
    table = "\n".join(precision_table(rows))
    assert "| joins and waits SL2xx | 2 | 1 | 1 | 0 | 0.50 |" in table
    assert "| lifetimes SL3xx | 1 | 0 | 0 | 1 | n/a |" in table


def test_current_precision_judges_this_runs_findings_by_the_triage():
    from bench.realcode.report import PackageResult, current_precision

    def finding(code: str, where: str, sure: str = "high") -> dict:
        filename, line = where.split(":")
        return {"code": code, "filename": filename, "start": {"line": int(line)}, "confidence": sure}

    triage = [
        {"package": "p", "version": "1", "rule": "SL301", "location": "a.py:10", "verdict": "bug", "reason": "r"},
        {"package": "p", "version": "1", "rule": "SL301", "location": "a.py:20", "verdict": "false-positive",
         "reason": "[x] r"},
        {"package": "p", "version": "1", "rule": "SL201", "location": "b.py:5", "verdict": "bug", "reason": "r"},
        {"package": "q", "version": "2", "rule": "SL201", "location": "c.py:1", "verdict": "bug", "reason": "r"},
    ]
    res = PackageResult("p", "1", findings=[finding("SL301", "a.py:10"), finding("SL301", "a.py:20", "medium"),
                                            finding("SL201", "b.py:9"), finding("SL001", "z.py:1")])
    lines = current_precision([res], triage, [])
    tiers = lines.index("By confidence (what `--min-confidence` keeps):")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[:tiers] if line.startswith("| ")}
    by_tier = {tuple(line.split(" | ")[:2]): line.split(" | ")[2:] for line in lines[tiers:] if line.startswith("| ")}
    # per confidence: the high SL301 is the bug, the medium one the false positive
    assert by_tier[("| lifetimes SL3xx", "high")] == ["1", "0", "0", "0", "1.00 |"]
    assert by_tier[("| lifetimes SL3xx", "medium")] == ["0", "1", "0", "0", "0.00 |"]
    # lifetimes: one bug, one false positive; joins: the triaged bug moved lines, so it is a new finding
    assert rows["lifetimes SL3xx"].split(" | ")[1:8] == ["2", "1", "1", "0", "0", "0.50", "0.50 |"]
    assert rows["joins and waits SL2xx"].split(" | ")[1:8] == ["1", "0", "0", "0", "1", "n/a", "0.00 |"]
    assert "internal SL0xx" not in rows
    # package q did not run: its bug is not counted as lost
    assert lines[-1].startswith("Triaged bugs of these packages still reported: 1 of 2;")


def test_normalise_strips_the_tree_root_also_when_the_cache_is_a_link(tmp_path):
    from bench.realcode.report import normalise

    real = tmp_path / "real" / "pkg-1"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    root = link / "pkg-1"  # streamlint run with cwd=root prints the resolved path
    found = normalise([{"filename": f"{real}/a/b.py"}, {"filename": f"{root}/c.py"}, {"filename": "/x/d.py"}], root)
    assert [f["filename"] for f in found] == ["a/b.py", "c.py", "/x/d.py"]


def _finding(code, where, line, confidence="high"):
    return {"code": code, "filename": where, "start": {"line": line}, "confidence": confidence, "message": "m"}


def test_compare_runs_judges_both_runs_by_the_triage(tmp_path):
    """`python -m bench.realcode compare A B`: per family and confidence counts, and every changed finding
    with its verdict; a bug reported only by the first run is called out as lost."""
    from bench.realcode.compare import load_run, render

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "pkg-1.0.json").write_text(json.dumps({"findings": [
        _finding("SL201", "m.py", 3), _finding("SL201", "m.py", 9, "medium"), _finding("SL001", "bad.py", 1)]}))
    (b / "pkg-1.0.json").write_text(json.dumps({"findings": [
        _finding("SL201", "m.py", 9, "low"), _finding("SL301", "n.py", 4)]}))
    (b / "other-2.0.json").write_text(json.dumps({"findings": [_finding("SL201", "x.py", 1)]}))
    triage = [{"package": "pkg", "version": "1.0", "rule": "SL201", "location": "m.py:3", "verdict": "bug",
               "reason": "side stream read unwaited"},
              {"package": "pkg", "version": "1.0", "rule": "SL201", "location": "m.py:9",
               "verdict": "false-positive", "reason": "[caller-protocol-wait] waited by the caller"}]
    text = render(load_run(a), load_run(b), triage)
    assert text.startswith("1 releases in both runs")          # other-2.0 is only in B
    assert "| joins and waits SL2xx | 1 / 1 / 0 / 0 (0.50) | 0 / 1 / 0 / 0 (0.00) |" in text
    assert "- pkg-1.0 SL201 m.py:3 [high] bug: side stream read unwaited" in text
    assert "+ pkg-1.0 SL301 n.py:4 [high] untriaged" in text
    assert "~ pkg-1.0 SL201 m.py:9 [medium -> low] false-positive" in text
    assert "LOST BUGS: 1" in text
    assert "bad.py" not in text                                   # SL0xx bookkeeping is left out


def test_inject_compare_reports_gained_and_lost_defects(tmp_path):
    from bench.inject.report import compare_runs

    def row(key, verdict, caught, extras=()):
        return json.dumps({"key": key, "package": "p", "verdict": verdict, "caught_rule": caught,
                           "extras": [list(e) for e in extras], "error": ""})
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text("\n".join([row("k1", "defect", False), row("k2", "defect", True),
                                 row("k3", "equivalent", False)]))
    after.write_text("\n".join([row("k1", "defect", True), row("k2", "defect", False),
                                row("k3", "equivalent", False, [("SL201", 4)])]))
    text = compare_runs(before, after)
    assert "1 / 2 -> 1 / 2" in text
    assert "GAINED p k1" in text and "LOST p k2" in text
    assert "equivalent k3: [] -> [('SL201', 4)]" in text


def test_inject_compare_names_a_missing_results_file(tmp_path, capsys):
    """A run that never finished (or its directory given for its results.jsonl): one clear line, status 2,
    no traceback."""
    from bench.inject.__main__ import main

    present = tmp_path / "after.jsonl"
    present.write_text("")
    assert main(["--compare", str(tmp_path / "run"), str(present)]) == 2
    err = capsys.readouterr().err
    assert err == f"bench.inject: no results file: {tmp_path / 'run'}\n"
