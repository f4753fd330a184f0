"""Calls of a method handed into a project record of hooks (flow/hookfields.py), calls on a parameter only ever
bound to another class (flow/receivers.py), and an object whose results leave it only through a joining accessor
(flow/joinedreads.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, engine_for, lint_paths
from streamlint.discovery import discover
from streamlint.model.flow.callerscopes import caller_scopes
from streamlint.model.flow.hookfields import hook_sites

PROJECT = FIXTURES / "projects" / "sl201_hook_record_callers"
PKG = PROJECT / "moeserve"


def test_hook_sites() -> None:
    project = engine_for(PROJECT).project
    experts = project.file(str(PKG / "experts.py"))
    methods = experts.classes["ExpertRuntime"].methods
    flush = hook_sites(project, experts, methods["_flush"])
    assert flush is not None and [site.function.node.name.value for _m, site in flush] == ["step"]
    assert len(hook_sites(project, experts, methods["_rebalance"]) or []) == 2  # step and shutdown
    assert hook_sites(project, experts, methods["_trace"]) is None  # read into a name first: calls unseen
    assert hook_sites(project, experts, methods["__init__"]) is None
    found = caller_scopes(project, experts, methods["_flush"], "self._stream")
    assert found is not None and found[2] == "self._compute"
    for name in ("_rebalance", "_trace", "_compact"):  # outside every scope / unseen / a stream the loop made
        assert caller_scopes(project, experts, methods[name], "self._stream") is None, name


def test_hook_confidences() -> None:
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    found = {(Path(f.path).name, f.span.start_line): f.confidence.value for f in lint_paths(PROJECT, files)
             if f.code == "SL201"}
    assert found == {("experts.py", 31): "low", ("experts.py", 37): "high", ("experts.py", 43): "high",
                     ("experts.py", 49): "high",  # the hooks
                     ("experts.py", 56): "low",  # the warm-up probe only ever handed a DenseScorer is no caller
                     ("experts.py", 62): "medium", ("experts.py", 68): "medium",  # handed this runtime / a subclass
                     ("kvspill.py", 20): "high",  # the record calls the hook itself (self.on_evict()) at shutdown
                     ("forwarding.py", 18): "medium",  # the probe handed a wrapper forwarding by __getattr__
                     ("beams.py", 21): "medium",  # the probe queued through functools.partial in another module
                     ("prefill.py", 33): "high"}  # the record's hooks fired by reflection (astuple) at shutdown


def test_record_calls_its_own_hook() -> None:
    project = engine_for(PROJECT).project
    kv = project.file(str(PKG / "kvspill.py"))
    sites = hook_sites(project, kv, kv.classes["PagedKV"].methods["_evict"])
    assert sites is not None and sorted(site.function.node.name.value for _m, site in sites) == ["run_evictions",
                                                                                                  "step"]


def test_foreign_receivers() -> None:
    from streamlint.model.flow.callers import callers_of
    from streamlint.model.flow.receivers import foreign_receiver

    project = engine_for(PROJECT).project
    experts = project.file(str(PKG / "experts.py"))
    methods = experts.classes["ExpertRuntime"].methods
    callers = {name: sorted(site.function.node.name.value for m, site in callers_of(project, experts, methods[name])
                            if not foreign_receiver(project, m, site, methods[name]))
               for name in ("score", "route", "shard")}
    assert callers == {"score": ["step"], "route": ["probe_routes", "step"], "shard": ["probe_shard", "step"]}
    sampler = project.file(str(PKG / "forwarding.py"))
    sample = sampler.classes["TopKSampler"].methods["sample"]
    assert sorted(site.function.node.name.value for m, site in callers_of(project, sampler, sample)
                  if not foreign_receiver(project, m, site, sample)) == ["probe_sample", "step"]
