"""Clock and statistics for the benchmarks.

A side is a callable ``run(rep) -> seconds`` that does its own setup and teardown
outside the timed region and returns only the time of the work being measured.
``compare`` interleaves ownmem and the reference repetition by repetition, and
``per_item`` every few hundred items, so drift in the machine (thermal, a
neighbour's load) lands on both sides alike.
"""
from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Side = Callable[[int], float]


@dataclass(frozen=True, slots=True)
class Samples:
    """Timed repetitions of one side, in seconds (per repetition, not per object)."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def clock() -> float:
    return time.perf_counter()


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn`` takes; the collector is emptied first so one side does not pay
    for the other's garbage, and left on, because production code runs with it on."""
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def compare(own: Side, ref: Side, *, reps: int, warmup: bool = True) -> tuple[Samples, Samples]:
    """Run both sides ``reps`` times, alternating; one untimed warm-up of each first."""
    o, r = alternate([own, ref], reps=reps, warmup=warmup)
    return o, r


def alternate(sides: list[Side], *, reps: int, warmup: bool = True) -> list[Samples]:
    """Run every side ``reps`` times, in turn, so that drift lands on all of them."""
    if warmup:
        for side in sides:
            side(-1)
    runs: list[list[float]] = [[] for _ in sides]
    for i in range(reps):
        for side, out in zip(sides, runs, strict=True):
            out.append(side(i))
    return [Samples(tuple(r)) for r in runs]


@dataclass(frozen=True, slots=True)
class PerItem:
    """Per-item seconds for each side: per repetition, and per chunk (in the order timed)."""

    samples: list[Samples]
    chunks: list[tuple[float, ...]]

    def paired_ratio(self, a: int, b: int) -> float:
        """Median over chunks of side a's time / side b's time for the same chunk, timed back
        to back: a neighbour's load lands on both halves of a pair, so it cancels."""
        return statistics.median(x / y for x, y in zip(self.chunks[a], self.chunks[b], strict=True))


def per_item(work: list[Callable[[list[Any]], object]], make: list[Callable[[int], list[Any]]], *,
             items: int, reps: int, warmup: int, chunk: int = 100) -> PerItem:
    """Seconds per item for each side, alternating sides every ``chunk`` items.

    ``make[i](n)`` builds side i's n inputs (outside the clock: fresh keys, say) and
    ``work[i](items)`` processes them.  Alternating in small chunks rather than whole
    repetitions puts every side under the same conditions even on a busy machine.
    """
    for w, mk in zip(work, make, strict=True):
        w(mk(warmup))
    runs: list[list[float]] = [[] for _ in work]
    chunks: list[list[float]] = [[] for _ in work]
    for _ in range(reps):
        inputs = [mk(items) for mk in make]
        total = [0.0] * len(work)
        n = len(inputs[0])
        for lo in range(0, n, chunk):
            for i, w in enumerate(work):
                part = inputs[i][lo:lo + chunk]
                dt = timed(lambda w=w, part=part: w(part))
                total[i] += dt
                chunks[i].append(dt / len(part))
        for i in range(len(work)):
            runs[i].append(total[i] / n)
    return PerItem([Samples(tuple(r)) for r in runs], [tuple(c) for c in chunks])


def repeat(side: Side, *, reps: int, warmup: bool = True) -> Samples:
    if warmup:
        side(-1)
    return Samples(tuple(side(i) for i in range(reps)))
