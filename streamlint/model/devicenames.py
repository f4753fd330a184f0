"""Which device module a function's code spells, for what a finding says about it: fix hints name the
stream API of the function's own device (``torch.xpu.current_stream()`` in Intel GPU code, never
``torch.cuda``), and the path tag of a finding on the CUDA-like native path says ``[xpu]`` for it.

The device is read from the native stream API the function uses (calls and ``with`` scopes; its module's
when the function itself uses none): one device family (``torch.cuda`` / ``torch.xpu`` / ``torch.npu``)
is that module; the device-generic API (``torch.accelerator``, ``torch.get_device_module()``, an
accelerator object wrapping several devices) or a dispatch between devices is ``torch.accelerator``,
correct on whichever device runs. The execution path (``cuda`` for CUDA and XPU alike: one stream model,
:data:`~streamlint.model.apis.FAMILY_MODE`) is unchanged: only the words change."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from streamlint._lazy import cst

from streamlint.model.accelerators import METHODS, device_generic
from streamlint.model.apis import Family
from streamlint.model.file import FileModel
from streamlint.model.filefacts import FunctionInfo

if TYPE_CHECKING:
    from streamlint.model.queries import ProjectQueries as Project

GENERIC = "torch.accelerator"
_MODULE = {Family.CUDA: "torch.cuda", Family.XPU: "torch.xpu", Family.NATIVE_NPU: "torch.npu"}
# the native device families each execution path's code may use (the CUDA-like path: CUDA and Intel GPUs)
_PATH_FAMILIES = {"cuda": frozenset({Family.CUDA, Family.XPU})}
_NPU_FAMILIES = frozenset({Family.NATIVE_NPU})
_STREAM_ROLES = frozenset(METHODS.values())
_TAG = re.compile(r"\[([a-z_/-]+)\]$")


def device_module(project: Project, file: FileModel, fn: FunctionInfo | None, mode: str) -> str:
    """``torch.cuda`` / ``torch.xpu`` / ``torch.npu`` / ``torch.accelerator``: the module whose stream API
    code of ``fn`` analysed on path ``mode`` spells (the path's own device when nothing says otherwise)."""
    allowed = _PATH_FAMILIES.get(mode, _NPU_FAMILIES)
    for scope in (fn, None) if fn is not None else (None,):
        found = _families(project, file, scope)
        mine = {f for f in found if f is None or f in allowed}
        if len(mine) == 1 and None not in mine:
            return _MODULE[next(iter(mine))]  # type: ignore[index]
        if mine:
            return GENERIC  # the device-generic API, or a dispatch between devices of the path
    return "torch.cuda" if mode == "cuda" else "torch.npu"


def device_tag(project: Project, file: FileModel, fn: FunctionInfo | None, tag: str) -> str:
    """The path tag of a finding in ``fn`` as the user reads it: ``cuda`` is ``xpu`` in Intel GPU code."""
    parts = tag.split("/")
    if "cuda" not in parts or device_module(project, file, fn, "cuda") != "torch.xpu":
        return tag
    return "/".join("xpu" if p == "cuda" else p for p in parts)


def retag(project: Project, file: FileModel, node: cst.CSTNode, message: str) -> str:
    """``message`` of a finding at ``node`` with its trailing path tag (``... [cuda]``) spelled for the device
    of the function around ``node``."""
    m = _TAG.search(message)
    if m is None or "cuda" not in m.group(1).split("/"):
        return message
    tag = device_tag(project, file, function_at(file, node), m.group(1))
    return message[:m.start(1)] + tag + message[m.end(1):]


def function_at(file: FileModel, node: cst.CSTNode) -> FunctionInfo | None:
    """The innermost function of ``file`` whose source holds ``node``."""
    span = file.span(node)
    best: FunctionInfo | None = None
    best_size = None
    functions = file.functions.values()
    where = file.region(node)
    if where is not None and (span.start_line, span.start_col) != (span.end_line, span.end_col) \
            and (where[1] is not None or type(file.module.body[where[0]]) is not cst.ClassDef):
        # a node with text in a top-level statement (in a statement of a top-level class's body: not the class's
        # block, whose text may be its only method's) lies in the text of no function of another: only the
        # functions of its own need positions (the others' would cost a code generation of every method)
        functions = [fn for fn in functions if file.region(fn.node, walk=False) == where]
    for fn in functions:
        outer = file.span(fn.node)
        if (outer.start_line, outer.start_col) <= (span.start_line, span.start_col) \
                and (span.end_line, span.end_col) <= (outer.end_line, outer.end_col):
            size = outer.end_line - outer.start_line
            if best_size is None or size < best_size:
                best, best_size = fn, size
    return best


def _families(project: Project, file: FileModel, fn: FunctionInfo | None) -> frozenset[Family | None]:
    """The native device families the stream API uses of ``fn`` (None: every call and scope of
    the file) belong to; None in the set: the device-generic API."""
    memo: dict = project.path_index.derived.setdefault("device_families", {})
    key = id(fn) if fn is not None else id(file)
    entry = memo.get(key)
    owner = fn if fn is not None else file
    if entry is not None and entry[0] is owner:
        return entry[1]
    sites = fn.calls if fn is not None else file.calls
    scopes = fn.scopes if fn is not None else [s for f in file.functions.values() for s in f.scopes]
    uses = [u for site in sites for u in project.api_uses(file, site)]
    uses += [u for scope in scopes for u in project.scope_use(file, scope).uses]
    found = frozenset(None if device_generic(u) else u.family for u in uses
                      if u.role in _STREAM_ROLES and (u.family is None or u.family in _MODULE))
    memo[key] = (owner, found)
    return found


__all__ = ["GENERIC", "device_module", "device_tag", "function_at", "retag"]
