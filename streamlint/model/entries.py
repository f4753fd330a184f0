"""The entry discipline of side streams: whether every piece of work the code puts on a stream begins with
a wait on the stream that enters it (``s.wait_stream(cur)`` before the ``with``, or an event wait first
inside it).

Streams are named by *families*: the source text of a scope's stream with local aliases resolved to what
they were assigned and computed subscripts collapsed (``streams[i]`` -> ``streams[]``, which may be any
element; ``streams[0]`` and ``streams[1]`` are two streams). :func:`entry_discipline` judges each family
per file; the lifetime analysis asks it (``Orderings.next_entry_waits``, issue 16 "next use joins"): a
block a side stream allocated and the current stream read cannot be handed out again on that stream
before the read when the stream's next work waits on the current stream first.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import Role
from streamlint.model.ctxfactories import stream_condition
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo, ScopeSite
from streamlint.model.stepchains import protocol_steps
from streamlint.model.streams import derived
from streamlint.model.syntax import contains, is_none
from streamlint.model.waithelpers import waited_arguments
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project
    from streamlint.model.uses import ApiUse


_SUBSCRIPT = re.compile(r"\[[^\[\]]*\]")
_LEADING_NAME = re.compile(r"[A-Za-z_]\w*")
_WAIT_METHODS = frozenset({"wait_stream", "wait_event"})


_LITERAL_SUBSCRIPT = re.compile(r"\d+|'[^'\[\]]*'|\"[^\"\[\]]*\"")


def stream_family(key: str) -> str:
    """A stream key with its computed subscripts collapsed: ``streams[i]`` (any element of one stream list)
    becomes ``streams[]``; a literal element (``streams[0]``, ``streams["q"]``) keeps its index, so two
    side streams taken from one list (``q, w = streams[0], streams[1]``) are two streams. A negative index
    (``streams[-1]``, maybe ``streams[1]``) collapses like a computed one."""
    def collapse(m: re.Match) -> str:
        inner = m.group(0)[1:-1]
        return m.group(0) if _LITERAL_SUBSCRIPT.fullmatch(inner) else "[]"

    return _SUBSCRIPT.sub(collapse, "".join(key.split()))


def _family_pattern(family: str) -> re.Pattern:
    return re.compile(r"\[[^\[\]]*\]".join(re.escape(part) for part in family.split("[]")))


def may_alias(a: str, b: str) -> bool:
    """Whether two stream families can name one stream: equal, or equal but for a computed subscript of one
    (``streams[]``) where the other has any element (``streams[0]``)."""
    return a == b or bool(_family_pattern(a).fullmatch(b)) or bool(_family_pattern(b).fullmatch(a))


def entry_verdicts(discipline: dict[str, bool], family: str) -> list[bool]:
    """The :func:`entry_discipline` verdicts of every stream family that may be ``family``."""
    if "[" not in family:
        exact = discipline.get(family)
        return [exact] if exact is not None else []
    return [v for k, v in discipline.items() if may_alias(k, family)]


def entry_discipline(project: Project, file: FileModel) -> dict[str, bool]:
    """Stream family (:func:`stream_family` of the source text of a scope's stream, with a local alias
    also resolved to what it was assigned) -> whether *every* entry onto that stream in the file begins
    with a wait: ``s.wait_stream(...)`` / ``s.wait_event(...)`` / ``event.wait(s)`` or a device-wide host
    synchronisation (``torch.cuda.synchronize()``) earlier in the same function, on the path to the scope (no
    branch the scope is not in), with no other entry onto ``s`` in between (a synchronisation counts for a
    stream an object keeps, ``self.compute``; before a loop entering ``s`` it orders the first entry: "chained",
    as one with entries in between); or a wait as the first statement inside the scope (``current_stream().wait_event(e)``,
    ``e.wait()``). Any other way of making the stream current (``set_stream(s)``) breaks it.

    When it holds, work queued on ``s`` after any point of the current stream's program is ordered after
    everything the entering (current) stream queued before: a block ``s`` allocated and the current
    stream read cannot be handed out again on ``s`` before that read, wherever the tensor dies (the
    lifetime analysis asks this; issue 16 "next use joins"). Streams entered through a wrapper that
    hides the stream (no stream argument at the call) are not keyed here, and entries in other files
    are not seen: the fact is per file."""
    cache = derived(project, "entry_discipline")
    result = cache.get(id(file))
    if result is not None:
        return result
    entries: list[tuple[ScopeSite, set[str]]] = []
    own: dict[int, set[str]] = {}
    for site in file.scopes:
        uses = project.scope_use(file, site).uses
        use = next((u for u in uses if u.role is Role.NATIVE_STREAM_CONTEXT), None)
        expr = use.arg("stream") if use is not None else None
        if expr is not None:
            keys = _stream_texts(file, site.function, expr)
            entries.append((site, keys))
            # the scope's own keys: a local alias resolved to what it names (`alt = self._alt_stream`) is judged
            # by that, not by its bare text, which unrelated locals of other functions share
            own[id(site.with_node)] = keys - {stream_family(file.code(expr))} if len(keys) > 1 else keys
    derived(project, "scope_entry_keys").update(own)
    verdicts: dict[str, bool] = {}
    by_class: dict[str, dict[str, bool]] = {}  # the same, per class of the entering function ("" for none)
    chained: dict[tuple[int, str], bool] = derived(project, "entry_chained")
    judged: list[tuple[ScopeSite, set[str], bool]] = []
    for site, keys in entries:
        use = next((u for u in project.scope_use(file, site).uses if u.role is Role.NATIVE_STREAM_CONTEXT), None)
        ok = _begins_with_wait(file, site.with_node) or _waited_before(project, file, site, keys, entries,
                                                                       _existence_tests(project, file, site, use))
        judged.append((site, keys, bool(ok)))
        if ok == "chained" and site.function is not None:
            for key in keys:
                chained[(id(site.function.node), key)] = True
    steps = _protocol_steps(project, file, judged)
    for site, keys, ok in judged:
        own_class = by_class.setdefault(_class_of(site.function), {})
        for key in keys:
            ok_here = ok or site.function is not None and (id(site.function.node), key) in steps
            verdicts[key] = verdicts.get(key, True) and ok_here
            own_class[key] = own_class.get(key, True) and ok_here
    for call in file.calls:
        if call.method == "set_stream" or (call.target or "").endswith(".set_stream"):
            for arg in call.node.args[:1]:
                for key in _stream_texts(file, call.function, arg.value):
                    verdicts[key] = False
                    by_class.setdefault(_class_of(call.function), {})[key] = False
    cache[id(file)] = verdicts
    derived(project, "entry_discipline_by_class")[id(file)] = by_class
    return verdicts


def _protocol_steps(project: Project, file: FileModel, judged: list[tuple[ScopeSite, set[str], bool]]) -> set:
    """(function node id, stream key) of the unwaited entries that are later steps of a protocol of their class
    begun by a waiting step (:func:`~streamlint.model.stepchains.protocol_steps`); the steps such a protocol leaves
    open are kept for :func:`protocol_open` (``self.*`` streams only)."""
    per: dict[tuple[str, str], dict[str, tuple[list, bool]]] = {}
    for site, keys, ok in judged:
        fn = site.function
        if fn is None or not fn.class_name:
            continue
        for key in keys:
            if key.startswith("self."):
                withs, waited = per.setdefault((fn.class_name, key), {}).get(fn.node.name.value, ([], True))
                per[(fn.class_name, key)][fn.node.name.value] = ([*withs, site.with_node], waited and ok)
    out: set[tuple[int, str]] = set()
    open_steps: dict[tuple[int, str], bool] = derived(project, "entry_open_steps")
    for (cls_name, key), methods in per.items():
        cls = file.classes.get(cls_name)
        if cls is None or all(waited for _w, waited in methods.values()):
            continue
        chained, still_open = protocol_steps(cls, methods)
        out |= {(id(cls.methods[m].node), key) for m in chained}
        open_steps.update({(id(cls.methods[m].node), key): True for m in still_open})
    return out


def protocol_open(project: Project, file: FileModel, fn: FunctionInfo | None, family: str) -> bool:
    """Whether ``fn`` is a step of a protocol on stream ``family`` that a later step, entering with no wait of its
    own, follows (:mod:`~streamlint.model.stepchains`): a block dropped in it may go to that step's allocation."""
    if fn is None:
        return False
    entry_discipline(project, file)
    return any(node == id(fn.node) and may_alias(key, family) for node, key in derived(project, "entry_open_steps"))


