"""Conditions that follow a call (flow/fieldliterals.py): a str / int literal a method stores in a ``self.*`` field
decides the caller's later tests of that field, and the caller is run once through each literal a planning
method chooses, so the host reads of that method's pending non-blocking copies meet (or miss) the wait each
choice picks. fixtures/rules/sl201_mode_chosen_sync_point.py says where the findings are; this checks the
pieces and the confidence."""

import textwrap

from harness import lint_text

from streamlint._lazy import cst
from streamlint.finding import Confidence
from streamlint.model.flow.fieldliterals import FieldLiterals, field_literal_tests
from streamlint.model.flow.values import CVal, State


class _Probe(FieldLiterals):
    def render(self, st, node):
        return cst.Module([]).code_for_node(node)


def _test(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def test_a_literal_assigned_to_a_field_decides_equality_membership_and_their_negations():
    probe, st = _Probe(), State()
    probe.note_literal(st, "self.wait_point", CVal("early"))
    assert probe.literal_test(st, _test('self.wait_point == "early"')) is True
    assert probe.literal_test(st, _test('self.wait_point == "late"')) is False  # never assigned on this path
    assert probe.literal_test(st, _test('"late" != self.wait_point')) is True
    assert probe.literal_test(st, _test('self.wait_point in ("late", "early")')) is True
    assert probe.literal_test(st, _test('self.wait_point not in ["early"]')) is False
    assert probe.literal_test(st, _test('self.other == "early"')) is None  # no writer seen on this path


def test_a_non_literal_assignment_forgets_the_value_and_booleans_stay_assumptions():
    probe, st = _Probe(), State()
    probe.note_literal(st, "self.level", CVal(2))
    assert probe.literal_test(st, _test("self.level == 2")) is True
    probe.note_literal(st, "self.level", None)  # `self.level = cfg.level`: unknown again
    assert probe.literal_test(st, _test("self.level == 2")) is None
    probe.note_literal(st, "self.ready", CVal(True))
    assert st.assume == {"self.ready": True} and "self.ready" not in st.literals


def test_the_tested_fields_are_those_compared_with_a_literal():
    fn = cst.parse_module(textwrap.dedent('''
        def step(self, x):
            if self.mode == "pad":
                pass
            if self.flag:
                pass
            if self.count > n:
                pass
    ''')).body[0]

    class _Fn:
        node = fn
    assert field_literal_tests(_Fn()) == {"mode"}


PLAN = '''
import torch
import torch.distributed as dist


class Exchange:
    def __init__(self, cfg):
        self.cfg = cfg
        self.when = "never"

    def _plan(self, routing):
        counts = routing.sum(dim=0)
        if self.cfg.capped:
            self.when = "first"
        else:
            self.when = "second"
        self.sizes = counts.to("cpu", non_blocking=True)

    def step(self, x, routing):
        self._plan(routing)
        if self.when == "first":
            torch.cuda.current_stream().synchronize()
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, output_split_sizes=self.sizes.tolist())
        if self.when == "second":
            torch.cuda.current_stream().synchronize()
        return out
'''


def test_the_choice_whose_wait_comes_after_the_read_is_reported_at_medium(tmp_path):
    found = [f for f in lint_text(PLAN, tmp=tmp_path) if f.code == "SL201"]
    read = next(i for i, text in enumerate(PLAN.lstrip("\n").splitlines(), 1) if "output_split_sizes" in text)
    assert [(f.span.start_line, f.confidence) for f in found] == [(read, Confidence.MEDIUM)]


def test_every_choice_waiting_before_the_read_is_silent(tmp_path):
    fixed = PLAN.replace('if self.when == "second":', 'if self.when == "never":').replace(
        '        out = torch.empty_like(x)\n',
        '        if self.when == "second":\n            torch.cuda.current_stream().synchronize()\n'
        '        out = torch.empty_like(x)\n')
    assert [f for f in lint_text(fixed, tmp=tmp_path) if f.code == "SL201"] == []


def test_a_method_of_the_object_not_run_here_forgets_the_fields_it_may_assign():
    probe, st = _Probe(), State()
    probe.note_literal(st, "self.when", CVal("first"))
    probe.note_literal(st, "self.level", CVal(1))
    probe.forget_literals(st, cst.parse_expression("helper.reset()"), None)  # not a method of the object
    assert st.literals == {"self.when": "first", "self.level": 1}
    method = cst.parse_module("def reset(self):\n    self.when = 'second'\n").body[0]

    class _Fn:
        node = method
    probe.forget_literals(st, cst.parse_expression("self.reset()"), (_Fn(), None))
    assert st.literals == {"self.level": 1}
    probe.forget_literals(st, cst.parse_expression("self.unknown()"), None)  # unseen: any field may change
    assert st.literals == {}
