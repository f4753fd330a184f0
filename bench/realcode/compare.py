"""Compare two lint runs of the corpus, judged by the triage (`python -m bench.realcode compare A B`).

A and B are directories of raw results (`cache/reports/KEY.json`, as `report` writes them), e.g. one
run at main and one at a branch. Printed: per rule family and per confidence, bugs / false alarms /
unsure / untriaged in each run; then every finding that appears or disappears between the runs with its
triage verdict and reason, so a lost bug or a new false alarm is seen at once. Only releases present in
both directories are compared.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from .report import FAMILIES, TRIAGE, read_triage

_TIERS = ("high", "medium", "low")


def load_run(directory: Path) -> dict[str, list[dict]]:
    """KEY (name-version) -> findings of one run (SL0xx bookkeeping left out)."""
    out: dict[str, list[dict]] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        findings = data.get("findings") if isinstance(data, dict) else data
        if isinstance(findings, list):
            out[path.stem] = [f for f in findings if not str(f.get("code", "")).startswith("SL0")]
    return out


def _identity(key: str, f: dict) -> tuple[str, str, str]:
    return key, str(f["code"]), f"{f['filename']}:{f['start']['line']}"


def _verdicts(triage: list[dict]) -> dict[tuple[str, str, str], tuple[str, str]]:
    return {(f"{r['package']}-{r['version']}", r["rule"], r["location"]): (r["verdict"], r["reason"])
            for r in triage}


def summarise(run: dict[str, list[dict]], keys: set[str], verdicts: dict) -> tuple[Counter, Counter]:
    fam: Counter = Counter()
    tier: Counter = Counter()
    for key in keys:
        for f in run.get(key, []):
            verdict = verdicts.get(_identity(key, f), ("untriaged", ""))[0]
            fam[(f["code"][:3], verdict)] += 1
            tier[(f["code"][:3], str(f.get("confidence", "?")), verdict)] += 1
    return fam, tier


def _cell(c: Counter, *prefix: str) -> str:
    get = lambda v: c[(*prefix, v)]  # noqa: E731
    bug, fp = get("bug"), get("false-positive")
    prec = f"{bug / (bug + fp):.2f}" if bug + fp else "n/a"
    return f"{bug} / {fp} / {get('unsure')} / {get('untriaged')} ({prec})"


def render(a: dict[str, list[dict]], b: dict[str, list[dict]], triage: list[dict], names=("A", "B")) -> str:
    keys = set(a) & set(b)
    verdicts = _verdicts(triage)
    fa, ta = summarise(a, keys, verdicts)
    fb, tb = summarise(b, keys, verdicts)
    lines = [f"{len(keys)} releases in both runs; cells are bug / false-positive / unsure / untriaged (precision)", "",
             f"| family | {names[0]} | {names[1]} |", "|---|---|---|"]
    for family in sorted({k[0] for k in fa} | {k[0] for k in fb}):
        lines.append(f"| {FAMILIES.get(family, family)} | {_cell(fa, family)} | {_cell(fb, family)} |")
    lines += ["", f"| family | confidence | {names[0]} | {names[1]} |", "|---|---|---|---|"]
    pairs = sorted({k[:2] for k in ta} | {k[:2] for k in tb},
                   key=lambda p: (p[0], _TIERS.index(p[1]) if p[1] in _TIERS else 9))
    for family, sure in pairs:
        lines.append(f"| {FAMILIES.get(family, family)} | {sure} | {_cell(ta, family, sure)} | {_cell(tb, family, sure)} |")
    changes = []
    for key in sorted(keys):
        ids_a = {_identity(key, f): f for f in a[key]}
        ids_b = {_identity(key, f): f for f in b[key]}
        for ident in sorted(set(ids_a) ^ set(ids_b)):
            f = ids_a.get(ident) or ids_b[ident]
            sign = "-" if ident in ids_a else "+"
            verdict, reason = verdicts.get(ident, ("untriaged", ""))
            changes.append(f"{sign} {key} {ident[1]} {ident[2]} [{f.get('confidence', '?')}] {verdict}: "
                           f"{(reason or f.get('message', ''))[:160]}")
        for ident in sorted(set(ids_a) & set(ids_b)):
            ca, cb = ids_a[ident].get("confidence"), ids_b[ident].get("confidence")
            if ca != cb:
                verdict = verdicts.get(ident, ("untriaged", ""))[0]
                changes.append(f"~ {key} {ident[1]} {ident[2]} [{ca} -> {cb}] {verdict}")
    lines += ["", f"Changed findings ({len(changes)}; - only in {names[0]}, + only in {names[1]}, ~ confidence):"]
    lines += changes or ["(none)"]
    lost = [c for c in changes if c.startswith("-") and " bug:" in c]
    if lost:
        lines += ["", f"LOST BUGS: {len(lost)}"]
    return "\n".join(lines)


def _names(a: Path, b: Path) -> tuple[str, str]:
    """Short column names: the first ancestor directory name (from the closest) where the two paths differ."""
    for pa, pb in zip((a, *a.parents), (b, *b.parents)):
        if pa.name != pb.name:
            return pa.name or str(a), pb.name or str(b)
    return str(a), str(b)


def main(a_dir: str, b_dir: str, triage: str | None = None) -> int:
    a, b = load_run(Path(a_dir)), load_run(Path(b_dir))
    if not a or not b:
        print(f"no raw results in {a_dir if not a else b_dir}")
        return 2
    rows = read_triage(Path(triage) if triage else TRIAGE)
    print(render(a, b, rows, names=_names(Path(a_dir), Path(b_dir))))
    return 0


def triaged_releases(triage: Path = TRIAGE) -> list[str]:
    """`name==version` of every release with a line in the triage or misses file (commented lines of a
    release count too: they name releases judged with non-default settings)."""
    seen: list[str] = []
    for path in (triage, triage.with_name("misses.tsv")):
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            cols = line.lstrip("# ").split("\t")
            if len(cols) >= 5 and cols[0] != "package" and cols[1][:1].isdigit():
                want = f"{cols[0]}=={cols[1]}"
                if want not in seen:
                    seen.append(want)
    return seen
