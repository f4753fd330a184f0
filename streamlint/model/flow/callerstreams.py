"""What the seen callers of a function pass as one of its stream parameters (issue 16, "caller protocols"): the
current stream at the call (also one the caller left to a wrapper's None default, named by ``current_stream()``, or
left to a field of an options record its own callers build without one), one ordered after it, another one, or
nothing the analysis can read. A race between the function's entry stream and that parameter rests, when a seen call
passes the current stream and no read call passes another, only on the paths of callers the analysis does not see:
low, not silent (``rules/sl201``). The callers' facts come from their collecting runs (:mod:`entryctx`).

A call inside a stream scope of its caller that passes its current stream by text hands the scope's stream: it is the
stream the tensor arguments were made on only when the caller made them inside that scope (``_in_scope``)."""

from __future__ import annotations

import re

from streamlint._lazy import cst
from streamlint.model.flow.callers import bound_by_partial, callers_of
from streamlint.model.flow.entryctx import MAX_SITES, InCycle, collected, current_call
from streamlint.model.flow.retainedstreams import names_current
from streamlint.model.streams import MAIN, outside_stream_scopes
from streamlint.model.syntax import contains, descendants, dominates, local_nodes, node_code, param_named
from streamlint.model.uses import bind_arguments

MAX_DEPTH = 3  # callers handing on a stream parameter of their own, followed up (current_at_some_site)


def _passed_through(fn, site, caller, param: str) -> str | None:
    """The caller's own stream parameter the call hands on as ``param`` unchanged (``self.launch(xs,
    stream=stream)``), else None: its collecting run names it a stream of its own, which is its callers' choice."""
    from streamlint.model.flow.handlestreams import rebound

    method = fn.class_name is not None and fn.params[:1] == ("self",)
    bound = bind_arguments((fn.params[1:] if method else fn.params) + fn.kwonly, site.node, kwonly=fn.kwonly)
    expr = bound.get(param)
    if isinstance(expr, cst.Name) and expr.value in caller.all_params and expr.value not in rebound(caller):
        return expr.value
    return None