def _class_of(fn: FunctionInfo | None) -> str:
    return fn.class_name or "" if fn is not None else ""


def class_entry_discipline(project: Project, file: FileModel, fn: FunctionInfo | None) -> dict[str, bool]:
    """:func:`entry_discipline` counting only the entries made by methods of ``fn``'s class and of the classes
    of the file it inherits from or that inherit from it (by module-level functions when ``fn`` is one):
    ``self.side`` of one class is not ``self.side`` of an unrelated class in the file."""
    entry_discipline(project, file)
    by_class = derived(project, "entry_discipline_by_class").get(id(file), {})
    merged: dict[str, bool] = {}
    for name in _related_classes(file, _class_of(fn)):
        for key, ok in by_class.get(name, {}).items():
            merged[key] = merged.get(key, True) and ok
    return merged


def discipline_for(project: Project, file: FileModel, fn: FunctionInfo | None, family: str) -> dict[str, bool]:
    """The entry discipline that judges stream ``family`` seen from ``fn``: per class for a ``self.`` field
    (:func:`class_entry_discipline`), per file otherwise (:func:`entry_discipline`)."""
    if family.startswith("self.") and fn is not None:
        return class_entry_discipline(project, file, fn)
    return entry_discipline(project, file)


def _related_classes(file: FileModel, name: str) -> set[str]:
    """``name`` and the classes of ``file`` linked to it by inheritance (either way, transitively; bases
    named by their last component)."""
    if not name:
        return {""}
    links: dict[str, set[str]] = {}
    for cls in file.classes.values():
        for base in cls.bases:
            short = base.rsplit(".", 1)[-1]
            links.setdefault(cls.name, set()).add(short)
            links.setdefault(short, set()).add(cls.name)
    seen, todo = {name}, [name]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def entry_chained(project: Project, file: FileModel, fn: FunctionInfo | None, family: str) -> bool:
    """Whether ``fn`` enters a stream of ``family`` again after an entry, relying on a wait before the
    first one (:func:`_waited_before` "chained"): the entry discipline covers only frees before that wait
    or after the function."""
    if fn is None:
        return False
    entry_discipline(project, file)
    return any(node == id(fn.node) and may_alias(key, family) for node, key in derived(project, "entry_chained"))


