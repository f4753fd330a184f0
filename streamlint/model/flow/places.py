"""Places a value lives in beyond a local: module globals and the host parameters of project callees.

A module global declared ``global`` by a small setter / getter pair is a place: the stream a setter stores
(``set_share_stream(torch.npu.Stream())``) is the stream the getter returns to every later caller on the
path (``get_share_stream().wait_stream(...)`` in another helper), whatever local names each helper gives
it (:class:`~streamlint.model.flow.values.State` ``globs``). A getter that fills the global itself from a
current-stream query (``cached_stream_getter``) is the stream current at its first call instead; a factory
handing back one stream object per argument values (``@lru_cache``: ``memoised``, or a table it fills on
first use: ``caching_stream_getter``) is the same stream at every call with the same arguments.

A project callee's parameter annotated with a host scalar (``dst_tp_rank: int``) receives a Python value:
the argument bound to it is no tensor read of the call (:func:`host_arguments`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import FileModel, dotted
from streamlint.model.hostannotations import host_param
from streamlint.model.filefacts import FunctionInfo
from streamlint.model.modvalues import module_value
from streamlint.model.streams import STREAM, declared_globals, returned_kind
from streamlint.model.syntax import local_nodes
from streamlint.model.uses import bind_arguments

if TYPE_CHECKING:
    from streamlint.model.project import Project


def cached_stream_getter(fn: FunctionInfo) -> bool:
    """``def current_stream(): global _S; if _S is None: _S = torch.npu.current_stream(); return _S``."""
    names = {r.value.value for r in fn.returns if isinstance(r.value, cst.Name)}
    if not names or len(names) != len(fn.returns) or not names <= set(fn.name_assigns):
        return False  # a plain getter of a global some setter fills is no cache of its own: a place
    for node in fn.node.body.body if isinstance(fn.node.body, cst.IndentedBlock) else []:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Global) and names <= {n.name.value for n in small.names}:
                    return True
    return False




_MEMO_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "lru_cache", "cache"})


def memoised(fn: FunctionInfo) -> bool:
    """``@lru_cache`` / ``@functools.cache`` (also called: ``@lru_cache(maxsize=None)``): one result per distinct
    arguments, the same object on every later call with them (a per-device stream factory)."""
    return any(d.split("(", 1)[0] in _MEMO_DECORATORS for d in fn.decorators) or any(
        (dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "") in _MEMO_DECORATORS
        for d in fn.node.decorators)


def caching_stream_getter(project: Project, file: FileModel, fn: FunctionInfo) -> bool:
    """A project function handing back one stream object per argument values, made on the first call: an
    ``@lru_cache``'d factory, or a getter keeping the stream it makes in a table (``s = table.get(dev); if s is
    None: s = torch.cuda.Stream(dev); table[dev] = s; return s``, a per-thread table included)."""
    if returned_kind(project, file, fn) != STREAM:
        return False
    if memoised(fn):
        return True
    names = {r.value.value for r in fn.returns if isinstance(r.value, cst.Name)}
    if len(names) != 1 or len(fn.returns) != 1:
        return False
    (name,) = names
    return any(isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value == name
               and any(isinstance(t.target, cst.Subscript) for t in n.targets) for n in local_nodes(fn.node.body))


def global_accessor(fn: FunctionInfo) -> bool:
    """A small getter / setter of a module global (``def get_share_stream(): global _S; return _S``,
    ``def set_share_stream(s): global _S; _S = s``): inlined, so that what a setter stores (a stream made
    once) is what the getter hands to every later caller on the path (``State.globs``)."""
    names = declared_globals(fn)
    if not names or fn.calls:  # (a getter making the stream itself is one stream by its call: not inlined)
        return False
    returned = {r.value.value for r in fn.returns if isinstance(r.value, cst.Name)}
    return bool(names & (returned | set(fn.name_assigns)))


def host_arguments(fn: FunctionInfo, call: cst.Call) -> frozenset[int]:
    """Ids of the argument expressions of ``call`` bound to host-annotated parameters of ``fn`` (a project
    function called, not inlined): ``scatter(view, pages, tp, dst_tp_rank)`` with ``dst_tp_rank: int``."""
    params = fn.node.params
    host = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params) if host_param(p)}
    if not host:
        return frozenset()
    method = fn.class_name is not None and fn.params[:1] == ("self",)
    bound = bind_arguments((fn.params[1:] if method else fn.params) + fn.kwonly, call, kwonly=fn.kwonly)
    return frozenset(id(expr) for name, expr in bound.items() if name in host and expr is not None)


def module_receiver(project, file: FileModel, fn: FunctionInfo, recv: cst.BaseExpression) -> bool:
    """Does ``recv`` hold an imported module (``self._torch = load_torch_npu()``, modvalues.py)? ``recv.relu_(t)``
    is then ``torch.relu_(t)``: it writes ``t``, and ``recv`` is no tensor place."""
    return module_value(project, file, fn, recv) is not None