def _none_test(test, name: str) -> bool | None:
    """``name is None`` -> True, ``name is not None`` -> False, else None."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name) \
            and test.left.value == name:
        c = test.comparisons[0]
        if isinstance(c.comparator, cst.Name) and c.comparator.value == "None":
            return True if isinstance(c.operator, cst.Is) else False if isinstance(c.operator, cst.IsNot) else None
    return None


def _defaulted_through(fn, site, caller, param: str) -> str | None:
    """The caller's own stream parameter, defaulting to None, that the call hands on as ``param`` or, when it is
    None, the caller's current stream (``stream=stream or torch.cuda.current_stream()``, ``current_stream() if
    stream is None else stream``), else None: the callers of the caller choose the stream, and one that omits it
    passes its current stream."""
    from streamlint.model.flow.handlestreams import rebound

    expr = _bound(fn, site).get(param)
    name = None
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or) \
            and isinstance(expr.left, cst.Name) and current_call(expr.right):
        name = expr.left.value
    elif isinstance(expr, cst.IfExp) and isinstance(expr.test, cst.Comparison) \
            and isinstance(expr.test.left, cst.Name):
        n = expr.test.left.value
        is_none = _none_test(expr.test, n)
        kept, other = (expr.orelse, expr.body) if is_none else (expr.body, expr.orelse)
        if is_none is not None and isinstance(kept, cst.Name) and kept.value == n and current_call(other):
            name = n
    if name is None or name not in caller.all_params or name in rebound(caller):
        return None
    return name if _none_default(caller, name) else None


def _field_defaulted(project, model, fn, site, caller, param: str) -> tuple | None:
    """(the caller's parameter, the field) when the call hands on, as ``param``, a field of what that parameter holds
    or, when it is None, the caller's current stream (``stream=args.stream or torch.cuda.current_stream(t.device)``,
    ``current_stream() if opts.stream is None else opts.stream``; ``args`` the parameter, or a local bound once from
    it alone: ``args = Args(**kw) if isinstance(kw, dict) else kw``), else None. The stream is then chosen by
    whoever built that argument: the caller's callers (with the record class the caller converts it to or annotates
    it with, when known)."""
    expr = _bound(fn, site).get(param)
    field = None
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or) and current_call(expr.right):
        field = expr.left
    elif isinstance(expr, cst.IfExp) and isinstance(expr.test, cst.Comparison) and len(expr.test.comparisons) == 1 \
            and isinstance(expr.test.left, cst.Attribute) and _is_none(expr.test.comparisons[0].comparator):
        op = expr.test.comparisons[0].operator
        is_none = True if isinstance(op, cst.Is) else False if isinstance(op, cst.IsNot) else None
        kept, other = (expr.orelse, expr.body) if is_none else (expr.body, expr.orelse)
        if is_none is not None and current_call(other) and _same_expr(kept, expr.test.left):
            field = kept
    if not isinstance(field, cst.Attribute) or not isinstance(field.value, cst.Name) or field.value.value == "self":
        return None
    if any(isinstance(n, cst.Assign) and any(_same_expr(t.target, field) for t in n.targets)
           or isinstance(n, (cst.AugAssign, cst.AnnAssign)) and _same_expr(n.target, field)
           for n in local_nodes(caller.node)):
        return None  # (the caller sets the field itself)
    handed = _handed_param(project, model, caller, field.value.value)
    return (handed[0], field.attr.value, handed[1]) if handed is not None else None


def _handed_param(project, model, caller, name: str) -> tuple[str, tuple | None] | None:
    """(the caller's parameter that ``name`` holds as it was handed in, the record class it is converted to or
    annotated with as (class, file), or None): ``name`` itself when it is a parameter the function never rebinds, or
    a local bound once by a plain ``name = value`` that is that parameter converted whole (``args = Args(**kw) if
    isinstance(kw, dict) else kw``, ``args = Args(**kw)``); else None. A local built otherwise (``opts =
    Opts(link=link, stream=torch.cuda.Stream())``) holds a record the function made itself, not its callers'."""
    from streamlint.model.flow.handlestreams import rebound

    bound = rebound(caller)
    if name in caller.all_params:
        if name in bound:
            return None
        from streamlint.model.devobjects import annotation_classes, param_annotation

        ann = param_annotation(caller, name)
        found = annotation_classes(project, model, caller, ann) if ann is not None else None
        return (name, found[0] if found and len(found) == 1 else None)
    sites = [n for n in local_nodes(caller.node) if isinstance(n, cst.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0].target, cst.Name) and n.targets[0].target.value == name]
    if len(sites) != 1 or name in rebound(caller, plain=False):
        return None
    value = sites[0].value
    branches = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
    params, classes = set(), []
    for b in branches:  # (each a parameter, or a class called with that parameter unpacked: `Args(**kw)`)
        if isinstance(b, cst.Name):
            params.add(b.value)
        elif isinstance(b, cst.Call) and len(b.args) == 1 and b.args[0].star == "**" \
                and isinstance(b.args[0].value, cst.Name):
            params.add(b.args[0].value.value)
            classes.append(_record_class(project, model, caller, b.func))
        else:
            return None
    if len(params) != 1 or not params <= set(caller.all_params) or params & bound:
        return None
    if isinstance(value, cst.IfExp) and not {n.value for n in descendants(value.test) if isinstance(n, cst.Name)} \
            <= params | {"isinstance", "dict", "Mapping", "None"}:
        return None
    return (next(iter(params)), classes[0] if len(classes) == 1 else None)


def _record_class(project, model, caller, func) -> tuple | None:
    """(class, file) of the project class ``func`` names, else None."""
    from streamlint.model.filefacts import ClassInfo

    qualname = model.resolve(func, caller)
    found = project.symbol(qualname, model) if qualname else None
    return found if found is not None and isinstance(found[0], ClassInfo) else None


