"""RESULTS.md and undecided.tsv from scored mutants."""

from __future__ import annotations

import json
import re
from pathlib import Path
from collections import Counter, defaultdict
from typing import Callable, Iterable

from bench.inject.harness import TOLERANCE, Mutant
from bench.inject.mutate import API_FAMILIES, KINDS


def _pct(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "–"


def _table(title: str, rows: list[Mutant], key: Callable[[Mutant], str], order: Iterable[str] | None = None) -> list[str]:
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for m in rows:
        groups[key(m)].append(m)
    names = [k for k in (order or []) if k in groups] + sorted(k for k in groups if k not in set(order or []))
    out = [f"### {title}", "", "| | defects | caught (rule) | recall (rule) | caught (family) | recall (family) | new other findings |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        g = groups[name]
        r = sum(m.caught_rule for m in g)
        f = sum(m.caught_family for m in g)
        x = sum(len(m.extras) for m in g)
        out.append(f"| {name} | {len(g)} | {r} | {_pct(r, len(g))} | {f} | {_pct(f, len(g))} | {x} |")
    out.append("")
    return out


def _before_after(mutants: list[Mutant], before: dict[str, Mutant], before_name: str = "sample-before.jsonl") -> list[str]:
    """Recall of an earlier run (`before`, by mutant key) and of this one on the same defects: the
    verdicts are this run's (same oracle and judgements), only what was caught differs."""
    pairs = [(m, before[m.key]) for m in mutants if not m.error and m.verdict == "defect" and m.key in before
             and not before[m.key].error]
    if not pairs:
        return []
    out = ["### Before and after, on the same defects", "",
           f"The earlier run's results (`{before_name}`, the analysis before this round of work) scored with "
           f"this run's verdicts: {len(pairs)} defects in both runs.", "",
           "| | defects | before: caught (rule) | before: recall | after: caught (rule) | after: recall |",
           "|---|---:|---:|---:|---:|---:|"]
    for title, key in (("all", lambda m: "all"), ("rule family", lambda m: m.expected[0][:3] + "xx" if m.expected else "?"),
                       ("API family", lambda m: m.api_family)):
        groups: dict[str, list] = defaultdict(list)
        for m, b in pairs:
            groups[key(m)].append((m, b))
        for name in sorted(groups):
            g = groups[name]
            b_caught, a_caught = sum(b.caught_rule for _, b in g), sum(m.caught_rule for m, _ in g)
            label = name if title == "all" else f"{title}: {name}"
            out.append(f"| {label} | {len(g)} | {b_caught} | {_pct(b_caught, len(g))} | {a_caught} | "
                       f"{_pct(a_caught, len(g))} |")
    eq = [(m, before[m.key]) for m in mutants if not m.error and m.verdict == "equivalent" and m.key in before]
    out += ["", f"False alarms on equivalent mutants (the expected rule reported on a harmless edit): before "
                f"{sum(b.caught_rule for _, b in eq)}, after {sum(m.caught_rule for m, _ in eq)} of {len(eq)}.", ""]
    return out


def results_md(mutants: list[Mutant], *, command: str, seconds: float, packages: list[str],
               before: dict[str, Mutant] | None = None, before_name: str = "") -> str:
    scored = [m for m in mutants if not m.error]
    errors = [m for m in mutants if m.error]
    defects = [m for m in scored if m.verdict == "defect"]
    verdicts = Counter(m.verdict for m in scored)
    caught = sum(m.caught_family for m in defects)
    new_all = sum(len(m.new) for m in scored)
    matched = sum(m.caught_family for m in scored)
    extras = Counter(c for m in scored for c, _ in m.extras)
    lines = [
        "# Defect injection: results",
        "",
        f"Command: `{command}` — {len(mutants)} mutants over {len(packages)} releases in {seconds / 60:.1f} min.",
        f"Releases: {', '.join(packages)}.",
        "",
        f"Mutants linted: {len(scored)} ({verdicts.get('defect', 0)} defects, {verdicts.get('equivalent', 0)} "
        f"equivalent, {verdicts.get('undecided', 0)} undecided); {len(errors)} could not be run.",
        f"Caught = a new finding (not on the original file) with the expected rule (`rule`) or a rule of the "
        f"same family (`family`) within ±{TOLERANCE} lines of the expected line or region (see README.md).",
        "",
        f"**Recall over the defects: rule {_pct(sum(m.caught_rule for m in defects), len(defects))}, "
        f"family {_pct(caught, len(defects))}.**",
        f"**Precision of the new findings: {_pct(matched, new_all)}** ({matched} of {new_all} new findings "
        f"are the expected one; the rest: {', '.join(f'{c} ×{n}' for c, n in extras.most_common()) or 'none'}).",
        "",
    ]
    lines += _before_after(mutants, before or {}, before_name or "sample-before.jsonl")
    lines += _table("Per mutation kind", defects, lambda m: m.kind, KINDS)
    lines += _table("Per mutation kind and detail", defects, lambda m: f"{m.kind}: {m.detail}" if m.kind in (
        "delete-wait", "break-direct", "break-callee", "mode-api") else m.kind)
    lines += _table("Per package", defects, lambda m: f"{m.package} {m.version}")
    lines += _table("Per API family", defects, lambda m: m.api_family, API_FAMILIES)
    lines += _table("Per rule family expected", defects, lambda m: m.expected[0][:3] + "xx" if m.expected else "?")
    judged = sum(m.reason.startswith("judged: ") for m in scored)
    lines += [f"Verdicts judged by reading the code (`judged.tsv`, they replace the automatic ones): {judged} "
              f"of {len(scored)}.", ""]
    eq = [m for m in scored if m.verdict == "equivalent"]
    und = [m for m in scored if m.verdict == "undecided"]
    lines += [
        "### Equivalent and undecided mutants (not in the recall)",
        "",
        f"- equivalent: {len(eq)}, of which the tool reports the expected rule on {sum(m.caught_rule for m in eq)} "
        f"(a finding there is a false alarm on a harmless edit)",
        f"- undecided: {len(und)} (listed in `undecided.tsv`), of which the tool reports the expected rule on "
        f"{sum(m.caught_rule for m in und)}",
        "",
    ]
    reasons = Counter((m.verdict, "judged by reading the code (reasons in judged.tsv)" if m.reason.startswith("judged: ")
                       else re.sub(r"`[^`]*`", "`…`", m.reason)) for m in und + eq)
    lines += ["| verdict | reason (names elided) | mutants |", "|---|---|---:|"]
    lines += [f"| {v} | {r} | {n} |" for (v, r), n in reasons.most_common()]
    lines.append("")
    misses = Counter((m.kind, m.detail if m.kind in ("delete-wait", "break-direct", "break-callee", "mode-api") else "",
                      m.api_family) for m in defects if not m.caught_family)
    lines += ["### Misses by class", "", "| kind | detail | API family | missed |", "|---|---|---|---:|"]
    lines += [f"| {k} | {d} | {f} | {n} |" for (k, d, f), n in misses.most_common()]
    lines.append("")
    if errors:
        lines += ["### Not run", ""] + [f"- {m.key}: {m.error}" for m in errors[:30]] + [""]
    return "\n".join(lines)


def undecided_tsv(mutants: list[Mutant]) -> str:
    rows = ["package\tversion\tfile\tfunction\tkind\tdetail\tline\tflagged\treason"]
    for m in sorted(mutants, key=lambda m: (m.package, m.version, m.key)):
        if m.verdict == "undecided" and not m.error:
            rows.append("\t".join([m.package, m.version, m.file, m.qualname, m.kind, m.detail, str(m.line),
                                   "yes" if m.caught_rule else "no", m.reason.replace("\t", " ")]))
    return "\n".join(rows) + "\n"


def compare_runs(before: Path, after: Path) -> str:
    """Two runs of the same mutants (e.g. a sample and its `--rerun` at a branch): defects caught in one run
    only, and every mutant whose extra findings (findings off the expected line, which count against
    precision) changed. Mutants present in one run only are counted apart."""
    def load(path: Path) -> dict[str, dict]:
        rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        return {r["key"]: r for r in rows if "key" in r}

    a, b = load(before), load(after)
    name_a, name_b = ((before.name, after.name) if before.name != after.name
                      else (str(before.parent.name + "/" + before.name), str(after.parent.name + "/" + after.name)))
    common = sorted(set(a) & set(b))
    defects = [k for k in common if b[k]["verdict"] == "defect"]
    caught_a = sum(bool(a[k].get("caught_rule")) for k in defects)
    caught_b = sum(bool(b[k].get("caught_rule")) for k in defects)
    lines = [f"{len(common)} mutants in both runs ({len(set(a) - set(b))} only in {name_a}, "
             f"{len(set(b) - set(a))} only in {name_b}); defects caught at the expected line (rule): "
             f"{caught_a} / {len(defects)} -> {caught_b} / {len(defects)}"]
    for name, run in ((name_a, a), (name_b, b)):  # what each `--min-confidence` keeps (runs that recorded it)
        tiers = Counter(run[k].get("caught_confidence") for k in defects if run[k].get("caught_rule"))
        if any(tiers):
            lines.append(f"  {name}: caught at high {tiers['high']}, medium {tiers['medium']}, low {tiers['low']}")
    for k in defects:
        was, now = bool(a[k].get("caught_rule")), bool(b[k].get("caught_rule"))
        if was != now:
            lines.append(f"  {'GAINED' if now else 'LOST'} {b[k]['package']} {k}")
    extras = lambda r: sorted(tuple(x) for x in r.get("extras") or [])  # noqa: E731
    changed = [k for k in common if extras(a[k]) != extras(b[k]) or bool(a[k].get("error")) != bool(b[k].get("error"))]
    lines.append(f"mutants whose extra findings or errors changed: {len(changed)}")
    for k in changed:
        lines.append(f"  {b[k]['verdict']:10} {k}: {extras(a[k])} -> {extras(b[k])}"
                     + (f" error: {b[k]['error'][:80]}" if b[k].get("error") else ""))
    return "\n".join(lines)
