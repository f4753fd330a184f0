"""fieldfacts._other_receiver (a literal search for `.attr =` reading the dotted chain before it) answers exactly
what the pattern it replaced answers, on the spellings that matter and on random text."""

from __future__ import annotations

import random
import re

import pytest

from streamlint.model.flow.fieldfacts import _other_receiver


def _old(data: bytes, attr: str) -> bool:
    return re.search(rb"\b(?!self\b)\w+(?:\.\w+)*\." + re.escape(attr).encode() + rb"\s*(?:=(?!=)|\+=)",
                     data) is not None


def _new(data: bytes, attr: str) -> bool:
    return _other_receiver(data, re.compile(rb"\." + re.escape(attr).encode() + rb"\s*(?:=(?!=)|\+=)"))


@pytest.mark.parametrize("text", [
    "self.stream = s", "self.a.stream = s", "eng.verifier.stream = s", "x . stream = s", "x.stream  = s",
    "x.stream += 1", "x.stream == s", "myself.stream = s", "self.self.stream = s", "selfish.stream = s",
    "données.stream = s", "éself.stream = s", "self .stream = s", "(a).stream = s", "a[0].stream = s",
    "self.stream=s\nother.stream=s", "# self.stream = s", "'x.stream = s'", "_self.stream = s", "self_.stream = s",
    ".stream = s", "x.streams = s", "x.stream: Stream = s",
])
def test_same_answer_as_the_pattern(text: str) -> None:
    data = text.encode()
    assert _new(data, "stream") == _old(data, "stream"), text


def test_same_answer_on_random_text() -> None:
    rng = random.Random(28)
    pieces = ["self", ".", "stream", " ", "=", "==", "+=", "x", "_", "a1", "\n", "(", ")", "é", "self.", ".stream"]
    for _ in range(20000):
        data = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))).encode()
        assert _new(data, "stream") == _old(data, "stream"), data