def _defaults_none(project, record: tuple | None, attr: str) -> bool:
    """Does the record class leave its field ``attr`` None when it is not given: a class-level ``attr: T = None``
    (a dataclass, a pydantic model) no method assigns, or an ``__init__`` that stores its own None-defaulted
    parameter as it is (``self.stream = stream``)? Not one that picks a stream of its own then (``self.stream =
    stream or torch.cuda.Stream()``); an unknown class says nothing (False)."""
    from streamlint.model.devobjects import class_chain
    from streamlint.model.syntax import class_field

    if record is None:
        return False
    stores, field = [], None
    for cls, _ in class_chain(project, record[1], record[0]):
        field = field or class_field(cls.node, attr)
        for meth in cls.methods.values():
            for n in local_nodes(meth.node):
                targets = _targets(n) if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)) else []
                if any(isinstance(t, cst.Attribute) and t.attr.value == attr for t in targets):
                    stores.append((meth, n))
    if not stores:
        return field is not None and getattr(field, "value", None) is not None and _is_none(field.value)
    return all(meth.node.name.value == "__init__" and isinstance(n, cst.Assign) and isinstance(n.value, cst.Name)
               and n.value.value in meth.all_params and _none_default(meth, n.value.value) for meth, n in stores)


def _fields_left_out(project, model, caller, owner: str, attr: str, record: tuple | None) -> tuple[str, tuple | None]:
    """What the callers of ``caller`` hand as its parameter ``owner``'s field ``attr`` (a stream that, when None,
    makes the call pass the current stream): ``current`` when every seen call leaves the field out of a record whose
    class leaves it None then (:func:`_defaults_none`: a dict display without the key, converted by the caller to
    ``record``; a call of such a class with keywords only, none of them ``attr``: ``send_weights(it, {"group":
    g})``), ``unseen`` when no call is seen at all (a public API) and ``record`` leaves the field None; ``unread``
    otherwise (a call that may set it, hands on a value of its own, a class that picks a stream of its own or is not
    known, too many or partial calls)."""
    from streamlint.model.flow.chosenstreams import callers_unseen

    sites = callers_of(project, model, caller)
    if not sites:
        unseen = callers_unseen(project, model, caller) and _defaults_none(project, record, attr)
        return (_UNSEEN, None) if unseen else (_UNREAD, None)
    if len(sites) > MAX_SITES or bound_by_partial(project, caller):
        return (_UNREAD, None)
    for m, site in sites:
        expr = _bound(caller, site).get(owner)
        if isinstance(expr, cst.Dict):
            if not _defaults_none(project, record, attr) or not all(
                    isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                    and el.key.evaluated_value != attr for el in expr.elements):
                return (_UNREAD, None)
        elif isinstance(expr, cst.Call):
            if not _defaults_none(project, _record_class(project, m, site.function, expr.func), attr) or not all(
                    a.keyword is not None and a.keyword.value != attr and not a.star for a in expr.args):
                return (_UNREAD, None)
        else:
            return (_UNREAD, None)
    return (_CURRENT, (sites[0][0], sites[0][1].node))


