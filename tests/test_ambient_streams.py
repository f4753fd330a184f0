"""The stream a method runs on by its callers, and two names of one stream object (flow/ambient.py)."""
from __future__ import annotations

from pathlib import Path

from harness import FIXTURES, engine_for, lint_paths
from streamlint.discovery import discover
from streamlint.model.flow.ambient import ambient_stream, field_alias

PROJECT = FIXTURES / "projects" / "sl201_engine_compute_stream"
PKG = PROJECT / "servekit"


def _findings() -> dict[tuple[str, int, str], str]:
    files = [str(f) for f in discover([str(PROJECT)], PROJECT).files]
    return {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value for f in lint_paths(PROJECT, files)}


def test_ambient_stream_and_aliases() -> None:
    engine = engine_for(PROJECT)
    project = engine.project
    runtime = project.file(str(PKG / "runtime.py"))
    vocoder = project.file(str(PKG / "vocoder.py"))
    cls = runtime.classes["SpeechRuntime"]
    assert field_alias(project, runtime, cls, "self._vocoder.stream") == "self._compute_stream"
    assert field_alias(project, runtime, cls, "self._spill.stream") == "self._copy_stream"
    assert field_alias(project, runtime, cls, "self._vocoder.weight") is None  # (not a field of the runtime)
    methods = cls.methods
    assert ambient_stream(project, runtime, methods["_sample_rows"]) == "self._compute_stream"
    assert ambient_stream(project, runtime, methods["_commit_ids"]) == "self._compute_stream"
    assert ambient_stream(project, runtime, methods["_offload"]) == "self._compute_stream"
    assert ambient_stream(project, runtime, methods["normalize"]) is None  # also called outside the scope
    assert ambient_stream(project, runtime, methods["on_tokens"]) is None  # handed away as a callback
    assert ambient_stream(project, runtime, methods["warmup"]) is None  # the builder runs it on its own stream
    codec = vocoder.classes["FrameVocoder"].methods
    assert ambient_stream(project, vocoder, codec["synthesize_frames"]) == "self.stream"  # translated to its object
    assert ambient_stream(project, vocoder, codec["render_chunk"]) is None  # built twice, with two streams


def test_confidence_follows_what_the_callers_show() -> None:
    found = _findings()
    assert found[("runtime.py", 90, "SL201")] == "high"  # the warm-up on the builder's stream: a real second stream
    assert found[("runtime.py", 58, "SL201")] == "medium"  # the copy stream: a real second stream
    assert found[("runtime.py", 72, "SL201")] == "low"  # one caller runs it on the compute stream itself
    # one caller runs the callback on the compute stream, but it is handed on by reference: whoever runs it
    # then need not have that stream current (an unseen caller, not lowered: what the base gives)
    assert found[("runtime.py", 80, "SL201")] == "medium"
    assert found[("vocoder.py", 22, "SL201")] == "medium"  # a caller runs it with another stream of its own current
    assert ("runtime.py", 34, "SL201") not in found and ("runtime.py", 34, "SL301") not in found
    assert ("vocoder.py", 15, "SL201") not in found


UNSEEN = FIXTURES / "projects" / "sl201_ambient_unseen_callers"


def test_unseen_callers_keep_the_entry_stream_unknown() -> None:
    project = engine_for(UNSEEN).project
    pkg = UNSEEN / "enginekit"

    def methods(module: str, cls: str):
        model = project.file(str(pkg / module))
        return model, model.classes[cls].methods

    model, m = methods("publisher.py", "ResultPublisher")
    assert ambient_stream(project, model, m["_publish"]) is None  # a thread target by reference, same file
    assert ambient_stream(project, model, m["_drain"]) is None  # called inside a lambda run on a thread
    model, m = methods("head.py", "StreamedHead")
    assert ambient_stream(project, model, m["forward"]) is None  # nn.Module.__call__ runs it too
    model, m = methods("pipelined.py", "TurnDecoder")
    assert ambient_stream(project, model, m["_advance"]) is None  # the field is rebound in the step
    model, m = methods("sampler.py", "SamplingRuntime")
    assert ambient_stream(project, model, m["_score"]) == "self._compute_stream"  # every caller runs it so ...
    found = {(Path(f.path).name, f.span.start_line, f.code): f.confidence.value
             for f in lint_paths(UNSEEN, [str(f) for f in discover([str(UNSEEN)], UNSEEN).files])}
    # ... but the object keeps the default stream in a field: the entry stream is not merged with it
    assert found[("sampler.py", 23, "SL201")] == "high" and found[("sampler.py", 23, "SL301")] == "high"
    for line in (25, 35):  # a callback / a lambda's call: no lowering on the one call seen under the stream
        assert found[("publisher.py", line, "SL201")] == "high"
    assert found[("head.py", 16, "SL201")] == "high" and found[("pipelined.py", 21, "SL201")] == "high"


