"""Past the caller-file bound a name search stays silent: an object (or a ticket record) reaches helpers in files that
never name its class, so narrowing the search to the files naming it would miss their joins (names36 review)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import lint_paths, write

PREFETCH = """
    import torch


    class WeightPrefetcher:
        def __init__(self, host):
            self.host = host
            self.copy_stream = torch.cuda.Stream()
            self.dev = [torch.empty_like(h, device="cuda") for h in host]

        def prefetch(self, ids):
            with torch.cuda.stream(self.copy_stream):
                for i, e in enumerate(ids):
                    self.dev[i].copy_(self.host[e], non_blocking=True)
            self.ready_ids = list(ids)


    def build(host):
        return WeightPrefetcher(host)
"""

SIDE = """
    import torch


    class Side{i}:
        def __init__(self):
            self.copy_stream = torch.cuda.Stream()

        def fence(self):
            self.copy_stream.synchronize()
"""


def _bound(monkeypatch, n: int) -> None:
    import streamlint.model.flow.leaves as leaves
    import streamlint.model.options as options

    monkeypatch.setattr(leaves, "MAX_CALLER_FILES", n)
    monkeypatch.setattr(options, "MAX_CALLER_FILES", n)


def test_untyped_helper_past_the_bound_still_joins(tmp_path: Path, monkeypatch) -> None:
    _bound(monkeypatch, 2)
    write(tmp_path, "pkg/__init__.py", "")
    owner = write(tmp_path, "pkg/prefetch.py", PREFETCH)
    write(tmp_path, "pkg/hooks.py", """
        import torch


        def drain(obj):
            torch.cuda.current_stream().wait_stream(obj.copy_stream)
    """)
    write(tmp_path, "pkg/serve.py", """
        from pkg.hooks import drain
        from pkg.prefetch import build


        def step(host, ids, x):
            pf = build(host)
            pf.prefetch(ids)
            drain(pf)
            return x @ pf.dev[0]
    """)
    for i in range(4):
        write(tmp_path, f"pkg/side{i}.py", SIDE.format(i=i))
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    found = [f for f in lint_paths(tmp_path, files) if f.path == str(owner) and f.code == "SL201"]
    assert found == [], [f.message for f in found]


def test_ticket_held_without_its_class_past_the_bound_is_consumed(tmp_path: Path, monkeypatch) -> None:
    _bound(monkeypatch, 2)
    write(tmp_path, "svc/__init__.py", "")
    write(tmp_path, "svc/records.py", """
        from dataclasses import dataclass
        from typing import Any


        @dataclass
        class PageTicket:
            slot: int
            ready: Any
    """)
    cache = write(tmp_path, "svc/cache.py", """
        import torch

        from svc.records import PageTicket


        class PageCache:
            def __init__(self, host):
                self.host = host
                self.h2d = torch.cuda.Stream()
                self.pages = [torch.empty_like(h, device="cuda") for h in host]

            def fetch(self, idx: int, slot: int) -> PageTicket:
                self.h2d.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.h2d):
                    self.pages[slot].copy_(self.host[idx], non_blocking=True)
                ev = self.h2d.record_event()
                return PageTicket(slot, ev)

            def wait_ready(self, t: PageTicket) -> None:
                if t.slot >= len(self.pages):
                    raise IndexError(t.slot)
    """)
    write(tmp_path, "svc/hooks.py", """
        import torch


        def settle(tickets):
            for t in tickets:
                torch.cuda.current_stream().wait_event(t.ready)
    """)
    write(tmp_path, "svc/serve.py", """
        from svc.hooks import settle


        def step(cache, x):
            t = cache.fetch(0, 0)
            cache.wait_ready(t)
            pending = [t]
            y = x * 2
            settle(pending)
            return y @ cache.pages[t.slot]
    """)
    for i in range(4):
        write(tmp_path, f"svc/flag{i}.py", f"""
            class Flag{i}:
                def __init__(self):
                    self.ready = False

                def poll(self, other):
                    return other.ready
        """)
    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    found = [f for f in lint_paths(tmp_path, files) if f.path == str(cache) and f.code == "SL201"]
    assert found == [], [f.message for f in found]
