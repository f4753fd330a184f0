"""Machine formats for CI: SARIF 2.1.0 (validated against the official schema and GitHub's requirements),
GitHub workflow annotations, JUnit XML. Related locations must appear in each."""

from __future__ import annotations

import io
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from harness import FIXTURES, REGISTRY
from streamlint.finding import Confidence, Edit, Finding, Fix, FixSafety, Location, Severity, Span
from streamlint.fingerprint import fingerprints
from streamlint.reporting import ReportContext, render

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
ROOT = "/proj"


def _ctx(findings: list[Finding], files: list[str] | None = None) -> ReportContext:
    lines = {
        f"{ROOT}/pkg/model.py": ["import torch_npu", "# 中文注释: 侧流", "x = torch_npu.npu.Stream()  # 注释 side"],
        f"{ROOT}/pkg/utils.py": ["def helper(): pass"],
    }

    def line_text(path: str, line: int) -> str:
        src = lines.get(path, [])
        return src[line - 1] if 0 < line <= len(src) else ""

    def relpath(path: str) -> str:
        return os.path.relpath(path, ROOT) if path.startswith(ROOT + "/") else path

    ctx = ReportContext(findings=findings, registry=REGISTRY, line_text=line_text, relpath=relpath,
                        files_checked=len(files or []), files=files or [], source_root=ROOT)
    ctx.fingerprints = fingerprints(findings, line_text, relpath)
    return ctx


def _findings() -> list[Finding]:
    related = (
        Location(f"{ROOT}/pkg/utils.py", Span(1, 0, 1, 18), "the wrapper, defined here"),
        Location(f"{ROOT}/pkg/model.py", Span(1, 0, 1, 16), "imported here, with a [bracket]"),
    )
    fix = Fix("Remove the reserved `stream_priority` argument", FixSafety.SAFE, (Edit(Span(3, 4, 3, 7), ""),))
    return [
        Finding("SL104", "reserved-stream-priority", "message, with: commas %, and a\nnewline", Severity.INFO,
                Confidence.HIGH, f"{ROOT}/pkg/model.py", Span(3, 4, 3, 26), related, fix),
        Finding("SL105", "invalid-stream-tag", "stream tag 1 is an int", Severity.ERROR, Confidence.MEDIUM,
                f"{ROOT}/pkg/model.py", Span(3, 0, 3, 1)),
        Finding("SL105", "invalid-stream-tag", "second, same line text elsewhere", Severity.ERROR, Confidence.HIGH,
                f"{ROOT}/pkg/space dir/其他.py", Span(1, 0, 2, 0)),
    ]


def _render(fmt: str, ctx: ReportContext) -> str:
    out = io.StringIO()
    render(fmt, ctx, out)
    return out.getvalue()


