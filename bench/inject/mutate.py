"""The mutator: one defect per mutant, written with LibCST into a copy of a real module.

`sites(source, path)` finds every place in the stream-using functions of one module where a mutation
kind applies and returns `Site` objects; `Site.apply()` returns the mutated module text. The original
is never changed. Every edited or inserted statement carries the trailing comment `# sl-inject` so
the harness finds the expected line in the mutant without re-deriving it (a comment that is not a
suppression changes nothing in the analysis).

Kinds and what each expects (the harness matches on these):

| kind | edit | expected |
|---|---|---|
| delete-wait | a `wait_stream` / `wait_event` / `event.wait()` / `npu_wait_tensor` / tagged or ops wait / `synchronize()` statement becomes `pass` | SL201 (or SL205) from the deleted wait to the function's end |
| delete-record-stream | a `x.record_stream(s)` statement becomes `pass` | SL301 in the function |
| record-wrong-stream | `x.record_stream(s)` records on another stream of the function (or the current stream) | SL301 in the function |
| record-event-early | `event.record()` / `stream.record_event(e)` moves to the top of its block, before the work it guarded | SL201 (or SL205) from the record to the function's end |
| join-loop-skip-first / -last | a `for` loop whose body waits iterates over `xs[1:]` / `xs[:-1]` (`range(1, n)` / `range(n - 1)`) | SL201 (or SL205) from the loop to the function's end |
| break-direct | a graph break (`print`, `.item()`, `.tolist()`, `.cpu()`, `torch._dynamo.graph_break()`, a data-dependent `if`) as the first statement of a TorchAir scope | SL101 at the inserted line |
| break-callee | a call of a module-level helper that breaks (`.tolist()` / `print`), first in the scope | SL101 at the call |
| single-stream | `cfg.ge_config.enable_single_stream = True` after a `CompilerConfig()` assignment | SL401 at the assignment |
| mode-api | a native `record_stream` inside a TorchAir GE scope, or `torchair.scope.npu_wait_tensor` in a native-stream (eager) scope | SL502 at the inserted line |
| superkernel-nest | a `with npu_stream_switch(...)` wrapped in `with torchair.scope.super_kernel("sl_inject", "")` | SL102 at the wrapper or the switch |

Each site also carries the mutator's own verdict on whether the mutant is a real defect
(`defect`), provably not one (`equivalent`) or not decidable from the function (`undecided`), with
the reason; see README.md ("How equivalence is decided").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from streamlint.model import apis

MARK = "# sl-inject"

KINDS = (
    "delete-wait", "delete-record-stream", "record-wrong-stream", "record-event-early",
    "join-loop-skip-first", "join-loop-skip-last", "break-direct", "break-callee", "single-stream",
    "mode-api", "superkernel-nest",
)

# Rule codes each kind expects, and whether the expectation is a single line or the region from the
# edit to the function's end ("region") / the whole function ("function").
EXPECT: dict[str, tuple[tuple[str, ...], str]] = {
    "delete-wait": (("SL201", "SL205"), "region"),
    "delete-record-stream": (("SL301",), "function"),
    "record-wrong-stream": (("SL301",), "function"),
    "record-event-early": (("SL201", "SL205"), "region"),
    "join-loop-skip-first": (("SL201", "SL205"), "region"),
    "join-loop-skip-last": (("SL201", "SL205"), "region"),
    "break-direct": (("SL101",), "line"),
    "break-callee": (("SL101",), "line"),
    "single-stream": (("SL401",), "line"),
    "mode-api": (("SL502",), "line"),
    "superkernel-nest": (("SL102",), "line+1"),
}

API_FAMILIES = ("TorchAir graph", "reduce-overhead/npugraph_ex", "torch_npu eager", "CUDA")

TORCHAIR_SCOPES = frozenset({"npu_stream_switch", "NpuStreamSwitch", "limit_core_num", "super_kernel",
                             "SuperKernelScope"})
STREAM_SWITCHES = frozenset({"npu_stream_switch", "NpuStreamSwitch"})
# Last components of called names that make a function "stream-using" (the model's API table, plus the
# stream/event/tensor methods it types by receiver).
_STREAM_CALL_NAMES = frozenset(
    {spec.qualname.rsplit(".", 1)[-1] for spec in apis.SPECS.values()
     if spec.family is not None or spec.role in apis.NO_BREAK_SCOPE_ROLES}
    | {"wait_stream", "wait_event", "record_event", "record_stream", "npu_stream_switch", "NpuStreamSwitch",
       "npu_wait_tensor"}
) - {"synchronize", "graph"}
_WAIT_METHODS = {"wait_stream": "wait_stream", "wait_event": "wait_event"}
_SYNC_HINT = re.compile(r"npu|cuda|stream|event|accelerator|platform|device", re.I)
_EVENTISH = re.compile(r"event", re.I)


@dataclass
class Site:
    path: str
    qualname: str
    kind: str
    detail: str
    line: int  # the edited statement's first line in the original
    func_start: int
    func_end: int
    api_family: str
    verdict: str  # defect | equivalent | undecided
    reason: str
    _apply: Callable[[], str] = field(repr=False, default=lambda: "")

    @property
    def key(self) -> str:
        """Stable identity: file, function, kind, detail and the edited line's ordinal in the function."""
        return f"{self.path}::{self.qualname}::{self.kind}:{self.detail}@{self.line - self.func_start}"

    def apply(self) -> str:
        return self._apply()


