"""The few user options the model reads, as one small frozen value (the CLI's ``Settings`` stays in
:mod:`streamlint.config`, above the model): the execution path to assume and the wrappers the user
declared by name."""

from __future__ import annotations

from dataclasses import dataclass


# A search for the callers of a function parses the files that may call it; past this many it gives up (the
# parameter keeps its unknown / default meaning), so linting one file never parses most of a large project
# for a common name (`forward`, `run`). Shared by the compile-target and the stream-parameter searches.
MAX_CALLER_FILES = 24


@dataclass(frozen=True)
class ModelOptions:
    mode: str = "auto"  # execution path for every file ("auto": from compile sites and API families)
    per_path_mode: tuple[tuple[str, str], ...] = ()  # (gitignore-style pattern, mode), first match wins
    stream_switch_wrappers: tuple[str, ...] = ()  # qualified names declared to open a stream scope
    wait_wrappers: tuple[str, ...] = ()  # qualified names declared to wait like npu_wait_tensor


__all__ = ["MAX_CALLER_FILES", "ModelOptions"]