def _is_none(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _same_expr(a, b) -> bool:
    """Are two attribute chains the same text (``args.stream``)?"""
    while isinstance(a, cst.Attribute) and isinstance(b, cst.Attribute):
        if a.attr.value != b.attr.value:
            return False
        a, b = a.value, b.value
    return isinstance(a, cst.Name) and isinstance(b, cst.Name) and a.value == b.value


def _none_default(fn, name: str) -> bool:
    """Does ``fn``'s parameter ``name`` default to None?"""
    own = param_named(fn.node, name)
    return own is not None and isinstance(own.default, cst.Name) and own.default.value == "None"


_OTHER, _UNREAD, _UNSEEN, _CURRENT, _SIDE = "other", "unread", "unseen", "current", "side"
_RANK = {_UNSEEN: 0, _CURRENT: 1, _UNREAD: 2, _SIDE: 3, _OTHER: 4}
# ("side": a call not read either, but one that shows a second stream in play: it runs inside a side-stream block of
# its caller, or hands a stream field of an options record its callers may set; not lowered by unread_choice)


def current_at_some_site(project, file, fn, mode: str, param: str) -> tuple | None:
    """(file model, call node) of a seen call of ``fn`` that passes its current stream as the stream parameter
    ``param`` (``with self.decode_ctx(): self.launch(plans, stream=self.decode_stream)``), when every other seen
    call is read too and passes its current stream, one ordered after it, or hands on a stream parameter of its own
    whose callers do so or are not seen at all (a public API: :func:`caller_streams`); None otherwise. A race
    between the entry stream and ``param`` is then one on the paths of unseen callers only: low, not silent."""
    status, site = caller_streams(project, file, fn, mode, param)
    return site if status == _CURRENT else None


def passed_another(project, file, fn, mode: str, param: str) -> bool:
    """Does a seen call of ``fn`` that the analysis reads pass, as the stream parameter ``param``, a stream that is
    neither its current one nor ordered after it (``self.parker.unpark(self.compute, self.copy)`` on the default
    stream)? Then a race that assumes ``param`` is the caller's current stream is real on that path."""
    return caller_streams(project, file, fn, mode, param)[0] == _OTHER


def handed_elsewhere(project, file, fn, mode: str, stream: str, escape: bool) -> bool:
    """Does a seen caller, read by the analysis, hand in as the stream ``chosenstreams.handed_wait`` found
    (``stream``) one that is neither its current stream nor ordered after it (``swapper.swap_in(seq, self.prefill,
    self.swap)`` run on the default stream: the join onto ``serve_stream`` is not one onto the caller's stream)?
    Then the race is real on that path and keeps its confidence. Asked for a hand-back, and for a stream parameter of
    a function enclosing a closure (its callers cannot see the closure's race); a plain parameter's argument race is
    judged in the caller that runs the function inline."""
    from streamlint.model.flow.chosenstreams import param_owner

    scope = param_owner(fn, stream)
    if scope is None or scope is fn and not escape:
        return False
    return passed_another(project, file, scope, mode, re.match(r"[A-Za-z_]\w*", stream).group(0))


def caller_streams(project, file, fn, mode: str, param: str, _depth: int = 0,
                   _defaulted: bool = False) -> tuple[str, tuple | None]:
    """What the seen calls of ``fn`` pass as its stream parameter ``param``, callers handing on a stream parameter
    of their own followed up ``MAX_DEPTH`` callers: ``("other", None)`` a call read passes another stream, unordered;
    else ``("unread", None)`` a seen call is not read (its caller's analysis did not reach or resolve it, or gave
    up; a module-level call; too many sites; a caller past the depth bound; callers that cannot be followed);
    else ``("current", (file model, call node))`` a call passes its current stream; else ``("unseen", None)`` no
    call is seen (a public API, also up a pass-through chain). A caller handing on its own None-defaulted stream
    parameter or its current stream (:func:`_defaulted_through`) is asked of its callers with ``_defaulted``: a
    call leaving that parameter out passes its current stream, and a wrapper no call is seen of is a current one. Memoised per function, parameter, mode and depth."""
    if mode not in ("eager", "cuda"):
        return (_UNREAD, None)
    memo = project.derived("caller_streams")
    key = (id(fn), mode, param, _depth, _defaulted)  # (the depth too: an answer cut by the bound is not one for a
    # caller nearer)
    if key in memo:
        return memo[key]
    memo[key] = (_UNREAD, None)  # (recursion guard)
    try:
        found = memo[key] = _caller_streams(project, file, fn, mode, param, _depth, _defaulted)
    except InCycle:  # asked while a caller is being collected: unknown now, asked again later
        del memo[key]
        if _depth:
            raise
        return (_UNREAD, None)
    return found


def _caller_streams(project, file, fn, mode: str, param: str, depth: int,
                    defaulted: bool = False) -> tuple[str, tuple | None]:
    sites = callers_of(project, file, fn)
    if not sites:
        from streamlint.model.flow.chosenstreams import callers_unseen

        return (_UNSEEN, None) if callers_unseen(project, file, fn) else (_UNREAD, None)
    if len(sites) > MAX_SITES or bound_by_partial(project, fn):
        return (_UNREAD, None)  # (also called through `functools.partial(launch, stream=...)`: a call not read)
    worst: tuple[str, tuple | None] = (_UNSEEN, None)
    for model, site in sites:
        caller = site.function
        through = _passed_through(fn, site, caller, param) if caller is not None else None
        if caller is fn and through == param:
            continue  # (a recursive call handing on the same stream: its callers' choice, asked here)
        onward = _defaulted_through(fn, site, caller, param) if caller is not None and through is None else None
        outside = caller is not None and outside_stream_scopes(project, model, site)
        if (defaulted or _none_default(fn, param)) and caller is not None and _omits(fn, site, param):
            # (the parameter left None: the function's current stream; under a stream scope of the caller that is
            # the scope's stream, not the one its arguments were made on: unknown. Also the function's own
            # None-defaulted launch stream, `stream: Optional[CUstream] = None`, left out by a seen call)
            verdict = (_CURRENT, (model, site.node)) if outside else _in_scope(project, model, caller, site, fn, mode)
        elif caller is None or caller is fn:
            verdict = (_UNREAD, None)
        elif onward is not None:  # `stream or current_stream()`: its callers' stream, or its current one
            verdict = caller_streams(project, model, caller, mode, onward, depth + 1, True) if depth < MAX_DEPTH \
                else (_UNREAD, None)
            if verdict[0] == _UNSEEN:
                verdict = (_CURRENT, (model, site.node))
        elif through is not None:  # (the caller's callers choose it: asked of them, up to MAX_DEPTH callers)
            verdict = caller_streams(project, model, caller, mode, through, depth + 1,
                                     defaulted and _none_default(caller, through)) if depth < MAX_DEPTH \
                else (_UNREAD, None)  # (a None handed on unchanged is still the current stream down there)
        elif current_call(_bound(fn, site).get(param)):
            verdict = (_CURRENT, (model, site.node)) if outside else _in_scope(project, model, caller, site, fn, mode)
            # (`stream=torch.cuda.current_stream(dev)`: its current one, read from the call's text: also when the
            # caller's analysis resolves the receiver to another class; under a stream scope, the scope's stream)
        elif onward is None and through is None and (field := _field_defaulted(project, model, fn, site, caller, param)):
            # (`args.stream or current_stream()`: the stream whoever built `args` chose, else its current one:
            # current when every seen caller leaves that field out, or none is seen, as a wrapper's own parameter)
            verdict = _fields_left_out(project, model, caller, *field) if outside else (_SIDE, None)
            if verdict[0] == _UNREAD:
                verdict = (_SIDE, None)  # (an options record whose stream field a caller may set)
            elif verdict[0] == _UNSEEN:
                verdict = (_CURRENT, (model, site.node))
        else:  # (collected even without stream work of its own: `launcher.launch(x, SIDE)` is read, not skipped)
            facts = (collected(project, model, caller, mode) or {}).get((id(site.node), id(fn)))
            how = names_current(project, model, caller, site, _bound(fn, site).get(param))
            if how == "thread":  # (flow/retainedstreams.py: the stream a set_stream of the caller or of its own
                verdict = (_CURRENT, (model, site.node))  # callers made current, which its collecting run does not see)
            elif how == "scope":  # (the stream of the caller's scope around the call, entered through a helper)
                verdict = _in_scope(project, model, caller, site, fn, mode) if facts is not None else \
                    (_CURRENT, (model, site.node)) if _scope_made(project, model, caller, site, fn) else (_SIDE, None)
            elif facts is None:
                verdict = (_UNREAD, None)
            elif (param, "stream-other") in facts:
                verdict = (_OTHER, None)
            elif (param, "stream", "current") in facts:
                verdict = (_CURRENT, (model, site.node))
            elif (param, "stream", "forked") in facts:
                continue  # (ordered after its current stream: no race on this path, no evidence either)
            else:
                verdict = (_UNREAD, None)  # (a stream the analysis could not name: unknown)
            if verdict[0] == _UNREAD and outside and _fresh_argument(project, model, caller, _bound(fn, site).get(param)):
                verdict = (_OTHER, None)  # (`launch(x, torch.cuda.Stream())`, `launch(x, self.side)` made in
                # `__init__`: a second stream of the caller's own, whatever its collecting run reached)
        if verdict[0] == _OTHER:
            return verdict
        if _RANK[verdict[0]] > _RANK[worst[0]]:
            worst = verdict
    return worst


def _fresh_argument(project, model, caller, expr) -> bool:
    """Is ``expr``, read from the call's text, a stream the caller makes itself and does not order after its
    current stream: a construction (``torch.cuda.Stream()``), a local (or one of a function enclosing the caller's
    closure) every binding of which is one, a field of the caller's own object that its class only ever sets to a new
    stream (``self.side_stream``, made in ``__init__``), the field of a local record the caller builds with one
    (``opts = Opts(stream=torch.cuda.Stream())``), also behind a current-stream fallback (``opts.stream or
    current_stream()``)? Not one the caller orders anywhere (``side.wait_stream(torch.cuda.current_stream())``: a
    fork, ordered after its current stream; the collecting run judges that one)."""
    from streamlint.model.flow.leaves import fresh_stream_field
    from streamlint.model.streamjoins import new_stream

    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or) and current_call(expr.right):
        expr = expr.left
    elif isinstance(expr, cst.IfExp) and (current_call(expr.body) or current_call(expr.orelse)):
        expr = expr.orelse if current_call(expr.body) else expr.body
    if expr is None:
        return False
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        made = caller.class_name is not None and fresh_stream_field(model.classes.get(caller.class_name),
                                                                    expr.attr.value)
    elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        bound = caller.name_assigns.get(expr.value.value, [])
        made = len(bound) == 1 and isinstance(bound[0], cst.Call) and any(
            a.keyword is not None and a.keyword.value == expr.attr.value and new_stream(project, model, caller, a.value)
            for a in bound[0].args)
    else:
        scope = caller
        while isinstance(expr, cst.Name) and scope.parent is not None and expr.value not in scope.name_assigns \
                and expr.value not in scope.all_params:
            scope = scope.parent  # (a closure's free name: bound by a function enclosing it)
        made = new_stream(project, model, scope, expr)
    if not made:
        return False
    text = node_code(expr)
    return isinstance(expr, cst.Call) or not any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("wait_stream",
                                                                                                "wait_event")
        and node_code(n.func.value) == text for n in local_nodes(caller.node))


