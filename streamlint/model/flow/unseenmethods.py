"""Methods of ``self`` the project does not define (issue 16, precision of SL201: "a patched class").

A class that extends another package's class (``class PagedAttentionImpl(AttentionImpl)``), or whose methods are
patched onto a class of another package, calls methods of ``self`` that no class of the project defines
(``self._decode_kernel(...)``): their code is the other package's, or the patched class's own. When such a call
runs between the two accesses of a race, the ordering it lacks may well be in that code (the decode kernel records
an event on the compute stream and makes the communication stream wait for it before it returns). The analysis
cannot read it, so the race stays, at low confidence, naming the call and what it assumes.

:func:`unseen_self_call` finds that call: a ``self.m(...)`` call of the function lexically between the earlier
access's statement and the later one (not for a race carried round a loop), where ``m`` is no method of the class
or of its project bases (``Project.call_target`` finds none) and no field the class assigns (``self.m = fn``: a
callable the class holds is its own business), and the class has a base the project does not define  (not
``torch.nn.Module``: torch's classes order no stream for a subclass).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.filefacts import ClassInfo
from streamlint.model.syntax import lexical_index, node_memo

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import FunctionInfo
    from streamlint.model.project import Project


def _assigned_fields(cls: ClassInfo) -> set[str]:
    def compute(node: cst.CSTNode) -> set[str]:
        out: set[str] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else \
                [n.target] if isinstance(n, (cst.AnnAssign, cst.AugAssign)) else []
            for t in targets:
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                    out.add(t.attr.value)
            stack.extend(n.children)
        return out
    return node_memo("assigned_fields", cls.node, compute)  # type: ignore[return-value]


def _foreign_base(project: "Project", file: "FileModel", cls: ClassInfo) -> bool:
    """Has ``cls`` (or a project base of it) a base class the project does not define?"""
    seen: set[int] = set()
    todo = [(cls, file)]
    while todo:
        c, f = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        for base in (b.split("[", 1)[0] for b in c.bases):  # (`Generic[T]`: its name)
            if base.rsplit(".", 1)[-1] in ("object", "Generic", "Protocol", "ABC") \
                    or base.split(".", 1)[0] in ("torch", "nn") or base in ("Module", "Function"):
                continue  # (torch's own classes order no stream behind a method of the subclass)
            sym = project.symbol(base, f)
            if sym is None or not isinstance(sym[0], ClassInfo):
                return True
            todo.append(sym)
    return False


def unseen_self_call(project: "Project", file: "FileModel", fn: "FunctionInfo", earlier: cst.CSTNode | None,
                     later: cst.CSTNode) -> str | None:
    """The method name of the last such call between ``earlier`` and ``later`` (see the module docstring), else None."""
    cls = file.classes.get(fn.class_name or "") if fn.class_name else None
    if earlier is None or cls is None or not _foreign_base(project, file, cls):
        return None
    index = node_memo("lexical_index", fn.node, lexical_index)
    if id(earlier) not in index or id(later) not in index:  # type: ignore[operator]
        return None
    after, before = index[id(earlier)][1], index[id(later)][0]  # type: ignore[index]
    if after >= before:
        return None
    fields = _assigned_fields(cls)
    last: tuple[int, str] | None = None
    for site in fn.calls:
        recv = site.receiver
        if not (isinstance(recv, cst.Name) and recv.value == "self") or site.method is None \
                or site.method in fields or id(site.node) not in index:  # type: ignore[operator]
            continue
        at = index[id(site.node)][0]  # type: ignore[index]
        if after < at < before and (last is None or at > last[0]) and project.call_target(file, site) is None:
            last = (at, site.method)
    return last[1] if last is not None else None  # (the call nearest the later access)