def test_ambient_answers_do_not_depend_on_the_order_of_questions() -> None:
    stages = ["_embed", "_attend", "_mix", "_norm", "_head"]
    answers = []
    for order in (stages, stages[::-1]):
        project = engine_for(UNSEEN).project
        model = project.file(str(UNSEEN / "enginekit" / "layers.py"))
        methods = model.classes["LayeredDecode"].methods
        answers.append({n: ambient_stream(project, model, methods[n]) for n in order})
    assert answers[0] == answers[1]
    assert answers[0]["_embed"] == answers[0]["_norm"] == "self._compute_stream"  # three callers up at most
    assert answers[0]["_head"] is None  # four: past the bound, asked first or last


PROVENANCE = FIXTURES / "projects" / "sl201_stream_provenance"


def test_stream_provenance_across_objects() -> None:
    from streamlint.model.flow.provenance import param_alias, parse, same_stream, self_alias

    project = engine_for(PROVENANCE).project
    pkg = PROVENANCE / "podserve"
    sched = project.file(str(pkg / "scheduler.py"))
    cls = sched.classes["Scheduler"]
    finalize = cls.methods["_finalize"]
    # the slot's stream: a dataclass field, filled by a factory, in a tuple built alike, of the runtime the
    # engine hands the scheduler together with that runtime's compute stream (a property)
    assert self_alias(project, sched, cls, "self.runtime.decode_slots[slot_id].compute_stream") == "self._compute_stream"
    assert self_alias(project, sched, cls, "slot.compute_stream", finalize) == "self._compute_stream"
    assert same_stream(project, sched, finalize, "slot.compute_stream", "self._compute_stream")
    assert not same_stream(project, sched, finalize, "self._copy_stream", "self._compute_stream")
    assert not same_stream(project, sched, finalize, "self.runtime.decode_slots[0]", "self.runtime.decode_slots[1]")
    # a parameter: one caller binds it to the compute stream; two callers that disagree leave it unknown
    assert param_alias(project, sched, cls.methods["_replay"], "stream") == "self._compute_stream"
    assert param_alias(project, sched, cls.methods["_rescore"], "stream") is None
    drafter = project.file(str(pkg / "drafter.py"))
    verify = drafter.classes["Verifier"].methods["verify"]
    propose = drafter.classes["Drafter"].methods["propose"]
    assert same_stream(project, drafter, verify, "self.runtime.compute_stream", "self.stream")  # built once
    assert not same_stream(project, drafter, propose, "self.runtime.compute_stream", "self.stream")  # built twice
    stage = drafter.classes["Prefetcher"].methods["stage"]
    assert not same_stream(project, drafter, stage, "self.runtime.compute_stream", "self.copy_stream")
    assert parse("self.a[i[j]].b") == ("self", ("a", "[]", "b")) and parse("f(x).y") is None and parse("a[") is None
    speculate = drafter.classes["Speculator"].methods["speculate"]  # also built by reference, from a registry
    assert not same_stream(project, drafter, speculate, "self.runtime.compute_stream", "self.stream")
    from streamlint.model.flow.confined import confined_callers

    codec = project.file(str(pkg / "codec.py"))
    detok = codec.classes["Detokenizer"].methods["run"]
    sites = confined_callers(project, codec, detok)  # only ever held in the runtime's `_detok`
    assert sites is not None and [s.function.node.name.value for _m, s in sites] == ["emit"]
    assert ambient_stream(project, codec, detok) == "self.stream"
    assert confined_callers(project, codec, codec.classes["Packer"].methods["run"]) is None  # handed to hooks


def test_record_fields_skip_methods_and_compound_statements(tmp_path) -> None:
    from streamlint.model.flow.provenance import record_fields

    (tmp_path / "slots.py").write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Slot:\n    stream: object\n    if True:\n"
        "        extra: int = 0\n    width: int = 4\n\n    def size(self) -> int:\n        return self.width\n\n\n"
        "class Plain: pass\n", encoding="utf-8")
    model = engine_for(tmp_path).project.file(str(tmp_path / "slots.py"))
    assert record_fields(model, model.classes["Slot"]) == ("stream", "width")
    assert record_fields(model, model.classes["Plain"]) is None