def _in_scope(project, model, caller, site, fn, mode: str) -> tuple[str, tuple | None]:
    """The verdict on a call inside a stream scope of its caller that passes its current stream by text (the stream
    parameter left to its None default, or ``current_stream()``): that stream is the scope's, so the call hands the
    stream its tensor arguments were made on only when the caller's collecting run saw each of them last written there
    or ordered onto it (no ``tensor`` fact with an unjoined write: ``with stream(s): buf = torch.cat(parts);
    group.send(buf)``); one made before the scope, on the stream the caller entered with, and not ordered onto it
    (no ``s.wait_stream(current_stream())`` first) is another stream's (``other``: the race is real on that path)."""
    facts = (collected(project, model, caller, mode) or {}).get((id(site.node), id(fn)))
    if facts is None:  # (the caller's run did not resolve the call: `group: Any; group.send(buf)`): from the text
        return (_CURRENT, (model, site.node)) if _made_in_scope(project, model, caller, site, fn) else (_SIDE, None)
    if any(f[1] == "tensor" and f[2] != MAIN for f in facts):  # (a write the scope's stream has not joined; one
        # allocated before the scope but ordered onto it, `side.wait_stream(current_stream())`, is no race)
        return (_OTHER, None)
    return (_CURRENT, (model, site.node))