def github_code_scanning_problems(sarif: dict) -> list[str]:
    """The fields GitHub code scanning requires or relies on (docs: 'SARIF support for code scanning')."""
    problems = []
    if sarif.get("version") != "2.1.0":
        problems.append("version must be 2.1.0")
    if not sarif.get("$schema"):
        problems.append("$schema missing")
    for r, run in enumerate(sarif.get("runs", [])):
        driver = run.get("tool", {}).get("driver", {})
        if not driver.get("name"):
            problems.append(f"runs[{r}].tool.driver.name missing")
        rules = driver.get("rules", [])
        ids = [rule.get("id") for rule in rules]
        if len(set(ids)) != len(ids):
            problems.append("duplicate rule ids")
        for rule in rules:
            if not rule.get("shortDescription", {}).get("text"):
                problems.append(f"rule {rule.get('id')} lacks shortDescription.text")
            if not rule.get("help", {}).get("text"):
                problems.append(f"rule {rule.get('id')} lacks help.text")
            if rule.get("defaultConfiguration", {}).get("level") not in ("none", "note", "warning", "error"):
                problems.append(f"rule {rule.get('id')} has no defaultConfiguration.level")
            if len(rule.get("properties", {}).get("tags", [])) > 20:
                problems.append("more than 20 tags")
        if len(run.get("results", [])) > 25000:
            problems.append("more than 25000 results per run")
        for i, res in enumerate(run.get("results", [])):
            where = f"runs[{r}].results[{i}]"
            if not res.get("ruleId"):
                problems.append(f"{where}.ruleId missing")
            idx = res.get("ruleIndex")
            if idx is not None and (idx >= len(rules) or rules[idx]["id"] != res.get("ruleId")):
                problems.append(f"{where}.ruleIndex does not point at its rule")
            if not res.get("message", {}).get("text"):
                problems.append(f"{where}.message.text missing")
            if not 1 <= len(res.get("locations", [])) <= 1000:
                problems.append(f"{where}.locations must hold 1..1000 entries")
            for loc in res.get("locations", []) + res.get("relatedLocations", []):
                phys = loc.get("physicalLocation", {})
                uri = phys.get("artifactLocation", {}).get("uri", "")
                if not uri or uri.startswith("/") or " " in uri:
                    problems.append(f"{where}: bad artifact uri {uri!r}")
                if phys.get("artifactLocation", {}).get("uriBaseId") and \
                        phys["artifactLocation"]["uriBaseId"] not in run.get("originalUriBaseIds", {}):
                    problems.append(f"{where}: uriBaseId not declared in originalUriBaseIds")
                if phys.get("region", {}).get("startLine", 0) < 1:
                    problems.append(f"{where}: region.startLine missing")
            if not res.get("partialFingerprints", {}).get("primaryLocationLineHash"):
                problems.append(f"{where}: partialFingerprints.primaryLocationLineHash missing")
        if run.get("columnKind") not in ("utf16CodeUnits", "unicodeCodePoints"):
            problems.append("columnKind missing")
    return problems