# --------------------------------------------------------------------------------------------- helpers

def dotted(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    if isinstance(node, cst.Call):
        base = dotted(node.func)
        return None if base is None else f"{base}()"
    if isinstance(node, cst.Subscript):
        base = dotted(node.value)
        return None if base is None else f"{base}[]"
    return None


def last_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _single_call(stmt: cst.BaseStatement) -> tuple[cst.Call, cst.BaseSmallStatement] | None:
    """The call of a one-statement line `f(...)` or `x = f(...)`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value, small
    if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call) and len(small.targets) == 1:
        return small.value, small
    return None


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.loads: set[str] = set()
        self.calls: list[cst.Call] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.loads.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def names_in(nodes: Sequence[cst.CSTNode]) -> _Names:
    v = _Names()
    for n in nodes:
        n.visit(v)
    return v


# Block chain: the enclosing bodies of a statement, innermost last: (owner block node, index in it).
Chain = tuple[tuple[cst.CSTNode, int], ...]


def _bodies(stmt: cst.BaseStatement) -> list[cst.BaseSuite]:
    out: list[cst.BaseSuite] = []
    if isinstance(stmt, (cst.If, cst.While, cst.For, cst.With, cst.Try, cst.TryStar)):
        out.append(stmt.body)
    if isinstance(stmt, cst.If) and stmt.orelse is not None:
        if isinstance(stmt.orelse, cst.If):
            out.extend(_bodies(stmt.orelse))
        else:
            out.append(stmt.orelse.body)
    if isinstance(stmt, (cst.For, cst.While)) and stmt.orelse is not None:
        out.append(stmt.orelse.body)
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        out.extend(h.body for h in stmt.handlers)
        if stmt.orelse is not None:
            out.append(stmt.orelse.body)
        if stmt.finalbody is not None:
            out.append(stmt.finalbody.body)
    return out


def walk_block(block: cst.BaseSuite, chain: Chain = ()) -> Iterator[tuple[cst.BaseStatement, Chain]]:
    """Every statement under `block` in program order, with its chain, not entering nested defs."""
    if not isinstance(block, cst.IndentedBlock):
        return
    for i, stmt in enumerate(block.body):
        here = chain + ((block, i),)
        yield stmt, here
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        for body in _bodies(stmt):
            yield from walk_block(body, here)


def later_statements(chain: Chain) -> list[cst.BaseStatement]:
    out: list[cst.BaseStatement] = []
    for block, index in reversed(chain):
        out.extend(block.body[index + 1:])  # type: ignore[attr-defined]
    return out


# ------------------------------------------------------------------------------------------ the module

@dataclass
class _Func:
    node: cst.FunctionDef
    qualname: str
    start: int
    end: int
    params: list[str]


class _Collect(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.funcs: list[_Func] = []
        self.event_targets: set[str] = set()
        # host synchronisation objects (threading / multiprocessing events): their wait() is not a device wait
        self.host_events: set[str] = set()
        self._host_callables: set[str] = set()
        self.config_assigns: list[tuple[cst.SimpleStatementLine, str, int]] = []
        self.module_names: set[str] = set()
        self._line_stmt: cst.SimpleStatementLine | None = None
        self.depth = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.append(node.name.value)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append(node.name.value)
        pos = self.get_metadata(PositionProvider, node)
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params,
                                         *node.params.kwonly_params)]
        self.funcs.append(_Func(node, ".".join(self.stack), pos.start.line, pos.end.line, params))
        self.depth += 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.pop()
        self.depth -= 1

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line_stmt = node

    def visit_Import(self, node: cst.Import) -> None:
        if self.depth == 0:
            for alias in node.names:
                bound = alias.asname.name if alias.asname else alias.name
                name = dotted(bound)
                if name:
                    self.module_names.add(name.split(".")[0] if not alias.asname else name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not isinstance(node.names, cst.ImportStar) and (dotted(node.module) or "").split(".")[0] in _HOST_SYNC_MODULES:
            self._host_callables |= {a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name)
                                     else a.name.value for a in node.names if isinstance(a.name, cst.Name)}
        if self.depth == 0 and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname else alias.name
                name = dotted(bound)
                if name:
                    self.module_names.add(name)

    def _host_sync_value(self, value: cst.BaseExpression | None) -> bool:
        """`threading.Event()`, `mp_ctx.Event()`, `Event()` imported from threading, or a list of them."""
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            value = value.elt
        elif isinstance(value, (cst.List, cst.Tuple)) and value.elements:
            value = value.elements[0].value
        if not isinstance(value, cst.Call):
            return False
        callee = dotted(value.func) or ""
        head, _, last = callee.rpartition(".")
        if last not in _HOST_SYNC_CLASSES:
            return False
        if not head:
            return callee in self._host_callables
        root = head.split(".")[0]
        return root in _HOST_SYNC_MODULES or root in ("mp", "ctx") or root.endswith(("_ctx", "_mp")) or "context" in root

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        target = dotted(node.target)
        if target and self._host_sync_value(node.value):
            self.host_events.add(target)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and self._host_sync_value(node.value):
            target = dotted(node.targets[0].target)
            if target:
                self.host_events.add(target)
            return
        if not isinstance(node.value, cst.Call) or len(node.targets) != 1:
            return
        callee = last_name(node.value.func)
        target = dotted(node.targets[0].target)
        if target is None:
            return
        if callee in ("Event", "npu_create_tagged_event"):
            self.event_targets.add(target)
        if callee == "CompilerConfig" and self._line_stmt is not None and self._line_stmt.body[0] is node:
            pos = self.get_metadata(PositionProvider, self._line_stmt)
            self.config_assigns.append((self._line_stmt, target, pos.start.line))


_HOST_SYNC_MODULES = ("threading", "multiprocessing", "asyncio", "queue")
_HOST_SYNC_CLASSES = ("Event", "Condition", "Barrier", "Semaphore")


class EventNames(set):
    """Names bound to device events in a module, and (`host`) names bound to host synchronisation
    objects (`threading.Event()`, `mp_ctx.Event()`): waiting on those orders threads, not streams."""

    def __init__(self, names: set[str], host: set[str]) -> None:
        super().__init__(names)
        self.host = host


def _is_eventish(recv: str | None, events: set[str]) -> bool:
    if recv is None:
        return False
    host = getattr(events, "host", ())
    base = recv.split("[", 1)[0]
    if recv in host or base in host:
        return False
    return recv in events or bool(_EVENTISH.search(recv.rsplit(".", 1)[-1]))


def uses_streams(func: cst.FunctionDef, events: set[str]) -> bool:
    v = names_in([func.body])
    for call in v.calls:
        name = last_name(call.func)
        if name in _STREAM_CALL_NAMES:
            return True
        if name in ("stream", "Stream", "current_stream", "synchronize") and re.search(
                r"npu|cuda|accelerator", dotted(call.func) or ""):
            return True
        if name in ("record", "wait") and isinstance(call.func, cst.Attribute) and _is_eventish(
                dotted(call.func.value), events):
            return True
    return False


def api_family(code: str, module_source: str) -> str:
    """The API family of a function: from its own text, else from what its module mostly uses."""
    if re.search(r"tagged_event|npugraph_ex|NPUGraph|npu\.graph\(|reduce-overhead", code):
        return "reduce-overhead/npugraph_ex"
    if re.search(r"npu_stream_switch|NpuStreamSwitch|npu_wait_tensor|torchair|super_kernel|limit_core_num", code):
        return "TorchAir graph"
    if _CUDA_WORD.search(code):
        return "CUDA"
    if _NPU_WORD.search(code):
        return "torch_npu eager"
    return "torch_npu eager" if len(_NPU_WORD.findall(module_source)) > len(_CUDA_WORD.findall(module_source)) \
        else "CUDA"


_NPU_WORD = re.compile(r"(?<![A-Za-z])npu")  # torch.npu, torch_npu, npu_stream_switch; not "input"
_CUDA_WORD = re.compile(r"(?<![A-Za-z])cuda")


class Module:
    """One parsed module and the sites of every mutation kind in it."""

    def __init__(self, source: str, path: str, *, tree_is_npu: bool = False, tree_multistream: bool = False) -> None:
        self.source = source
        self.path = path
        self.wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
        self.module = self.wrapper.module
        self.pos = self.wrapper.resolve(PositionProvider)
        self.col = _Collect()
        self.wrapper.visit(self.col)
        self.tree_is_npu = tree_is_npu or bool(_NPU_WORD.search(source))
        self.tree_multistream = tree_multistream
        self.lines = source.splitlines(keepends=True)
        self._offsets = [0]
        for text in self.lines:
            self._offsets.append(self._offsets[-1] + len(text))

    # -- edits: LibCST finds the nodes and their positions; the edit is spliced into the original text
    # at those positions, so everything outside the edited statement stays byte-identical.
    def line(self, node: cst.CSTNode) -> int:
        return self.pos[node].start.line

    def _off(self, line: int, col: int) -> int:
        return self._offsets[line - 1] + col

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        r = self.pos[node]
        return self._off(r.start.line, r.start.column), self._off(r.end.line, r.end.column)

    def lines_span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Whole lines of a statement (start of its first line to the end of its last line)."""
        r = self.pos[node]
        return self._offsets[r.start.line - 1], self._offsets[min(r.end.line, len(self.lines))]

    def text(self, node: cst.CSTNode) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def indent_of(self, node: cst.CSTNode) -> str:
        return " " * self.pos[node].start.column

    def splice(self, edits: list[tuple[int, int, str]]) -> str:
        text = self.source
        for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = text[:start] + new + text[end:]
        return text

    def insert_before(self, stmt: cst.CSTNode, code: str) -> tuple[int, int, str]:
        """`code` (dedented, its first line marked) as new lines before `stmt`, at its indentation."""
        ind = self.indent_of(stmt)
        first, *rest = code.rstrip("\n").split("\n")
        text = f"{ind}{first}  {MARK}\n" + "".join(f"{ind}{line}\n" for line in rest)
        at = self._offsets[self.line(stmt) - 1]
        return at, at, text

    def import_edit(self, name: str) -> list[tuple[int, int, str]]:
        """`import name` after the last top-level import (nothing when the name is bound already)."""
        if name in self.col.module_names:
            return []
        at = 0
        for stmt in self.module.body:
            if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom)):
                at = self.lines_span(stmt)[1]
        return [(at, at, f"import {name}  # sl-inject-import\n")]

    # -- sites
    def sites(self) -> list[Site]:
        out: list[Site] = []
        events = EventNames(self.col.event_targets, self.col.host_events)
        for func in self.col.funcs:
            if not uses_streams(func.node, events):
                continue
            code = self.text(func.node)
            fam = api_family(code, self.source)
            out.extend(self._func_sites(func, fam, events))
        out.extend(self._config_sites())
        return out

    def _site(self, func: _Func, fam: str, kind: str, detail: str, line: int, verdict: str, reason: str,
              apply: Callable[[], str]) -> Site:
        return Site(self.path, func.qualname, kind, detail, line, func.start, func.end, fam, verdict, reason,
                    apply)

    def _func_sites(self, func: _Func, fam: str, events: set[str]) -> Iterator[Site]:
        stmts = list(walk_block(func.node.body))
        streams_in_func = self._stream_exprs(func)
        for stmt, chain in stmts:
            block, index = chain[-1]
            line = self.line(stmt)
            one = _single_call(stmt)
            if one is not None:
                call, small = one
                yield from self._call_sites(func, fam, events, stmt, chain, call, small, streams_in_func)
            if isinstance(stmt, cst.For):
                yield from self._loop_sites(func, fam, stmt, events)
            if isinstance(stmt, cst.With):
                yield from self._with_sites(func, fam, stmt, chain)

    def _stream_exprs(self, func: _Func) -> list[str]:
        """Texts of stream expressions used in the function (with-items of stream contexts, wait_stream
        receivers and arguments), for record-wrong-stream."""
        out: list[str] = []
        for call in names_in([func.node.body]).calls:
            name = last_name(call.func)
            if name == "stream" and call.args:
                out.append(self.text(call.args[0].value))
            if name == "wait_stream" and isinstance(call.func, cst.Attribute):
                out.append(self.text(call.func.value))
                if call.args:
                    out.append(self.text(call.args[0].value))
        seen: list[str] = []
        for s in out:
            if s not in seen:
                seen.append(s)
        return seen

    # delete-wait, delete-record-stream, record-wrong-stream, record-event-early, mode-api helpers
    def _call_sites(self, func: _Func, fam: str, events: set[str], stmt: cst.SimpleStatementLine, chain: Chain,
                    call: cst.Call, small: cst.BaseSmallStatement, streams: list[str]) -> Iterator[Site]:
        name = last_name(call.func)
        recv = dotted(call.func.value) if isinstance(call.func, cst.Attribute) else None
        full = dotted(call.func) or ""
        block, index = chain[-1]
        line = self.line(stmt)
        detail: str | None = None
        if name in _WAIT_METHODS and isinstance(small, cst.Expr):
            detail = name
        elif name == "wait" and _is_eventish(recv, events) and isinstance(small, cst.Expr):
            detail = "event.wait"
        elif name == "npu_wait_tensor":
            detail = "npu_wait_tensor"
        elif name == "npu_tagged_event_wait" or full.endswith("ops.wait"):
            detail = "tagged/ops wait"
        elif name == "synchronize" and isinstance(small, cst.Expr) and _SYNC_HINT.search(full):
            detail = "synchronize"
        if detail is not None:
            yield self._delete_wait(func, fam, stmt, chain, call, small, detail, recv)
        if name == "record_stream" and isinstance(small, cst.Expr) and recv is not None:
            verdict, reason = self._lifetime_verdict(func, recv, chain)
            yield self._site(func, fam, "delete-record-stream", "record_stream", line, verdict, reason,
                             lambda: self.splice([(*self.span(stmt), f"pass  {MARK}")]))
            current = call.args[0].value if call.args else None
            cur_text = self.text(current) if current is not None else ""
            others = [s for s in streams if s != cur_text and "current_stream" not in s]
            dev = "cuda" if fam == "CUDA" else "npu"
            if others:
                repl = others[0]
            elif "current_stream" not in cur_text:
                repl = f"torch.{dev}.current_stream()"
            else:
                repl = None
            if repl is not None and current is not None:
                edits = [(*self.span(current), repl), (self.span(stmt)[1], self.span(stmt)[1], f"  {MARK}")]
                yield self._site(func, fam, "record-wrong-stream", f"-> {repl}", line, verdict, reason,
                                 lambda edits=edits: self.splice(edits))
        if isinstance(small, cst.Expr) and (
                (name == "record" and _is_eventish(recv, events)) or name in ("record_event", "npu_tagged_event_record")):
            yield from self._record_early(func, fam, events, stmt, chain, call, recv, name)

    def _delete_wait(self, func: _Func, fam: str, stmt: cst.SimpleStatementLine, chain: Chain, call: cst.Call,
                     small: cst.BaseSmallStatement, detail: str, recv: str | None) -> Site:
        block, index = chain[-1]
        line = self.line(stmt)
        later = later_statements(chain)
        replacement = "pass"
        verdict, reason = "defect", "the wait orders later work of this function"
        if detail == "npu_wait_tensor":
            first = call.args[0].value if call.args else None
            first_text = self.text(first) if first is not None else "None"
            if isinstance(small, cst.Assign):
                target = self.text(small.targets[0].target)
                if target != first_text:
                    replacement = f"{target} = {first_text}"
                used = target
            else:
                used = first_text
            if isinstance(first, cst.Name) and used not in names_in(later).loads:
                verdict, reason = "equivalent", f"npu_wait_tensor: `{used}` is not used after the wait (it orders nothing, SL202)"
            elif fam == "TorchAir graph" and not _IN_PLACE.search(self.text(func.node)):
                verdict, reason = "undecided", ("GE orders data edges itself: with no in-place write in the function "
                                                "the deleted npu_wait_tensor may only have been scheduling")
        loads = names_in(later).loads - {"torch", "self", "stream", "event"}
        if verdict == "defect":
            if not later or not loads:
                verdict, reason = "undecided", "no consumer after the wait in this function: it orders a caller's work"
            elif any(self.text(s).strip() == self.text(stmt).strip()
                     for s in later[:1]):
                verdict, reason = "equivalent", "the same wait follows immediately (redundant)"
            elif detail == "synchronize" and re.search(r"elapsed_time|enable_timing\s*=\s*True", self.text(func.node)) \
                    and not re.search(r"wait_stream|wait_event|record_stream|npu_stream_switch|\.stream\(",
                                      self.text(func.node)):
                verdict, reason = "equivalent", ("out of domain: synchronize() around timing events (elapsed_time) in a "
                                                 "function with no second stream: a host timing measurement")
            elif detail == "synchronize" and not re.search(
                    r"\.stream\(|wait_stream|wait_event|record_stream|Stream\(|npu_stream_switch|\.record\(",
                    self.text(func.node)):
                verdict, reason = "undecided", "synchronize() in a function with no side stream: host ordering (timing, host read-back) that may protect only the host"
        return self._site(func, fam, "delete-wait", detail, line, verdict, reason,
                          lambda: self.splice([(*self.span(stmt), f"{replacement}  {MARK}")]))

    def _lifetime_verdict(self, func: _Func, recv: str, chain: Chain) -> tuple[str, str]:
        root = recv.split(".")[0].split("[")[0]
        if "." in recv or "[" in recv or root == "self":
            return "equivalent", f"`{recv}` is an attribute or element of a long-lived object (SL302 class)"
        if root in func.params:
            return "undecided", f"`{recv}` is a parameter: whether the caller keeps it alive is outside the function"
        later = later_statements(chain)
        text = "\n".join(self.text(s) for s in later)
        if re.search(rf"return\b[^\n]*\b{re.escape(root)}\b|\.append\(\s*{re.escape(root)}\b|=\s*{re.escape(root)}\s*$",
                     text, re.M):
            return "undecided", f"`{recv}` escapes (returned or stored): ownership leaves the function"
        return "defect", f"`{recv}` is local and dies with the function"

    def _record_early(self, func: _Func, fam: str, events: set[str], stmt: cst.SimpleStatementLine, chain: Chain,
                      call: cst.Call, recv: str | None, name: str | None) -> Iterator[Site]:
        block, index = chain[-1]
        # Move the record up past the work before it, but never past a statement that binds a name the
        # record uses (the event's own creation, the stream it records on).
        rec_text = self.text(stmt)
        target = index
        for j in range(index - 1, -1, -1):
            prev = block.body[j]  # type: ignore[attr-defined]
            docstring = isinstance(prev, cst.SimpleStatementLine) and isinstance(prev.body[0], cst.Expr) and \
                isinstance(prev.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
            if docstring or isinstance(prev, (cst.FunctionDef, cst.ClassDef)) or any(
                    re.search(rf"(?<![\w.]){re.escape(t)}(?!\w)", rec_text) for t in _assigned(prev)):
                break
            target = j
        passed = block.body[target:index]  # type: ignore[attr-defined]
        if target == index or not names_in(passed).calls:
            return
        event = recv if name == "record" else (self.text(call.args[0].value) if call.args else "")
        code = self.text(func.node)
        line = self.line(stmt)
        esc = re.escape(event or "?")
        if re.search(rf"{esc}\.elapsed_time|elapsed_time\(\s*{esc}", code):
            verdict, reason = "equivalent", f"`{event}` is a timing event (read by elapsed_time)"
        elif re.search(rf"wait_event\(\s*{esc}\s*\)|{esc}\.wait\(|{esc}\.synchronize\(|npu_tagged_event_wait\(\s*{esc}", code):
            verdict, reason = "defect", f"`{event}` is waited in this function"
        else:
            verdict, reason = "undecided", f"`{event}` is waited outside this function (caller or another method)"
        start, end = self.lines_span(stmt)
        moved = self.source[start:end].rstrip("\n") + f"  {MARK}\n"
        top = self._offsets[self.line(block.body[target]) - 1]  # type: ignore[attr-defined]
        edits = [(start, end, ""), (top, top, moved)]
        yield self._site(func, fam, "record-event-early", name or "record", line, verdict, reason,
                         lambda: self.splice(edits))

    def _loop_sites(self, func: _Func, fam: str, loop: cst.For, events: set[str]) -> Iterator[Site]:
        waits = False
        for call in names_in([loop.body]).calls:
            n = last_name(call.func)
            if n in ("wait_stream", "wait_event", "npu_wait_tensor", "npu_tagged_event_wait") or (
                    n == "wait" and isinstance(call.func, cst.Attribute) and _is_eventish(dotted(call.func.value), events)):
                waits = True
        if not waits:
            return
        it = loop.iter
        for which in ("first", "last"):
            if isinstance(it, cst.Call) and dotted(it.func) == "range" and len(it.args) == 1:
                n = self.text(it.args[0].value)
                text = f"range(1, {n})" if which == "first" else f"range({n} - 1)"
            elif isinstance(it, cst.Call) and dotted(it.func) == "range":
                continue
            else:
                base = self.text(it)
                if isinstance(it, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
                    text = f"{base}[1:]" if which == "first" else f"{base}[:-1]"
                else:
                    text = f"({base})[1:]" if which == "first" else f"({base})[:-1]"
                if isinstance(it, cst.Call) and last_name(it.func) in ("enumerate", "zip", "items", "values", "keys"):
                    text = f"list({base})[1:]" if which == "first" else f"list({base})[:-1]"
            # the marker goes at the end of the `for` header line(s): after the iterable's last line
            it_end = self.pos[it].end.line
            eol = self._offsets[it_end] - 1
            loop_edits = [(*self.span(it), text)]
            if self.source[self._offsets[it_end - 1]:eol].rstrip().endswith(":"):
                loop_edits.append((eol, eol, f"  {MARK}"))
            yield self._site(func, fam, f"join-loop-skip-{which}", text, self.line(loop), "defect",
                             "the loop joins one stream (or event) per iteration; one is now never joined",
                             lambda loop_edits=loop_edits: self.splice(loop_edits))

    def _with_sites(self, func: _Func, fam: str, with_: cst.With, chain: Chain) -> Iterator[Site]:
        names = [last_name(item.item.func) for item in with_.items if isinstance(item.item, cst.Call)]
        line = self.line(with_)
        body = with_.body
        if not isinstance(body, cst.IndentedBlock):
            return
        disabled = any(isinstance(item.item, cst.Call) and any(
            a.keyword is not None and a.keyword.value == "enabled" and isinstance(a.value, cst.Name)
            and a.value.value == "False" for a in item.item.args) for item in with_.items)
        scope_verdict = ("equivalent", "the scope is disabled (enabled=False)") if disabled else \
            ("defect", "a graph break inside an active TorchAir scope")
        if any(n in TORCHAIR_SCOPES for n in names):
            tensor = self._tensor_for(func, with_, chain)
            variants: list[tuple[str, str]] = [("print", 'print("sl-inject")')]
            if "torch" in self.col.module_names:
                variants.append(("graph_break", "torch._dynamo.graph_break()"))
            if tensor:
                variants += [("item", f"_sl_inject = {tensor}.item()"), ("tolist", f"_sl_inject = {tensor}.tolist()"),
                             ("cpu", f"_sl_inject = {tensor}.cpu()"),
                             ("if-tensor", f"if {tensor}.sum() > 0:\n    _sl_inject = 1\n")]
            first = body.body[0]
            for detail, code in variants:
                verdict = scope_verdict
                if detail == "cpu" and not disabled:
                    # domain.md §3: Dynamo traces `.cpu()` (a device-to-host copy), it does not break the graph
                    verdict = ("equivalent", "out of domain: `.cpu()` is traced by Dynamo, not a graph break "
                                             "(domain.md §3)")
                yield self._site(func, fam, "break-direct", detail, line, *verdict,
                                 lambda code=code: self.splice([self.insert_before(first, code)]))
            if tensor:
                helper, call_code, detail = ("def _sl_inject_helper(t):\n    return t.tolist()\n",
                                             f"_sl_inject = _sl_inject_helper({tensor})", "tolist via callee")
            else:
                helper, call_code, detail = ('def _sl_inject_helper():\n    print("sl-inject")\n',
                                             "_sl_inject_helper()", "print via callee")
            def callee(call_code=call_code, helper=helper) -> str:
                end = len(self.source)
                sep = "" if self.source.endswith("\n") else "\n"
                return self.splice([self.insert_before(first, call_code), (end, end, f"{sep}\n\n{helper}")])
            yield self._site(func, fam, "break-callee", detail, line, *scope_verdict, callee)
            if any(n in STREAM_SWITCHES for n in names) and tensor:
                # mode-api: native record_stream in GE-compiled scope code (C10)
                code = f"{tensor}.record_stream(torch.npu.current_stream())"
                mode_verdict = scope_verdict if disabled else (
                    "defect", "a native record_stream inside GE-compiled scope code (C10)")
                if "torch" in self.col.module_names:
                    yield self._site(func, fam, "mode-api", "record_stream in GE scope", line, *mode_verdict,
                                     lambda code=code: self.splice([self.insert_before(first, code)]))
        if any(n in STREAM_SWITCHES for n in names):
            inside_sk = any(isinstance(s, cst.With) and any(
                isinstance(i.item, cst.Call) and last_name(i.item.func) in ("super_kernel", "SuperKernelScope")
                for i in s.items) for s in self._ancestors(chain))
            if not inside_sk:
                def nest() -> str:
                    start, end = self.lines_span(with_)
                    block_text = "".join(("    " + ln) if ln.strip() else ln
                                         for ln in self.source[start:end].splitlines(keepends=True))
                    head = self.insert_before(with_, 'with torchair.scope.super_kernel("sl_inject", ""):')
                    return self.splice([(start, end, head[2] + block_text), *self.import_edit("torchair")])
                yield self._site(func, fam, "superkernel-nest", "super_kernel around npu_stream_switch", line,
                                 "defect", "a stream switch inside a SuperKernel without stream-fusion=1", nest)
        elif any(n == "stream" for n in names) and self.tree_is_npu and fam != "CUDA":
            item = next(i.item for i in with_.items if isinstance(i.item, cst.Call) and last_name(i.item.func) == "stream")
            if "npu" in (dotted(item.func) or "") or "torch.npu" in self.source or "torch_npu" in self.source:
                tensors = self._two_tensors(func, with_, chain)
                if tensors:
                    code = f"{tensors[0]} = torchair.scope.npu_wait_tensor({tensors[0]}, {tensors[1]})"
                    def eager_wait(code=code) -> str:
                        return self.splice([self.insert_before(body.body[0], code), *self.import_edit("torchair")])
                    yield self._site(func, fam, "mode-api", "npu_wait_tensor in native stream scope", line,
                                     "defect", "npu_wait_tensor raises outside GE (C8)", eager_wait)

    def _ancestors(self, chain: Chain) -> list[cst.CSTNode]:
        return [block.body[index] for block, index in chain[:-1]]  # type: ignore[attr-defined]

    def _defined_before(self, func: _Func, chain: Chain) -> set[str]:
        names = set(p for p in func.params if p not in ("self", "cls"))
        for block, index in chain:
            for s in block.body[:index]:  # type: ignore[attr-defined]
                for t in _assigned(s):
                    names.add(t)
        return names

    def _tensor_for(self, func: _Func, with_: cst.With, chain: Chain) -> str | None:
        pair = self._two_tensors(func, with_, chain, need=1)
        return pair[0] if pair else None

    def _two_tensors(self, func: _Func, with_: cst.With, chain: Chain, need: int = 2) -> list[str] | None:
        defined = self._defined_before(func, chain)
        found: list[str] = []
        for call in names_in([with_.body]).calls:
            for arg in call.args:
                if isinstance(arg.value, cst.Name) and arg.value.value in defined and arg.value.value not in found \
                        and arg.keyword is None and not _not_tensor(arg.value.value):
                    found.append(arg.value.value)
        if len(found) < need:  # fill from the parameters, then the names bound before the scope
            ordered = [p for p in func.params if p in defined] + sorted(defined - set(func.params))
            found += [n for n in ordered if n not in found and not _not_tensor(n)]
        return found[:need] if len(found) >= need else None

    def _config_sites(self) -> Iterator[Site]:
        for stmt, target, line in self.col.config_assigns:
            func = next((f for f in reversed(self.col.funcs) if f.start <= line <= f.end), None)
            if func is None:
                func = _Func(cst.FunctionDef(cst.Name("_"), cst.Parameters(), cst.IndentedBlock([])), "<module>",
                             1, len(self.source.splitlines()), [])
            if self.tree_multistream:
                verdict, reason = "defect", "the tree compiles multi-stream code (npu_stream_switch / npu_prefetch)"
            else:
                verdict, reason = "equivalent", "no multi-stream code in the tree"
            fam = "TorchAir graph"

            def apply(stmt=stmt, target=target) -> str:
                end = self.lines_span(stmt)[1]
                ind = self.indent_of(stmt)
                return self.splice([(end, end, f"{ind}{target}.ge_config.enable_single_stream = True  {MARK}\n")])
            yield self._site(func, fam, "single-stream", "enable_single_stream = True", line, verdict, reason, apply)


# In-place / side-effecting writes that GE does not order by data edges (rules.md SL201, `ge`).
_IN_PLACE = re.compile(r"\.\w+_\(|\bout\s*=|\[[^\]]*\]\s*=[^=]|all_reduce|all_gather|reduce_scatter|all_to_all")

_NOT_TENSOR_WORDS = frozenset({"stream", "streams", "event", "events", "tag", "mask", "flag", "flags", "num", "n",
                               "size", "is", "enable", "enabled", "config", "metadata", "meta", "mode", "layer",
                               "idx", "index", "i", "j", "prefix", "name"})


def _not_tensor(name: str) -> bool:
    """Names that by convention hold no tensor (streams, flags, counts, configs)."""
    return bool(_NOT_TENSOR_WORDS & set(name.lower().strip("_").split("_")))


def _assigned(stmt: cst.BaseStatement) -> list[str]:
    out: list[str] = []
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            targets: list[cst.BaseExpression] = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                targets = [small.target]
            for t in targets:
                if isinstance(t, cst.Name):
                    out.append(t.value)
                elif isinstance(t, cst.Attribute) and dotted(t) is not None:
                    out.append(dotted(t))  # type: ignore[arg-type]
                elif isinstance(t, (cst.Tuple, cst.List)):
                    out.extend(e.value.value for e in t.elements if isinstance(e.value, cst.Name))
    elif isinstance(stmt, (cst.If, cst.With, cst.Try, cst.For)):
        for body in _bodies(stmt):
            if isinstance(body, cst.IndentedBlock):
                for s in body.body:
                    out.extend(_assigned(s))
    return out


def sites(source: str, path: str, **kw: bool) -> list[Site]:
    """Every mutation site of one module (empty when it does not parse)."""
    try:
        module = Module(source, path, **kw)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return []
    return module.sites()
