"""`--profile`: exclusive wall time per phase (discover, read, prefilter, parse, model, each rule, report)
and the slowest files.

A :class:`Profiler` keeps a stack of open phases; time spent in a nested phase (a rule that makes the
project parse another module) is charged to the nested phase only, so the phases add up to the total.
Workers keep their own profiler and send :meth:`Profiler.snapshot` back; the parent merges them.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import ContextManager, TextIO

_NULL = nullcontext()


class _Phase:
    __slots__ = ("profiler", "name")

    def __init__(self, profiler: "Profiler", name: str) -> None:
        self.profiler = profiler
        self.name = name

    def __enter__(self) -> None:
        self.profiler._push(self.name)

    def __exit__(self, *exc: object) -> None:
        self.profiler._pop()


@dataclass
class Profiler:
    """Exclusive time per phase plus wall time per file."""

    phases: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    files: dict[str, float] = field(default_factory=dict)
    _stack: list[list] = field(default_factory=list)  # [name, started]

    def phase(self, name: str) -> ContextManager[None]:
        return _Phase(self, name)

    def _push(self, name: str) -> None:
        now = time.perf_counter()
        if self._stack:
            top = self._stack[-1]
            self.phases[top[0]] = self.phases.get(top[0], 0.0) + now - top[1]
        self._stack.append([name, now])
        self.counts[name] = self.counts.get(name, 0) + 1

    def _pop(self) -> None:
        now = time.perf_counter()
        name, started = self._stack.pop()
        self.phases[name] = self.phases.get(name, 0.0) + now - started
        if self._stack:
            self._stack[-1][1] = now

    def start(self, name: str) -> None:
        """Open a phase that :meth:`stop_all` closes (for phases that end on many code paths)."""
        self._push(name)

    def stop_all(self) -> None:
        while self._stack:
            self._pop()

    def add(self, name: str, seconds: float, count: int = 1) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + count

    def file(self, path: str, seconds: float) -> None:
        self.files[path] = self.files.get(path, 0.0) + seconds

    def snapshot(self) -> "ProfileData":
        return ProfileData(dict(self.phases), dict(self.counts), dict(self.files))

    def merge(self, data: "ProfileData") -> None:
        for name, seconds in data.phases.items():
            self.add(name, seconds, data.counts.get(name, 0))
        for path, seconds in data.files.items():
            self.file(path, seconds)

    def render(self, out: TextIO, wall: float, top: int = 10, workers: int = 1) -> None:
        total = sum(self.phases.values())
        out.write(f"streamlint profile: {wall:.3f} s wall, {total:.3f} s in phases"
                  f"{f' (summed over {workers} workers)' if workers > 1 else ''}\n")
        order = ("discover", "cache", "read", "prefilter", "parse", "model", "suppressions", "report")
        names = [n for n in order if n in self.phases]
        names += sorted((n for n in self.phases if n not in order), key=lambda n: -self.phases[n])
        width = max((len(n) for n in names), default=5)
        for name in names:
            seconds = self.phases[name]
            share = 100.0 * seconds / total if total else 0.0
            out.write(f"  {name:<{width}}  {seconds:9.3f} s  {share:5.1f}%  ({self.counts.get(name, 0)} calls)\n")
        slow = sorted(self.files.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        if slow:
            out.write(f"slowest {len(slow)} files:\n")
            for path, seconds in slow:
                out.write(f"  {seconds * 1000:9.1f} ms  {path}\n")


@dataclass(frozen=True)
class ProfileData:
    phases: dict[str, float]
    counts: dict[str, int]
    files: dict[str, float]


def phase(profiler: Profiler | None, name: str) -> ContextManager[None]:
    """``profiler.phase(name)``, or a no-op when not profiling."""
    return _NULL if profiler is None else profiler.phase(name)
