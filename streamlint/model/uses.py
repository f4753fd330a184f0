"""What a call site invokes: :class:`ApiUse` (a known API reached directly or through project
wrappers), :class:`ScopeUse` (the APIs a ``with`` item opens) and :func:`bind_arguments` (which
argument expression a call passes for each parameter). Plain values of the per-file layer: they
name the file and node they come from and know nothing about other files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamlint._lazy import cst

from streamlint.model import apis
from streamlint.model.apis import ApiSpec, Role
from streamlint.model.file import FileModel
from streamlint.model.filefacts import CallSite, ScopeSite


@dataclass(frozen=True)
class ApiUse:
    """A call that (directly or through project wrappers) invokes a known API."""

    spec: ApiSpec
    site: CallSite
    file: FileModel
    bind: dict[str, cst.BaseExpression | None]  # API parameter -> argument expression at the call site
    wrappers: tuple[str, ...] = ()  # qualified names of the wrappers traversed, outermost first
    modes: frozenset[str] | None = None  # execution paths under which this variant applies (None: all)
    constants: dict[str, cst.BaseExpression] = field(default_factory=dict)  # fixed inside a wrapper
    # attributes of the wrapper method's own object (``self._stream`` inside ``def _stream_ctx(self)``)
    receiver_attrs: dict[str, cst.BaseExpression] = field(default_factory=dict)
    # a context factory value with a null arm (``partial(torch.cuda.stream, s) if c else nullcontext``): the
    # test, in the caller's terms, and the outcome under which the call really switches (model/ctxfactories.py)
    enabled: "tuple[cst.BaseExpression, bool] | None" = None
    # API parameters whose value, inside the wrapper, is the stream current at this call (model/wrappers.py):
    # a stream scope on it switches nothing
    at_current: tuple[str, ...] = ()

    @property
    def role(self) -> Role:
        return self.spec.role

    @property
    def family(self) -> apis.Family | None:
        return self.spec.family

    def arg(self, param: str) -> cst.BaseExpression | None:
        """The argument written at this call site for an API parameter (None if not written here)."""
        return self.bind.get(param)

    def value(self, param: str) -> cst.BaseExpression | None:
        """The call-site argument, or the constant a wrapper passes (which may live in another file)."""
        return self.bind.get(param) or self.constants.get(param)

    @property
    def node(self) -> cst.Call:
        return self.site.node


@dataclass(frozen=True)
class ScopeUse:
    """A classified `with` item: which API it opens (one entry per dispatch variant)."""

    site: ScopeSite
    file: FileModel
    uses: tuple[ApiUse, ...]

    def roles(self) -> set[Role]:
        return {u.role for u in self.uses}


def bind_arguments(
    params: tuple[str, ...], call: cst.Call, kwonly: tuple[str, ...] = ()
) -> dict[str, cst.BaseExpression | None]:
    """Map parameter names to the argument expressions of a call (no defaults)."""
    bound: dict[str, cst.BaseExpression | None] = {}
    positional = [p for p in params if p not in kwonly]
    index = 0
    for arg in call.args:
        if arg.star:
            break
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg.value
        elif index < len(positional):
            bound[positional[index]] = arg.value
            index += 1
    return bound


__all__ = ["ApiUse", "ScopeUse", "bind_arguments"]