def _made_in_scope(project, model, caller, site, fn) -> bool:
    """Is every tensor argument of the call (a parameter of ``fn`` its code takes for a tensor) a name or an item
    last assigned, in the body of the innermost ``with`` around the call, the result of a call, unconditionally before it
    (``with stream(s): bufs[i] = torch.cat(parts); group.send(bufs[i])``)? Then it was made on the scope's stream."""
    from streamlint.model.tensors import param_kinds

    withs = [n for n in local_nodes(caller.node) if isinstance(n, cst.With) and contains(n.body, site.node)]
    inner = next((w for w in withs if not any(v is not w and contains(w.body, v) for v in withs)), None)
    if inner is None:
        return False
    code = node_code
    if _ordered_before(caller, inner, code):
        return True  # (everything the caller made before the block is ordered onto its stream)
    walk = list(local_nodes(inner.body))  # (lexical pre-order: the binds written before the call)
    at = next((i for i, n in enumerate(walk) if n is site.node), len(walk))
    binds = [n for n in walk[:at] if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign))]
    kinds = param_kinds(project, model, fn)
    tensors = [e for p, e in _bound(fn, site).items() if kinds.get(p) == "tensor"]
    if not tensors:
        return False
    for e in tensors:
        if not isinstance(e, (cst.Name, cst.Subscript)):
            return False
        text = code(e)
        mine = [a for a in binds if any(code(t) == text for t in _targets(a))]
        if not mine or not isinstance(mine[-1], cst.Assign) or not isinstance(mine[-1].value, cst.Call) \
                or not dominates(inner.body, mine[-1], site.node):
            return False  # (the last bind written before the call, to a call's result, on every path to it: not
            # rebound to a tensor made elsewhere, `if warm: buf = cache`)
    return True


