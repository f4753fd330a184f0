"""Races that exist only where two tests of one caller-given object both hold (issue 16, [correlated-guard]).

A dual-stream layer often makes a value on its side stream and re-produces it on the current stream only in one
mode of the batch it is given (``if batch.gather_meta is not None: key = gather(key)`` in a helper), while the
side-stream reader runs under another test of the same batch (``if batch.mode.is_decode():``). The race between
that producer and that reader needs both tests to hold at once; whether they can is the batch's protocol (decode
batches carry no gather metadata), which the analysis does not see: two fields of one object, set by code
elsewhere. Such a race is reported at medium, not high (its hint says what it assumes).

:func:`batch_guard` names the object (a parameter of the reading function, not ``self``: a module's own flags are
its configuration, and the interpreter already follows them) when the race's producer lies in an arm of an ``if``
whose test reads it, and the race's reader in an arm of another ``if`` whose test reads it too, the two tests
spelt differently (one test twice is one condition: the interpreter decides the second from the first, so the
race it still finds is on a path where it holds). A test reads the object's contents (``batch.mode``, ``f(batch)``):
one asking only whether a value is there (``meta is not None``, ``meta.cp is not None`` beside ``meta.cp.rank``) holds
wherever the other does, and is no independent condition. A producer in a helper counts only when the reader's
statement calls that helper handing it the reader's own parameter of that name (not ``self._keys(h, shared_meta)``). A producer in no such arm, or a reader in none, races on every
path that reaches them: the confidence stands. Races are kept one per use and name: :func:`race_guard` lets a path
whose producer is under no such test, or is another statement (the test's other arm), replace a race recorded on a
path whose producer was under one (the same race then exists whatever the batch says). When the two tests also name
two different phases of the batch, one of them asking which phase it is in (a prefill-only gather, a decode-only
reader), the race is low (:mod:`~streamlint.model.flow.phaseguards`); so it is when the project's enum methods and
the statements setting a tested part allow disjoint modes of the batch (:mod:`~streamlint.model.flow.modesets`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.flow.modesets import exclusive_modes
from streamlint.model.flow.phaseguards import exclusive_phases
from streamlint.model.syntax import contains, local_nodes, node_code, node_memo, target_names

if TYPE_CHECKING:
    from streamlint.model.flow.results import Race
    from streamlint.model.flow.values import Access


def _binds(node: cst.CSTNode) -> set[str]:
    """The names an assignment statement binds (none for another node)."""
    if isinstance(node, cst.Assign):
        return {name for t in node.targets for name in target_names(t.target)}
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return set(target_names(node.target))
    return set()


def _guards(fn: cst.FunctionDef, node: cst.CSTNode, producer: bool = False) -> list[cst.BaseExpression]:
    """The tests of the ``if`` statements (of ``fn``'s own body) one of whose arms contains ``node``; for a
    ``producer``, only those whose other arm re-produces nothing ``node`` makes: it binds none of the names ``node`` binds (``else: key = key * 2``
    re-produces it on that arm too: the test does not decide the race), or, for a node that is no assignment (an
    in-place write), names none of the names ``node`` names."""
    ifs = node_memo("batchguards_ifs", fn, lambda f: tuple(n for n in local_nodes(f) if isinstance(n, cst.If)))
    bound = _binds(node)
    named = {n.value for n in local_nodes(node) if isinstance(n, cst.Name)} - {"self"} if not bound else set()
    found = []
    for n in ifs:
        arms = (n.body, n.orelse)
        mine = next((i for i, arm in enumerate(arms) if arm is not None and contains(arm, node)), None)
        if mine is None:
            continue
        other = arms[1 - mine]
        if producer and other is not None and any(bound & _binds(b) or isinstance(b, cst.Name) and b.value in named
                                     for b in local_nodes(other)):
            continue
        found.append(n.test)
    return found


def _params(fn: cst.FunctionDef) -> set[str]:
    p = fn.params
    return {a.name.value for a in (*p.posonly_params, *p.params, *p.kwonly_params)} - {"self", "cls"}


def _read_names(test: cst.BaseExpression, names: set[str]) -> set[str]:
    """The names of ``names`` whose contents the test reads (an attribute chain's root, a subscript's value, a call's
    argument): ``batch is not None`` or ``if batch:`` tests the object's presence, which any read of a field implies."""
    found = set()
    for n in local_nodes(test):
        inner = n.value if isinstance(n, (cst.Attribute, cst.Subscript, cst.Arg)) else None
        if isinstance(inner, cst.Name) and inner.value in names:
            found.add(inner.value)
    return found


def _presence(test: cst.BaseExpression) -> str | None:
    """The code of ``E`` when the test only asks whether ``E`` is there (``E is not None``, ``E is None``, ``E``,
    ``not E``, ``E`` a name or an attribute chain)."""
    code = node_code
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot)) \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        test = test.left
    return code(test) if isinstance(test, (cst.Name, cst.Attribute)) else None