def scope_entry_keys(project: Project, file: FileModel, with_node: cst.With) -> set[str]:
    """The stream keys under which :func:`entry_discipline` judges the entries of this ``with`` (its
    stream's text, local aliases resolved)."""
    entry_discipline(project, file)
    return derived(project, "scope_entry_keys").get(id(with_node), set())


def _stream_texts(file: FileModel, fn: FunctionInfo | None, expr: cst.BaseExpression) -> set[str]:
    return stream_text_keys(fn, file.code(expr), file)


def stream_text_keys(fn: FunctionInfo | None, text: str, file: FileModel) -> set[str]:
    """The stream families a stream written ``text`` in ``fn`` names: its own, and what the local aliases it
    starts with were assigned (``q = streams[0]`` → ``streams[0]``)."""
    keys = {stream_family(text)}
    for _ in range(3):  # `attn = self.attn; streams = attn.aux_streams; with stream(streams[0])`
        match = _LEADING_NAME.match(text)
        if fn is None or match is None or match.group(0) == "self":
            break
        values = fn.name_assigns.get(match.group(0), ())
        if len(values) != 1:
            break
        value = values[0]
        if isinstance(value, cst.IfExp):  # `s = self.alt if overlap else None`
            value = value.orelse if is_none(value.body) else value.body
        text = file.code(value) + text[match.end():]
        keys.add(stream_family(text))
    return keys


def _wait_call(stmt: cst.CSTNode) -> cst.Call | None:
    if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr):
        call = stmt.body[0].value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                and call.func.attr.value in (*_WAIT_METHODS, "wait"):
            return call
    return None


_HOST_BUILTINS = frozenset({"hasattr", "isinstance", "getattr", "len", "int", "float", "bool", "str", "tuple"})


def _begins_with_wait(file: FileModel, node: cst.With) -> bool:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return _starts_with_wait(body)


