"""Call sites of a project function (for the caller protocols: forks, current-stream parameters,
recorders): every ``f(...)`` / ``obj.f(...)`` that may run it, and for a constructor the ``Class(...)``
expressions that build its class."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.options import MAX_CALLER_FILES
from streamlint.model.syntax import contains
from streamlint.model.walk import children

if TYPE_CHECKING:
    from streamlint.model.project import Project


def callers_of(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    """Every call site of ``fn`` in the project (``obj.method(...)`` on a receiver the project cannot
    type counts when the method name matches), or None when it has none or may be called in ways that
    cannot be seen (a dunder, a callback). Memoised per project: the caller protocols ask it for the same
    function per argument, per race and per stream."""
    memo = project.derived("callers_of")
    found = memo.get(id(fn), memo)
    if found is memo:
        found = memo[id(fn)] = _callers_of(project, file, fn)
    return found


def _callers_of(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    name = fn.node.name.value
    ctor = name == "__init__" and fn.class_name is not None and "." not in fn.qualname.removesuffix(".__init__")
    if ctor:  # a constructor: its call sites build the class (`Awaitable(bufs, stream)`)
        name = fn.class_name
    elif name.startswith("__") or fn.parent is not None:
        return None
    # a method runs only through an attribute (`self.name(`, `obj.name(`, `super().name(`): files that merely
    # define a method of that name (`def name(`) are no candidates
    method = not ctor and fn.class_name is not None
    marker = (f"{'.' if method else ''}{name}(".encode(),)
    paths = project.paths_containing(marker)
    if len(paths) > MAX_CALLER_FILES:  # a common name (`forward`): too many files to parse; not followed
        return None
    sites = []
    for path in paths:
        # files that only define or mention the name are ruled out by their summary, not parsed
        model = project.file(path) if project.may_call(path, name) else None
        if model is None:
            continue
        for site in model.calls:
            func = site.node.func
            called = func.attr.value if isinstance(func, cst.Attribute) else (
                func.value if isinstance(func, cst.Name) else None)
            if called != name:
                continue
            if ctor:
                sym = project.symbol(site.target, model) if site.target is not None else None
                if sym is not None and getattr(sym[0], "methods", {}).get("__init__") is fn:
                    sites.append((model, site))
                continue
            target = project.call_target(model, site)
            if target is not None:
                if target[0] is fn or (target[0].qualname == fn.qualname
                                       and target[1].module_name == file.module_name):
                    sites.append((model, site))
            elif fn.class_name is not None and isinstance(func, cst.Attribute) and may_bind(fn, site.node):
                sites.append((model, site))  # a method called on an object the project cannot type (one whose
                # arguments cannot bind to its parameters, a required one missing, is another class's method)
    return sites or None


def may_bind(fn: FunctionInfo, call: cst.Call) -> bool:
    """Could ``call`` run ``fn`` (a method; its ``self`` bound by the receiver) without a TypeError: every required
    parameter given, no positional argument past its positional ones, no keyword it lacks? Starred arguments may
    supply anything."""
    if any(a.star for a in call.args):
        return True
    ps = fn.node.params
    positional = [*ps.posonly_params, *ps.params]
    if positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    given = sum(1 for a in call.args if a.keyword is None)
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if given > len(positional) and not isinstance(ps.star_arg, cst.Param):
        return False
    names = {p.name.value for p in (*positional, *ps.kwonly_params)}
    if keywords - names and ps.star_kwarg is None:
        return False
    required = [p.name.value for p in positional[given:] if p.default is None]
    required += [p.name.value for p in ps.kwonly_params if p.default is None]
    return all(name in keywords for name in required)


def bound_by_partial(project: Project, fn: FunctionInfo) -> bool:
    """Is ``fn`` bound somewhere by ``functools.partial(name, ...)`` / ``partial(self.name, ...)``? Then it is
    also called through the partial, with arguments no call site of :func:`callers_of` shows."""
    name = fn.node.name.value
    return bool(project.paths_containing((f"partial({name}".encode(),))
                or project.paths_containing((f"partial(self.{name}".encode(),)))


def self_call_sites(project: Project, file: FileModel, fn: FunctionInfo) -> list[tuple[FileModel, object]] | None:
    """:func:`callers_of` when every call of the method ``fn`` is made by another method of its class through
    ``self`` (so a ``self.*`` chain names the same object at the call and in ``fn``); else None."""
    sites = callers_of(project, file, fn)
    if not sites or fn.class_name is None or any(
            site.function is None or site.function is fn or site.function.class_name != fn.class_name
            or not (isinstance(site.receiver, cst.Name) and site.receiver.value == "self") for _m, site in sites):
        return None
    return sites


__all__ = ["bound_by_partial", "callers_of", "may_bind", "self_call_sites"]


def calls_after(site) -> Iterator[tuple[cst.Call, str]]:
    """The calls its caller makes after the call ``site`` (in source order, not into the call's own
    arguments), each with the last name of what it calls (``wait_stream``, ``synchronize``)."""
    caller = site.function
    if caller is None:
        return
    seen, stack = False, [caller.node.body]
    while stack:
        node = stack.pop()
        if node is site.node:
            seen = True
            continue
        if seen and isinstance(node, cst.Call):
            # `torch.cuda.current_stream().wait_stream(s)`: a call chain has no dotted name, its last part counts
            name = node.func.attr.value if isinstance(node.func, cst.Attribute) else (dotted(node.func) or "")
            yield node, name.rsplit(".", 1)[-1]
            continue
        stack.extend(reversed(children(node)))


def orders_after(name: str) -> bool:
    """Does a call of this last name wait or synchronise (``wait_stream``, ``ev.wait``, ``synchronize``)?"""
    return "wait" in name or "synchronize" in name


# ---- steps that end with a device-wide synchronize

def _blocks(stmt: cst.CSTNode) -> list[list]:
    """The statement blocks a compound statement holds (its body, ``else``, handlers, ``finally``)."""
    out = []

    def add(suite) -> None:
        if isinstance(suite, cst.IndentedBlock):
            out.append(list(suite.body))

    if isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try, cst.If)):
        add(stmt.body)
    if isinstance(stmt, (cst.For, cst.While, cst.Try)) and stmt.orelse is not None:
        add(stmt.orelse.body)
    if isinstance(stmt, cst.If) and stmt.orelse is not None:
        out += _blocks(stmt.orelse) if isinstance(stmt.orelse, cst.If) else []
        if isinstance(stmt.orelse, cst.Else):
            add(stmt.orelse.body)
    if isinstance(stmt, cst.Try):
        for h in stmt.handlers:
            add(h.body)
        if stmt.finalbody is not None:
            add(stmt.finalbody.body)
    return out


def _chain(block: list, target: cst.CSTNode, owner) -> list[tuple[list, int, object]] | None:
    """The blocks from the function body down to the statement holding ``target``: (block, index, the compound
    statement owning the block or None)."""
    for i, stmt in enumerate(block):
        if not contains(stmt, target):
            continue
        for inner in _blocks(stmt):
            found = _chain(inner, target, stmt)
            if found is not None:
                return [(block, i, owner), *found]
        return [(block, i, owner)]
    return None


class _StepScan:
    """Backward scan from a call to the writes and device synchronisations before it (:func:`steps_synced`)."""

    def __init__(self, project: Project, model: FileModel, writers: frozenset[str]) -> None:
        self.project, self.model, self.writers = project, model, writers

    def effect(self, stmt: cst.CSTNode) -> str | None:
        """``"write"`` (a call of a writer in it, on some path), ``"sync"`` (it ends synchronised on every path:
        a device-wide synchronize as a statement of its own, directly or through a project helper), or None."""
        if isinstance(stmt, cst.SimpleStatementLine):
            if any(self.writes(n) for n in calls_in(stmt)):
                return "write"
            if any(isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and self.syncs(s.value)
                   for s in stmt.body):
                return "sync"
            return None
        if isinstance(stmt, cst.If):
            results = [self.scan(b, len(b)) for b in _blocks(stmt)]
            last = stmt
            while isinstance(last, cst.If) and isinstance(last.orelse, cst.If):
                last = last.orelse
            if not (isinstance(last, cst.If) and isinstance(last.orelse, cst.Else)):
                results.append(None)  # (no else: the path around the bodies)
            if "write" in results:
                return "write"
            return "sync" if all(r == "sync" for r in results) else None
        blocks = _blocks(stmt)
        if not blocks:
            return "write" if any(self.writes(n) for n in calls_in(stmt)) else None
        r = self.scan(blocks[0], len(blocks[0]))  # a loop run once at least, a `with` / `try` body
        if r is None and any(self.scan(b, len(b)) == "write" for b in blocks[1:]):
            return "write"
        return r

    def scan(self, block: list, end: int) -> str | None:
        for stmt in reversed(block[:end]):
            r = self.effect(stmt)
            if r is not None:
                return r
        return None

    def writes(self, call: cst.Call) -> bool:
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return name in self.writers

    def syncs(self, call: cst.Call) -> bool:
        from streamlint.model import apis
        from streamlint.model.flow.effects import syncs_device

        site = self.model.call_site(call)
        if site is None:
            return False
        if any(u.role is apis.Role.DEVICE_SYNCHRONIZE for u in self.project.api_uses(self.model, site)):
            return True
        target = self.project.call_target(self.model, site)
        return target is not None and syncs_device(self.project, target[1], target[0])


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.FunctionDef, cst.Lambda)):
            continue
        if isinstance(n, cst.Call):
            out.append(n)
        stack.extend(children(n))
    return out


def _before_call(scan: _StepScan, caller: FunctionInfo, call: cst.Call) -> str | None:
    """What every path from the caller's entry (and, in a loop, from the previous round) to ``call`` meets last:
    ``"write"`` when some path meets a writer first, ``"sync"`` when every path meets a synchronisation, None
    when some path reaches the entry with neither."""
    body = list(caller.node.body.body) if isinstance(caller.node.body, cst.IndentedBlock) else []
    chain = _chain(body, call, None)
    if chain is None:
        return "write"
    entry = False
    for block, i, owner in reversed(chain):
        r = scan.scan(block, i)
        if r == "write":
            return "write"
        if r == "sync":
            break  # every path from here back meets it (what lies before no longer matters)
        if isinstance(owner, (cst.For, cst.While)):  # the previous round: the statements after this one
            tail = scan.scan(block[i + 1:], len(block) - i - 1)
            if tail == "write":
                return "write"
    else:
        entry = True
    return None if entry else "sync"


def steps_synced(project: Project, file: FileModel, fn: FunctionInfo, writer: str, _depth: int = 0) -> bool:
    """Does every visible caller run ``fn`` only after a device-wide synchronize that follows every call of the
    method ``writer`` (which rewrites a field of the object every step), on every path to the call: each step
    of its loop ends with ``torch.cuda.synchronize()`` or a helper doing it (``self.sync()``)? The writer's
    device work is then finished before ``fn`` queues a side stream's reads of the field. A path from the
    caller's entry is followed into its own callers (two levels); a caller that is the writer itself, or a
    caller not visible, answers no."""
    if _depth > 2 or fn.class_name is None:
        return False
    memo = project.derived("steps_synced")
    key = (id(fn), writer, _depth)
    if key in memo:
        return memo[key]
    memo[key] = False
    sites = callers_of(project, file, fn)
    if not sites:
        return False
    ok = True
    for model, site in sites:
        caller = site.function
        if caller is None or caller is fn or caller.node.name.value == writer:
            ok = False
            break
        writers = _writing_methods(model, caller, writer)
        r = _before_call(_StepScan(project, model, writers), caller, site.node)
        if r == "write" or r is None and not steps_synced(project, model, caller, writer, _depth + 1):
            ok = False
            break
    memo[key] = ok
    return ok


def _writing_methods(model: FileModel, caller: FunctionInfo, writer: str) -> frozenset[str]:
    """The writer and the methods of the caller's class that call it, directly or through one another
    (``self.step()`` running ``self.layer()`` running ``self.compute()``)."""
    names = {writer}
    cls = model.classes.get(caller.class_name or "")
    methods = list(cls.methods.items()) if cls is not None else []
    grew = True
    while grew:
        grew = False
        for name, m in methods:
            if name not in names and any(site.method in names for site in m.calls):
                names.add(name)
                grew = True
    return frozenset(names)
