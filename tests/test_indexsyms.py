"""Index symbols (flow/indexsyms.py): which element of a collection an index expression names."""

from harness import lint_text

from streamlint.model.flow.indexsyms import SYM, parts_distinct


def sym(root: str, kind: str, value: int) -> str:
    return f"{SYM}{root}:{kind}:{value}"


def test_offsets_residues_and_flips_of_one_root():
    assert parts_distinct(sym("k@param", "o", 0), sym("k@param", "o", 1))
    assert not parts_distinct(sym("k@param", "o", 1), sym("k@param", "o", 1))
    assert parts_distinct(sym("k@param", "m2", 0), sym("k@param", "m2", 1))
    assert not parts_distinct(sym("k@param", "m2", 0), sym("k@param", "m4", 1))  # two moduli: unknown
    assert parts_distinct(sym("self.a@0", "o", 0), sym("self.a@0", "f", 1))
    assert not parts_distinct(sym("self.a@0", "o", 0), sym("self.a@0", "f", 2))  # flipped back
    assert not parts_distinct(sym("self.a@0", "o", 1), sym("self.a@0", "f", 1))


def test_other_roots_literals_and_unknown_parts_may_alias():
    assert not parts_distinct(sym("k@3", "o", 0), sym("k@7", "o", 1))  # rebound in between
    assert not parts_distinct(sym("k@param", "o", 1), "0")  # a symbol against a literal
    assert not parts_distinct(sym("k@param", "o", 1), None)
    assert not parts_distinct(sym("k@param", "o", 0), sym("k@param", "m2", 1))
    assert parts_distinct("0", "1") and not parts_distinct("0", "0")  # literals: as before


_KNOWN_LITERAL = '''
import torch


class Ring:
    def __init__(self, device):
        self.slots = [torch.zeros(4, device=device) for _ in range(2)]
        self.side = torch.cuda.Stream(device)

    def _fill(self, slot):
        with torch.cuda.stream(self.side):
            self.slots[slot].fill_(1.0)

    def step(self, x):
        slot = 0
        if slot == 0:
            self._fill(slot + 1)
        return x + self.slots[slot]
'''


def test_a_local_bound_to_a_literal_and_tested_against_it():
    findings = lint_text(_KNOWN_LITERAL)  # (the symbol of `slot` is the int 0: once a crash)
    assert not [f for f in findings if f.code == "SL000"], findings
    assert not [f for f in findings if f.code == "SL201" and f.span.start_line == 18], findings  # slot 1 filled