def _starts_with_wait(stmts) -> bool:
    """Whether every path through ``stmts`` waits before its first call that can queue work: host-only
    statements (no call but ``hasattr`` / ``isinstance`` / ...) may come first, and an ``if`` counts
    when each of its branches (an ``else`` included) begins with a wait."""
    for stmt in stmts:
        if _wait_call(stmt) is not None:
            return True
        if isinstance(stmt, cst.If):
            branches, cur = [], stmt
            while isinstance(cur, cst.If):
                branches.append(cur.body.body)
                cur = cur.orelse
            if cur is not None and all(_starts_with_wait(b) for b in (*branches, cur.body.body)):
                return True
            if _waits_only(stmt):
                continue  # `if ready is not None: s.wait_event(ready)`: queues no work, whichever way
            return False
        if not isinstance(stmt, cst.SimpleStatementLine) or not _host_only(stmt):
            return False
    return False


def _waits_only(node: cst.If) -> bool:
    """An ``if`` (its ``elif`` / ``else`` too) whose branches only test, wait or do host-only work."""
    cur: cst.CSTNode | None = node
    while isinstance(cur, cst.If):
        if not _host_only(cur.test) or not all(_wait_call(s) is not None or (isinstance(s, cst.SimpleStatementLine)
                                                                             and _host_only(s)) for s in cur.body.body):
            return False
        cur = cur.orelse
    return cur is None or all(_wait_call(s) is not None or (isinstance(s, cst.SimpleStatementLine) and _host_only(s))
                              for s in cur.body.body)


