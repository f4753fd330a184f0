"""One missing join seen from both of its ends: a thread's completion signal and the hand-back of the data.

A loader thread queues a copy on a stream of its own and signals the consumer (``filled.set()``) while the copy
may still run (a "signal" :class:`~streamlint.model.flow.results.HostRead`); the consumer's method waits for the
signal and hands the copied batch back to its caller with no join of that stream (a
:class:`~streamlint.model.flow.results.Race` whose producer is the thread's copy, a class protocol). One
synchronisation (the thread synchronising its stream before the signal, or the consumer joining it before the
hand-back) fixes both: it is one defect, reported once, at the hand-back where the data is used, with the signal
as a related location (issue 16: one missing wait, one finding at the join).

:func:`signals_of` pairs a race with the signals whose side-stream work (``HostRead.copy``, the scope the signal
is sent after) contains the race's producer, the same statement (a race whose producer is elsewhere, or a
signal about other work, stays apart)."""

from __future__ import annotations

from streamlint.model.syntax import descendants


def signal_reads(flows) -> list:
    """The "signal" host reads of ``flows`` (an iterable of (function, flow)), one per node."""
    found: dict[int, object] = {}
    for _fn, flow in flows:
        for read in flow.host_reads:
            if read.kind == "signal" and read.copy is not None:
                found.setdefault(id(read.node), read)
    return list(found.values())


def signals_of(race, signals: list) -> list:
    """The signals of ``signals`` sent after the very work that produced what ``race`` reads."""
    producer = race.producer
    if producer is None:
        return []
    return [read for read in signals
            if read.copy is producer or any(node is producer for node in descendants(read.copy))]
