"""``try`` / ``finally`` in the data flow (issue 16 §3, joins): a ``finally`` block runs on every way out of its
``try`` body, a ``return`` included. A join written there (``with side: ... return out`` inside ``try``, then
``finally: cur.wait_stream(side)``) orders what the function hands back before its caller goes on. The interpreter
runs the ``finally`` blocks enclosing a ``return`` of the function it interprets (innermost first) before it judges
what escapes, and an inlined helper's ``finally`` after that helper's ``return``; each runs on the stream current
at its ``try`` (the ``with`` scopes entered inside the ``try`` have exited by then). A mixin of
:class:`~streamlint.model.flow.interp.Interp`."""

from __future__ import annotations

from streamlint._lazy import cst
from streamlint.model.flow.values import State


class Finals:
    def try_(self, node: cst.Try, st: State) -> list[State]:
        final = node.finalbody
        if final is not None:
            self.finals.append((self.depth, final, len(st.stack)))
        try:
            states = self.block(node.body.body, [st])
            if node.orelse is not None:
                states = self.block(node.orelse.body.body, states)
        finally:
            if final is not None:
                self.finals.pop()
        if final is None:
            return states
        out: list[State] = []
        for s in states:
            if s.done and s.flow is None:  # an inlined helper's return: its finally runs before the caller goes on
                s.done = False
                for a in self._final_on(s, final, len(st.stack)):
                    a.done = True
                    out.append(a)
            else:
                out += self.block(final.body.body, [s])
        return out

    def run_finals(self, st: State) -> list[State]:
        """The states after the ``finally`` blocks enclosing a ``return`` of the function interpreted now."""
        mine = [(f, n) for d, f, n in self.finals if d == self.depth]
        if not mine:
            return [st]
        saved = self.finals
        self.finals = [entry for entry in saved if entry[0] != self.depth]  # (a return inside a finally)
        try:
            states = [st]
            for final, n in reversed(mine):
                states = [a for s in states for a in self._final_on(s, final, n)]
        finally:
            self.finals = saved
        return states

    def _final_on(self, s: State, final: cst.Finally, n: int) -> list[State]:
        """``final`` run on ``s`` with the stream stack of its ``try`` (``n`` entries); the stack ``s`` had is
        given back after (what follows a return is judged as before)."""
        stack = list(s.stack)
        s.stack[:] = stack[:n] or stack[:1]
        out = self.block(final.body.body, [s])
        for a in out:
            a.stack[:] = stack
        return out