def _implied(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """One test only asks whether a value is there whose contents the other reads (``meta.cp is not None`` and
    ``meta.cp.rank == 0``): where the second holds the first does, so the two are no independent conditions."""
    code = node_code
    for x, y in ((a, b), (b, a)):
        subject, other = _presence(x), code(y)
        if subject is not None and any(f"{subject}{c}" in other for c in ".[("):
            return True
    return False


def _bound(call: cst.Call, owner: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    """The expression ``call`` passes for ``owner``'s parameter ``name`` (None when not seen syntactically)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    positional = [p.name.value for p in (*owner.params.posonly_params, *owner.params.params)]
    if positional[:1] in (["self"], ["cls"]) and isinstance(call.func, cst.Attribute):
        positional = positional[1:]
    args = [a for a in call.args if a.keyword is None]
    if name not in positional or any(a.star for a in args[:positional.index(name) + 1]):
        return None
    i = positional.index(name)
    return args[i].value if i < len(args) else None


def _same_object(site: cst.CSTNode | None, owner: cst.FunctionDef, name: str) -> bool:
    """Every call of ``owner`` (by its name) at ``site``, the reader's statement that inlined it, hands it the
    reader's own parameter ``name`` as its ``name``: the two tests then read one object. A helper reached through
    another helper, or handed another object (``self._keys(hidden, shared_meta)``), is not."""
    calls = [n for n in local_nodes(site) if isinstance(n, cst.Call) and (
        isinstance(n.func, cst.Attribute) and n.func.attr.value == owner.name.value
        or isinstance(n.func, cst.Name) and n.func.value == owner.name.value)] if site is not None else []
    return bool(calls) and all(isinstance(b := _bound(c, owner, name), cst.Name) and b.value == name for c in calls)


def _owner(interp, node: cst.CSTNode) -> tuple[cst.FunctionDef, object] | None:
    """The function of the files in play (the analysed one's, those of the helpers inlined now) whose own body
    holds ``node``: the innermost one, with its file model."""
    for model in dict.fromkeys([interp.file, *(f[0] for f in interp.frames)]):
        for fn in model.iter_functions():  # (a function's own nodes, its nested definitions' bodies not: the innermost)
            if id(node) in node_memo("batchguards_own", fn.node, lambda f: frozenset(map(id, local_nodes(f)))):
                return fn.node, model
    return None


def batch_guard(interp, earlier: Access) -> tuple[str, bool] | None:
    """The caller-given object whose two different tests the race between the ``earlier`` write (its statement in
    an inlined helper, else its own node) and the interpreter's current access (``interp.anchor``, in
    ``interp.fn``) each rest on, if any (see the module docstring), and whether the two sides run in two different
    phases of the batch (:func:`~streamlint.model.flow.phaseguards.exclusive_phases`)."""
    anchor, top, producer = interp.anchor, interp.fn.node, earlier.inner or earlier.node
    if producer is None or anchor is None or interp.cfg.mode not in ("eager", "cuda"):
        return None
    mine = _params(top)
    reader = [(t, _read_names(t, mine)) for t in _guards(top, anchor)]
    reader = [(t, names) for t, names in reader if names]
    if not reader:
        return None
    found = _owner(interp, producer)
    if found is None:
        return None
    owner, model = found
    code = node_code
    theirs = _params(owner)
    for test in _guards(owner, producer, producer=True):
        for name in _read_names(test, theirs):
            if (owner is top or _same_object(earlier.node, owner, name)) and any(
                    name in names and code(t) != code(test) and not _implied(t, test) for t, names in reader):
                site = producer if owner is top else earlier.node
                sides = (model, owner, producer), (interp.file, top, anchor)
                return name, exclusive_phases(interp.project, *sides, site) or exclusive_modes(
                    interp.project, *sides, name, site)
    return None


def inner_statement(interp) -> cst.CSTNode | None:
    """The statement running now inside an inlined helper (``Access.inner`` of a write made there), else None."""
    return interp.inner[1] if interp.depth and interp.inner is not None else None


KEEP = object()  # :func:`race_guard`: the race already found stands as it is


def race_guard(interp, kept: Race | None, earlier: Access):
    """What the race about to be recorded against the ``earlier`` access rests on, ``kept`` the one a former path
    found at the same use and name: :data:`KEEP` to leave that one; else the ``Race.batch_guard`` of a race to
    record (in its place): (object, producer statement) or None. A path whose producer rests on no batch test,
    or on one in another statement than the kept race's (the other arm of the test: ``else: key = key * 2``), shows
    the race on more paths than one test's: it is recorded with none. The ``Race.batch_guard`` is
    (object, producer statement, whether the two sides run in different phases of the batch)."""
    if kept is not None and kept.batch_guard is None:
        return KEEP
    found = batch_guard(interp, earlier)
    producer = earlier.inner or earlier.node
    if kept is None:
        return (found[0], producer, found[1]) if found is not None else None
    if found is None or kept.batch_guard[1] is not producer:
        return None
    return KEEP


__all__ = ["KEEP", "batch_guard", "inner_statement", "race_guard"]