def _scope_made(project, model, caller, site, fn) -> bool:
    """Were the call's tensor arguments made inside the caller's scope around it (:func:`_made_in_scope`), or does it
    hand none (a plan record, a list of them: what the callee reads it makes there itself)?"""
    from streamlint.model.tensors import param_kinds

    kinds = param_kinds(project, model, fn)
    return not any(kinds.get(p) == "tensor" for p in _bound(fn, site)) or _made_in_scope(project, model, caller, site, fn)


def _targets(node) -> list:
    """The targets an assignment statement binds."""
    return [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]


def _ordered_before(caller, block, code) -> bool:
    """Does the caller order the stream ``block`` enters (``with torch.cuda.stream(side):``) after its current stream
    unconditionally before the block (``side.wait_stream(torch.cuda.current_stream())``)?"""
    item = block.items[0].item if len(block.items) == 1 else None
    if not isinstance(item, cst.Call) or len(item.args) != 1:
        return False
    stream = code(item.args[0].value)
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "wait_stream"
               and code(n.func.value) == stream and len(n.args) == 1 and current_call(n.args[0].value)
               and dominates(caller.node.body, n, block) for n in local_nodes(caller.node))


def _bound(fn, site) -> dict:
    """The call's argument expressions by ``fn``'s parameter names (``self`` bound by the receiver)."""
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    return bind_arguments((fn.params[1:] if method else fn.params) + fn.kwonly, site.node, kwonly=fn.kwonly)


