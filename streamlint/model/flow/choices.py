"""Assignments that choose one of several values (mixin of :class:`~streamlint.model.flow.interp.Interp`).

``tensors = (a, b) if flag else (b, c)``: each path binds its own collection, correlated with ``flag``.
``final = [current, self.second_stream][step % 2]``: a stream picked from a literal list by an index the
analysis does not know is one of the listed streams, each on a path of its own (2 to 4 plain names or attribute
chains, at least one a stream the analysis knows or every one a ``self.`` field the class assigns, each other one a
stream or a ``self.`` field of no known kind, the picked name used as a stream in the function): work in a scope on the pick is then ordered by the joins of each listed stream
(``current.wait_stream(self.second_stream)`` covers both paths), instead of being charged to a stream nobody
joins. A constant index, a list with calls or starred items, or any non-stream element keeps the former reading,
as does a pick that would make a path into more than ``PICK_PATHS`` paths within one loop (picks in a loop multiply:
three 4-lane picks per round are 64 paths, more than the interpreter keeps, and the paths it drops lose their
findings; a loop's exit gives its paths back the count they entered with, so picks in successive loops each fork)."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model import apis
from streamlint.model.attrstreams import attr_origin
from streamlint.model.flow.values import KVal, State, SVal

_MAX_PICKS = 4
PICK_PATHS = 16  # the paths one path may become through picks (MAX_PATHS bounds all paths)


def _literal_pick(value: cst.BaseExpression) -> tuple[cst.BaseExpression, ...] | None:
    """The elements of ``[a, b][i]`` / ``(a, b)[i]`` with ``i`` no literal, each a name or an attribute chain."""
    if not isinstance(value, cst.Subscript) or not isinstance(value.value, (cst.List, cst.Tuple)) \
            or len(value.slice) != 1 or not isinstance(value.slice[0].slice, cst.Index):
        return None
    index = value.slice[0].slice.value
    if isinstance(index, cst.UnaryOperation):
        index = index.expression
    if isinstance(index, cst.Integer):
        return None
    elements = value.value.elements
    if not 2 <= len(elements) <= _MAX_PICKS or any(isinstance(el, cst.StarredElement) for el in elements):
        return None
    if not all(isinstance(el.value, (cst.Name, cst.Attribute)) for el in elements):
        return None
    return tuple(el.value for el in elements)


def _used_as_stream(project, file, fn, name: str) -> bool:
    """Is ``name`` entered as a stream in the function (a ``with`` item the project classifies as a stream scope
    on it: ``torch.cuda.stream(name)``, a project wrapper) or used through a stream method
    (``name.wait_stream(...)``)?"""
    for site in fn.calls:
        if site.method in apis.STREAM_METHODS and isinstance(site.receiver, cst.Name) and site.receiver.value == name:
            return True
    for scope in file.scopes:
        if scope.function is fn and any(isinstance(u.arg("stream"), cst.Name) and u.arg("stream").value == name
                                        for u in project.scope_use(file, scope).uses):
            return True
    return False


class Choices:
    """Interp state it uses: ``single``, ``project``, ``cfile``, ``cfn``. It asks control flow (assign, branch, decide) and expressions (ev)."""

    def choice_assign(self, node: cst.Assign, st: State) -> list[State] | None:
        if len(node.targets) != 1:
            return None
        value, target = node.value, node.targets[0].target
        if isinstance(value, cst.IfExp) and all(isinstance(arm, (cst.Tuple, cst.List)) for arm in (value.body, value.orelse)) \
                and self.decide(st, value.test) is None:
            self.ev(st, value.test)

            def arm(expr: cst.BaseExpression):
                def run(s: State) -> list[State]:
                    self.assign(s, target, self.ev(s, expr), expr)
                    return [s]
                return run
            return self.branch(st, value.test, [(True, arm(value.body)), (False, arm(value.orelse))])
        picks = _literal_pick(value) if isinstance(target, cst.Name) and not self.single else None
        if picks is None or st.fanout * len(picks) > PICK_PATHS:
            return None
        values = [self.ev(st, el) for el in picks]
        if not (any(isinstance(v, SVal) for v in values) or all(self._own_field(v) for v in values)) or not all(
                isinstance(v, SVal) or isinstance(v, KVal) and not v.opaque and v.key.startswith("self.")
                for v in values) or len({v.key for v in values}) < 2 or not _used_as_stream(self.project, self.cfile, self.cfn, target.value):
            return None  # (a stream and stream fields, the pick used as a stream: a scope, a wait, a record)
        self.ev(st, value.slice[0].slice.value)  # (the index: a host value)
        out = []
        st.fanout *= len(picks)  # (each path the pick makes carries it: its clones copy it)
        for i, (el, v) in enumerate(zip(picks, values)):
            s = st if i == len(picks) - 1 else st.clone()
            self.assign(s, target, v, el)
            out.append(s)
        return out

    def _own_field(self, value) -> bool:
        """A ``self.<attr>`` the class itself assigns (``self.s0 = torch.cuda.Stream()``): a ping-pong pick
        ``[self.s0, self.s1][i % 2]`` lists no stream the flow knows by kind, only the object's own fields."""
        if not isinstance(value, KVal) or value.opaque or not value.key.startswith("self.") \
                or value.key.count(".") != 1 or "[" in value.key or self.cfn.class_name is None:
            return False
        cls = self.cfile.classes.get(self.cfn.class_name)
        return attr_origin(self.project, self.cfile, cls, value.key[5:]) == "own"


__all__ = ["Choices"]
