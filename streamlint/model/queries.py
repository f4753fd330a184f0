"""What the project-fact modules (wrappers, compile sites, execution paths) may ask of the project.

:class:`~streamlint.model.project.Project` answers these questions and is built on those modules, so
they name the questions through this protocol instead of importing ``Project`` back: imports point
one way. :class:`ExecutionPath` is the value the path question returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Protocol

from streamlint.finding import Location

if TYPE_CHECKING:
    from pathlib import Path

    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import CallSite, FunctionInfo, ScopeSite
    from streamlint.model.options import ModelOptions
    from streamlint.model.uses import ApiUse, ScopeUse


@dataclass(frozen=True)
class ExecutionPath:
    modes: frozenset[str]  # empty: unknown
    source: str  # "config" | "compile" | "family" | "unknown"
    evidence: tuple[Location, ...] = ()

    @property
    def unknown(self) -> bool:
        return not self.modes

    def describe(self) -> str:
        if self.unknown:
            return "unknown execution path"
        return "/".join(sorted(self.modes)) + f" (from {self.source})"


class ProjectQueries(Protocol):
    """The part of the project index that wrapper, compile-site and execution-path inference use."""

    options: ModelOptions
    root: Path

    def file(self, path: str) -> FileModel | None: ...
    def all_files(self) -> list[str]: ...
    def may_contain(self, path: str, markers: tuple[bytes, ...]) -> bool: ...
    def files_containing(self, markers: tuple[bytes, ...], report_progress: bool = False) -> Iterator[FileModel]: ...
    def compiling_files(self) -> Iterator[FileModel]: ...
    def compiling_paths(self) -> list: ...
    def paths_containing(self, markers: tuple[bytes, ...]) -> list[str]: ...
    def file_bytes(self, path: str) -> bytes | None: ...
    def module_name(self, path: str) -> tuple[str, bool, str]: ...
    def files_calling(self, name: str) -> Iterator[FileModel]: ...
    def relative(self, path: str) -> str: ...
    def note_wide_read(self) -> None: ...
    def derived(self, topic: str) -> dict: ...
    def symbol(self, qualname: str, context: FileModel | None, _depth: int = 0): ...
    def function(self, qualname: str | None, context: FileModel | None) -> tuple[FunctionInfo, FileModel] | None: ...
    def wrapper(self, fn: FunctionInfo, file: FileModel) -> object | None: ...
    def api_uses(self, file: FileModel, site: CallSite) -> tuple[ApiUse, ...]: ...
    def scope_use(self, file: FileModel, site: ScopeSite) -> ScopeUse: ...
    def reachable(self, roots: Iterable[tuple[FunctionInfo, FileModel]], limit: int = 2000) \
        -> list[tuple[FunctionInfo, FileModel]]: ...
    def execution_path(self, file: FileModel, fn: FunctionInfo | None) -> ExecutionPath: ...


__all__ = ["ExecutionPath", "ProjectQueries"]