def _omits(fn, site, param: str) -> bool:
    """Does the call leave ``param`` to its default (no starred argument could supply it)?"""
    return param not in _bound(fn, site) and not any(a.star for a in site.node.args)


def chosen_upstream(project, file, fn, chosen: str, mode: str) -> bool:
    """Does the choice of the parameter ``chosen`` rest wholly on callers not seen
    (:func:`~streamlint.model.flow.chosenstreams.rests_on_unseen_caller`), also when every seen call hands on a
    stream parameter of its own, up a chain of callers that ends in functions no call of which is seen (a kernel
    library's public APIs handing their launch stream down to the helper that queues the work: ``caller_streams``
    is "unseen")?"""
    from streamlint.model.flow.chosenstreams import _ROOT, param_owner, rests_on_unseen_caller

    if rests_on_unseen_caller(project, file, fn, chosen):
        return True
    scope = param_owner(fn, chosen)
    root = _ROOT.match(chosen)
    return scope is not None and root is not None and caller_streams(project, file, scope, mode, root.group(0))[0] \
        == _UNSEEN


def unread_choice(project, file, fn, chosen: str, mode: str, key: str) -> str | None:
    """What the seen callers of the function whose stream parameter ``chosen`` is (``fn``, or a function enclosing
    the closure ``fn``) pass as it (callers unknown, a name too common to follow, count as not read), when that leaves the race between it and the entry stream resting only on calls
    the analysis does not read: ``"unread"`` (a seen call it cannot read: a kernel library's launch stream handed
    down from APIs whose callers hand it a stream of unknown origin), ``"current"`` (the calls read pass their
    current stream), each when no call read passes another stream (``launch(x, torch.cuda.Stream())``: ``other``)
    and the function does not order that stream itself (``stream.wait_stream(current_stream())``, a join onto it:
    it treats it as a side stream of its own work). None otherwise (``other``, ``unseen``: asked by
    :func:`chosen_upstream`)."""
    from streamlint.model.flow.chosenstreams import _ROOT, orders_chosen, param_owner

    scope = param_owner(fn, chosen)
    root = _ROOT.match(chosen)
    if _ROOT.fullmatch(key) is None:  # (the race's stream ``key`` is the parameter itself: not a field of an object
        return None  # handed in, `slot.compute_stream`, whose holder's origin says nothing of the stream)
    if scope is None or root is None or orders_chosen(scope, root.group(0)) \
            or scope is not fn and orders_chosen(fn, root.group(0)) \
            or (scope.parent is not None or scope.node.name.value.startswith("__")
                or scope.node.name.value == "forward") and not callers_of(project, file, scope):
        return None  # (no site found for a nested worker its parent calls, or a forward / dunder run by syntax
        # (`module(x)`): calls the project shows, not read here; a name too common to follow is unknown: unread)
    if bound_by_partial(project, scope):
        return None  # (called through `functools.partial(fn, ...)` too: calls the project shows, `run(stream)` with a
        # stream of the caller's making, that this reading does not map onto the parameters)
    if _records_for(fn, root.group(0)) or scope is not fn and _records_for(scope, root.group(0)):
        return None  # (`item.record_stream(stream)` on its own input: it expects that stream to be another one)
    status = caller_streams(project, file, scope, mode, root.group(0))[0]
    return status if status in (_UNREAD, _CURRENT) else None


def _records_for(fn, name: str) -> bool:
    """Does ``fn`` itself record a tensor for the stream parameter ``name`` (``item.record_stream(stream)``)? Then
    its own code says that stream may not be the one its inputs were made on: a second stream it expects."""
    return any(site.method == "record_stream" and len(site.node.args) == 1
               and isinstance(site.node.args[0].value, cst.Name) and site.node.args[0].value.value == name
               for site in fn.calls)


__all__ = ["caller_streams", "chosen_upstream", "unread_choice", "current_at_some_site", "handed_elsewhere", "passed_another"]
