"""Confidence of SL201 when one access is a call of code not seen handed a field that certainly holds host memory
(flow/hostwrites.HostWrites.unseen_call_op, ``Race.host_handed``): fixtures/rules/host_pool_handed_to_library.py
says where the findings are; this says how sure they are."""

from pathlib import Path

from harness import lint_paths, lint_text

from streamlint.finding import Confidence

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
NAME = "host_pool_handed_to_library.py"


def _confidences(tmp_path) -> dict[int, Confidence]:
    code = (FIXTURES / NAME).read_text()
    return {f.span.start_line: f.confidence for f in lint_text(code, tmp=tmp_path) if f.code == "SL201"}


def _lines(marker: str) -> list[int]:
    return [i for i, text in enumerate((FIXTURES / NAME).read_text().splitlines(), 1) if marker in text]


def test_a_pinned_pool_handed_to_an_unseen_call_with_its_event_kept_is_low(tmp_path):
    found = _confidences(tmp_path)
    low = _lines("# expect: SL201 -- low")
    assert len(low) == 3
    assert all(found[line] is Confidence.LOW for line in low)  # the read, and a later write after it


def test_a_registered_pool_handed_on_without_its_event_stays_medium():
    """fixtures/projects/sl201_registered_pool_handoff: the region handed to the endpoint with the copy's event kept
    beside it (``publish``) is a gated hand-off, low; handed on with no event (``publish_without_event``) medium;
    the current stream copying the slot back (``publish_and_echo``) a stream read, high (its write-after-read is
    judged against that read, not the gated hand-off before it)."""
    root = FIXTURES.parent / "projects" / "sl201_registered_pool_handoff"
    files = [str(p) for p in sorted(root.rglob("*.py"))]
    found = {(Path(f.path).name, f.span.start_line): f.confidence for f in lint_paths(root, files, None)
             if f.code == "SL201"}
    source = (root / "relay" / "outbox.py").read_text().splitlines()
    line = {marker: next(i for i, text in enumerate(source, 1) if marker in text)
            for marker in ("no join token", "the echo reads", "an H2D on the current stream")}
    assert found[("outbox.py", line["no join token"])] is Confidence.MEDIUM
    assert found[("outbox.py", line["the echo reads"])] is Confidence.HIGH
    assert found[("outbox.py", line["an H2D on the current stream"])] is Confidence.HIGH
    assert {c for (name, _), c in found.items() if name == "outbox.py"} >= {Confidence.LOW}


def test_stream_and_host_reads_of_the_pool_and_device_fields_stay_high(tmp_path):
    found = _confidences(tmp_path)
    high = _lines("# expect: SL201 -- high")
    assert len(high) == 4  # (torch.save of the pool: torch is seen, it reads the bytes)
    assert all(found[line] in (None, Confidence.HIGH) for line in high)
