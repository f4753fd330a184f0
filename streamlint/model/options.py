"""The few user options the model reads, as one small frozen value (the CLI's ``Settings`` stays in
:mod:`streamlint.config`, above the model): the execution path to assume and the wrappers the user
declared by name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelOptions:
    mode: str = "auto"  # execution path for every file ("auto": from compile sites and API families)
    per_path_mode: tuple[tuple[str, str], ...] = ()  # (gitignore-style pattern, mode), first match wins
    stream_switch_wrappers: tuple[str, ...] = ()  # qualified names declared to open a stream scope
    wait_wrappers: tuple[str, ...] = ()  # qualified names declared to wait like npu_wait_tensor


__all__ = ["ModelOptions"]
