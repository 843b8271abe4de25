"""Where an evaluation runs: on the event loop while evaluations are quick, in a thread once not.

A hand-off to a thread costs 0.1-0.25 ms of CPU (measured on the broad admission load: a third of
the webhook's own cost per request besides the evaluation), and while the thread holds the GIL
the loop waits for it up to the interpreter's switch interval anyway. So a thread only keeps the
loop responsive for evaluations longer than that interval; shorter ones run in place. Which kind
the next one is comes from a running estimate of the last ones' durations, and only a candidate of a
usual size runs in place: anyone who reaches the port can send a 3 MiB overlay whose evaluation takes
seconds, and in place it would stall every other connection and the probes for that long.

The estimate is of the evaluations' wall time, read in the thread that ran them (the hand-off and the wait
for a worker left out). On a loaded machine an evaluation that waited for a core then sends the next ones to a
thread: the loop goes on reading, answering and encrypting the other connections' requests while one is judged,
and the webhook kept more of its core's time against the other processes on it. Estimated by CPU time, which
kept every evaluation on the loop, the row-5 load at concurrency 16 beside memory-bound neighbours on both
cores ran at 0.75-0.79 of the admissions/s of the same code estimating by wall time, at the same p99
(docs/performance.md "Row 5 after the sixth pass").
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Any

from simulation import evaluate as ev
from webhook import admission

# Evaluations run on the loop while the estimate stays under this.
INLINE_SECONDS = sys.getswitchinterval()
# Candidates with more JSON items than this (a usual NodeOverlay has a few dozen) always run in a thread.
INLINE_ITEMS = 512
# The latest evaluation's weight in the estimate: one slow evaluation moves the next few to a
# thread, a handful of quick ones bring them back.
ESTIMATE_WEIGHT = 0.25


class Judge:
    def __init__(self) -> None:
        self.estimate = 0.0

    def inline(self, candidate: Mapping[str, Any], small: bool = False) -> bool:
        """Whether the candidate's evaluation runs on the loop (module docstring). `small`: the candidate came in a
        body `few_items` vouches for, so it is usual without being counted."""
        return self.estimate < INLINE_SECONDS and (small or usual(candidate))

    def here(self, prepared: ev.Prepared, candidate: Mapping[str, Any], extras: tuple[Mapping[str, Any], ...],
             held: Mapping[str, ev.Checked]) -> ev.Report:
        """admission.judge on the loop, where `inline` says so."""
        return self._learned(*_timed(prepared, candidate, extras, held))

    async def elsewhere(self, prepared: ev.Prepared, candidate: Mapping[str, Any],
                        extras: tuple[Mapping[str, Any], ...], held: Mapping[str, ev.Checked]) -> ev.Report:
        """admission.judge in a thread, where `inline` says not on the loop."""
        return self._learned(*await asyncio.to_thread(_timed, prepared, candidate, extras, held))

    def _learned(self, report: ev.Report, seconds: float) -> ev.Report:
        self.estimate += (seconds - self.estimate) * ESTIMATE_WEIGHT
        return report


def _timed(prepared: ev.Prepared, candidate: Mapping[str, Any], extras: tuple[Mapping[str, Any], ...],
           held: Mapping[str, ev.Checked]) -> tuple[ev.Report, float]:
    """admission.judge and the wall time it took, read in the thread that ran it."""
    started = time.perf_counter()
    report = admission.judge(prepared, candidate, extras, held)
    return report, time.perf_counter() - started


def usual(candidate: Mapping[str, Any]) -> bool:
    """Whether the candidate has at most INLINE_ITEMS items (containers' members, and a string per 64
    characters), counted only that far so that a huge one costs no more than a usual one to size."""
    budget = INLINE_ITEMS
    stack: list[Any] = [candidate]
    while stack:
        value = stack.pop()
        # Decoded JSON holds dicts and lists: their exact types are tested first, the abstract Mapping
        # (an isinstance of an ABC costs several times as much) only for anything else.
        members = value.values() if type(value) is dict or isinstance(value, Mapping) else value
        budget -= len(value)
        if budget < 0:
            return False
        for member in members:
            kind = type(member)
            if kind is str:
                budget -= len(member) // 64
            elif kind is dict or kind is list or isinstance(member, Mapping):
                stack.append(member)
        if budget < 0:
            return False
    return True


# Items review.candidate may add to request.object: kind, apiVersion, metadata and its name.
ADDED_ITEMS = 4


def few_items(body: bytes) -> bool:
    """Whether `usual` holds for the candidate of any AdmissionReview sent as `body`, told from the body's bytes
    (counted in C, at a fraction of the cost of walking the candidate) by an upper bound on what `usual` counts.
    Every member of a JSON array or object but the first follows a comma, the first follows the opening bracket;
    a string of n characters takes at least n bytes, and the candidate's strings are the body's or copies of them
    (its kind, apiVersion and name: under twice the body's bytes in all). Commas and brackets inside strings,
    and the review's other parts, only raise the bound."""
    strings = (2 * len(body) + 64) // 64
    if strings > INLINE_ITEMS:
        # The bound fails on the strings alone: a large body costs nothing more to refuse.
        return False
    members = len(body) - len(body.translate(None, b",[{")) + ADDED_ITEMS
    return members + strings <= INLINE_ITEMS