def test_sarif_validates_against_official_schema():
    sarif = json.loads(_render("sarif", _ctx(_findings())))
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    errors = sorted(jsonschema.Draft4Validator(SCHEMA).iter_errors(sarif), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
    assert github_code_scanning_problems(sarif) == []


def test_schema_catches_a_broken_document():
    sarif = json.loads(_render("sarif", _ctx(_findings())))
    sarif["runs"][0]["results"][0]["level"] = "fatal"
    sarif["runs"][0]["columnKind"] = "bytes"
    assert len(list(jsonschema.Draft4Validator(SCHEMA).iter_errors(sarif))) >= 2
    del sarif["runs"][0]["results"][0]["ruleId"]
    assert github_code_scanning_problems(sarif)


def test_sarif_content():
    sarif = json.loads(_render("sarif", _ctx(_findings())))
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["SL104", "SL105"]
    assert rules[0]["defaultConfiguration"]["level"] == "note"
    assert rules[1]["defaultConfiguration"]["level"] == "error"
    assert "## Why is this bad?" in rules[1]["help"]["markdown"]
    assert "helpUri" not in rules[0]  # no documentation site: the help text carries the documentation
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///proj/"
    first, second, third = run["results"]
    assert first["ruleIndex"] == 0 and second["ruleIndex"] == 1 and third["ruleIndex"] == 1
    loc = first["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/model.py", "uriBaseId": "%SRCROOT%"}
    # 1-based, code points, end column exclusive
    assert loc["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 27}
    related = first["relatedLocations"]
    assert [r["id"] for r in related] == [1, 2]
    assert related[0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/utils.py"
    assert related[0]["message"]["text"] == "the wrapper, defined here"
    assert "[the wrapper, defined here](1)" in first["message"]["text"]
    assert "\\[bracket\\]" in first["message"]["text"]
    assert third["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "pkg/space%20dir/%E5%85%B6%E4%BB%96.py"
    prints = [r["partialFingerprints"]["primaryLocationLineHash"] for r in run["results"]]
    assert len(set(prints)) == 3
    assert first["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"]["startColumn"] == 5


def test_sarif_fingerprint_survives_lines_moving(tmp_path):
    from harness import engine_for

    def run(prefix: str) -> str:
        path = tmp_path / "m.py"
        path.write_text(prefix + "import torchair\nwith torchair.scope.npu_stream_switch(1):\n    pass\n")
        engine = engine_for(tmp_path, [str(path)])
        report = engine.lint_file(str(path))
        findings = [f for f in report.findings if f.code == "SL105"]
        ctx = ReportContext(findings=findings, registry=REGISTRY, line_text=lambda p, n: report.source.line_text(n),
                            relpath=engine.relative, source_root=str(tmp_path))
        ctx.fingerprints = fingerprints(findings, ctx.line_text, engine.relative)
        sarif = json.loads(_render("sarif", ctx))
        result = sarif["runs"][0]["results"][0]
        return result["partialFingerprints"]["primaryLocationLineHash"], result["locations"][0]

    (hash1, loc1), (hash2, loc2) = run(""), run("# a comment\n\n")
    assert hash1 == hash2 and loc1 != loc2


def test_sarif_empty_run_is_valid():
    sarif = json.loads(_render("sarif", _ctx([])))
    assert not list(jsonschema.Draft4Validator(SCHEMA).iter_errors(sarif))
    assert sarif["runs"][0]["results"] == []


def test_sarif_from_cli_on_a_fixture_project(tmp_path):
    from click.testing import CliRunner

    from streamlint.cli import main

    project = FIXTURES / "showcase"
    out = tmp_path / "out.sarif"
    result = CliRunner().invoke(main, ["check", str(project), "--output-format", "sarif", "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    sarif = json.loads(out.read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft4Validator(SCHEMA).iter_errors(sarif))
    assert not errors, [e.message for e in errors[:5]]
    assert github_code_scanning_problems(sarif) == []
    assert sarif["runs"][0]["results"], "the showcase project should produce findings"


# ---- GitHub annotations

def test_github_annotations():
    text = _render("github", _ctx(_findings()))
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("::notice file=pkg/model.py,line=3,col=5,endLine=3,endColumn=27,"
                               "title=SL104 (reserved-stream-priority)::")
    # data escaping: %, newlines; related locations and the fix are part of the message
    assert "commas %25, and a%0Anewline" in lines[0]
    assert "%0Arelated: pkg/utils.py:1:1: the wrapper, defined here" in lines[0]
    assert "%0Afix: Remove the reserved" in lines[0]
    assert lines[1].startswith("::error file=pkg/model.py,line=3,col=1,")
    assert "file=pkg/space dir/其他.py" in lines[2]


def test_github_property_escaping():
    f = Finding("SL105", "invalid-stream-tag", "m", Severity.WARNING, Confidence.HIGH, f"{ROOT}/a,b:c.py",
                Span(1, 0, 1, 1))
    line = _render("github", _ctx([f]))
    assert line.startswith("::warning file=a%2Cb%3Ac.py,line=1,")


# ---- JUnit

def test_junit_one_case_per_file():
    files = [f"{ROOT}/pkg/model.py", f"{ROOT}/pkg/clean.py", f"{ROOT}/pkg/space dir/其他.py"]
    text = _render("junit", _ctx(_findings(), files))
    root = ET.fromstring(text.encode("utf-8"))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["pkg/clean.py", "pkg/model.py", "pkg/space dir/其他.py"]
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure.get("message") == "2 findings"
    assert "pkg/model.py:3:5: SL104 [info]" in failure.text
    assert "related: pkg/utils.py:1:1: the wrapper, defined here" in failure.text
    assert cases[1].get("classname") == "pkg.model"


@pytest.mark.parametrize("fmt", ["sarif", "github", "junit"])
def test_formats_are_deterministic(fmt):
    assert _render(fmt, _ctx(_findings())) == _render(fmt, _ctx(_findings()))