def _host_only(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and not host_call(cur):
            return False
        stack.extend(children(cur))
    return True


def host_call(call: cst.Call) -> bool:
    """A call that queues no device work: a host builtin, printing, timing, a warning or a logger method
    (``logger.debug(...)`` on a conventionally named logger, ``logging.info(...)``)."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _HOST_BUILTINS or func.value in apis.HOST_SIDE_CALLS
    name = dotted(func)
    if name is None:
        return False
    if name in apis.HOST_SIDE_CALLS or name.startswith(apis.GRAPH_BREAK_MODULE_PREFIXES):
        return True
    receiver, _, method = name.rpartition(".")
    return method in apis.LOGGER_METHODS and receiver.rpartition(".")[2] in apis.LOGGER_NAMES


def _existence_tests(project: Project, file: FileModel, site: ScopeSite,
                     use: ApiUse | None) -> set[tuple[str, bool]]:
    """The tests (text, negated) without which the scope switches nothing: the null arm's test of a context
    factory (``partial(torch.cuda.stream, s) if c else nullcontext``), the test the stream exists under
    (``self.s = torch.cuda.Stream() if c else None``): :mod:`~streamlint.model.ctxfactories`."""
    if use is None:
        return set()
    test = use.enabled or stream_condition(project, file, site.function, use.arg("stream"))
    return {(file.code(test[0]), not test[1])} if test is not None else set()


def _waited_before(project: Project, file: FileModel, site: ScopeSite, keys: set[str],
                   entries: list[tuple[ScopeSite, set[str]]],
                   enabling: set[tuple[str, bool]] = frozenset()) -> bool | str:
    """Whether a wait on the scope's stream comes first on the path to it: True when no other entry onto
    the stream lies between the wait and the scope; "chained" when some do (the scope's work is still
    ordered after what the current stream queued before the wait, but not after what it queued between
    the entries: a free there is settled by the dataflow at the stream's next allocation,
    :func:`entry_chained`)."""
    fn = site.function
    if fn is None:
        return False
    at = file.span(site.with_node)
    here = (at.start_line, at.start_col)
    guards = {(file.code(g.test), g.negated) for g in site.guards}  # the same test twice counts as one
    # a wait under the flag that enables the scope (`if on: s.wait_stream(..)` / `switch(s, enabled=on)`)
    guards |= {(file.code(arg.value), False) for call in site.calls for arg in call.args}
    guards |= _enabling_tests(file, fn, site) | enabling
    # a stream context made under a test before the `with` (`if overlap: s.wait_stream(cur); ctx = stream(s)
    # else: ctx = nullcontext()`): the stream is entered only under the tests the context was made under
    # (only the tests every context that switches a stream was made under)
    made = {id(call) for call in site.calls if not _no_stream(file, call)}
    under = [{(file.code(g.test), g.negated) for g in call.guards}
             for call in fn.calls if id(call.node) in made and call.scope is None]
    if under and len(under) == len(made):
        guards |= set.intersection(*under)
    loops = _loops_around(fn.node.body, site.with_node)  # the same test twice counts as one
    found: bool | str = False
    others = [(file.span(s.with_node).start_line, file.span(s.with_node).start_col)
              for s, k in entries if s.function is fn and s.with_node is not site.with_node
              and any(may_alias(a, b) for a in k for b in keys)]
    for call in fn.calls:
        if call.function is not fn:
            continue
        method = call.node.func.attr.value if isinstance(call.node.func, cst.Attribute) else None
        if _device_sync(project, file, call) and all("." in k for k in keys):  # (the host waits for every stream:
            # the entry comes after all; only a stream an object keeps: a local new stream's pool stream may be
            # handed to any later `Stream()`, whose entries are not these)
            span = file.span(call.node)
            if (span.start_line, span.start_col) < here and all((file.code(g.test), g.negated) in guards
                                                                  for g in call.guards):
                found = found or ("chained" if any(not contains(loop, call.node) for loop in loops)
                                  or any((span.start_line, span.start_col) < o < here for o in others) else True)
            continue
        if method in _WAIT_METHODS and call.receiver is not None:
            waiters = [call.receiver]
        elif method == "wait" and call.node.args:
            waiters = [call.node.args[0].value]
        else:  # a project helper that makes the stream it is handed wait (`order_after(waiter=s, ...)`)
            waiters = waited_arguments(project, file, call)
        if not any(_stream_texts(file, fn, waiter) & keys for waiter in waiters) \
                or not all((file.code(g.test), g.negated) in guards for g in call.guards):
            continue
        span = file.span(call.node)
        pos = (span.start_line, span.start_col)
        if pos < here and not any(not contains(loop, call.node) for loop in loops):
            if not any(pos < other < here for other in others):
                return True
            found = "chained"
    return found


def _device_sync(project: Project, file: FileModel, call) -> bool:
    """A device-wide host synchronisation (``torch.cuda.synchronize(dev)``): when it returns, every stream has run
    all it was given, so a stream entered after it starts after everything the entering stream queued before."""
    return any(u.role is Role.DEVICE_SYNCHRONIZE for u in project.api_uses(file, call))


def _enabling_tests(file: FileModel, fn: FunctionInfo, site: ScopeSite) -> set[tuple[str, bool]]:
    """The tests without which the scope enters no stream: ``with (stream(s) if on else nullcontext())``,
    or a stream made ``s = self.side() if on else None`` (a ``None`` stream is the current one). A wait
    under ``if on:`` then runs whenever the stream is entered."""
    tests: set[tuple[str, bool]] = set()
    item = site.item.item
    if isinstance(item, cst.IfExp):
        if _no_stream(file, item.orelse):
            tests.add((file.code(item.test), False))
        elif _no_stream(file, item.body):
            tests.add((file.code(item.test), True))
    for call in site.calls:
        if not isinstance(call, cst.Call) or not call.args or not isinstance(call.args[0].value, cst.Name):
            continue
        values = fn.name_assigns.get(call.args[0].value.value, ())
        if len(values) == 1 and isinstance(values[0], cst.IfExp):
            value = values[0]
            if is_none(value.orelse):
                tests.add((file.code(value.test), False))
            elif is_none(value.body):
                tests.add((file.code(value.test), True))
    return tests


def _no_stream(file: FileModel, arm: cst.BaseExpression) -> bool:
    """An arm of a conditional ``with`` item that enters no stream (``contextlib.nullcontext()``)."""
    return is_none(arm) or (isinstance(arm, cst.Call) and not arm.args
                             and file.code(arm.func).rsplit(".", 1)[-1] == "nullcontext")


def _loops_around(root: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The loops of ``root`` that contain ``node`` (a wait outside one of them covers only its first
    iteration)."""
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(root, ())]
    while stack:
        cur, loops = stack.pop()
        if cur is node:
            return list(loops)
        if isinstance(cur, (cst.For, cst.While)):
            loops = (*loops, cur)
        stack.extend((child, loops) for child in children(cur))
    return []


__all__ = [
    "protocol_open",
    "entry_chained",
    "entry_discipline",
    "entry_verdicts",
    "may_alias",
    "scope_entry_keys",
    "stream_family",
    "stream_text_keys",
]
