"""The overview's charts, drawn on the server as SVG: throughput (completed, failed and
retried attempts per slot) and pickup latency (p50 and p95) over a window of the rollup.

Here are the scales and the paths, as plain values a unit test reads; the template
(`fragments/charts.html`) only writes them out, escaped like everything else, and the
stylesheet colours them (the page's policy forbids inline style, and the colours follow
the system's dark mode). No chart library: a few lines and two axes need none, and
the page stays readable as HTML without a script.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobqueue.domain.throughput import LAST_HOUR, Slot, Window

# The drawing's own coordinates (the viewBox); the stylesheet scales it to its box.
WIDTH = 480
HEIGHT = 210
# The plot's box: room on the left for the values, above for the unit, below for times.
LEFT, RIGHT, TOP, BOTTOM = 62, WIDTH - 14, 30, HEIGHT - 30

# Candidate ticks of the latency axis, in seconds, and how each reads.
_LATENCY_TICKS: tuple[tuple[float, str], ...] = (
    (0.001, "1 ms"),
    (0.01, "10 ms"),
    (0.1, "100 ms"),
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3600, "1 h"),
)
_QUANTILES = (("p50", 0.5), ("p95", 0.95))


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True, slots=True)
class Line:
    # Names the series in the legend and its CSS class (`chart-<key>`).
    key: str
    label: str
    # An SVG path: "M x y L x y …", a new "M" after each slot without a value.
    path: str
    # Values with no neighbour to join (a path of one point draws nothing): dots.
    dots: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Chart:
    id: str
    title: str
    # What the chart shows, in words: its SVG's <desc> and the line under it.
    summary: str
    unit: str
    lines: tuple[Line, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    # Said in the drawing when there is nothing to draw.
    empty: str | None
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = RIGHT
    top: int = TOP
    bottom: int = BOTTOM


def x_of(index: int, points: int) -> float:
    return LEFT + (RIGHT - LEFT) * (index / max(1, points - 1))


def nice_ceiling(value: float) -> float:
    """The smallest of 2, 5, 10, 20, 50, … at least `value`: the top of a count axis."""
    top = 2.0
    while top < value:
        top = top * 2.5 if str(int(top))[0] == "2" else top * 2
    return top


def _count(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _line(
    key: str, label: str, values: Sequence[float | None], y_of: Callable[[float], float]
) -> Line:
    """`values` as a path broken where a value is missing, and a dot for each value
    alone between two missing ones."""
    parts: list[str] = []
    dots: list[tuple[float, float]] = []
    for index, value in enumerate(values):
        if value is None:
            continue
        x, y = round(x_of(index, len(values)), 1), round(y_of(value), 1)
        joined = index > 0 and values[index - 1] is not None
        parts.append(f"{'L' if joined else 'M'}{x:.1f} {y:.1f}")
        if not joined and (index + 1 == len(values) or values[index + 1] is None):
            dots.append((x, y))
    return Line(key, label, " ".join(parts), tuple(dots))


def _x_ticks(slots: Sequence[Slot], window: Window) -> tuple[Tick, ...]:
    """A label every quarter hour over an hour, every six hours over a day (UTC)."""
    every = 15 if window == LAST_HOUR else 6 * 60

    def labelled(at: datetime) -> bool:
        return (at.hour * 60 + at.minute) % every == 0

    return tuple(
        Tick(x_of(index, len(slots)), f"{slot.at:%H:%M}")
        for index, slot in enumerate(slots)
        if labelled(slot.at)
    )


def _per(window: Window) -> str:
    minutes = int(window.step.total_seconds() // 60)
    return "minute" if minutes == 1 else f"{minutes} minutes"


def _subject(window: Window, queue: str | None) -> str:
    where = "every queue" if queue is None else f"queue {queue}"
    return f"last {window.name}, {where}"


def throughput_chart(slots: Sequence[Slot], window: Window, queue: str | None) -> Chart:
    """Completed, failed and retried attempts per slot, on a linear axis from zero."""
    series = (
        ("completed", "Completed", [float(slot.completed) for slot in slots]),
        ("failed", "Failed", [float(slot.failed) for slot in slots]),
        ("retried", "Retried", [float(slot.retried) for slot in slots]),
    )
    top = nice_ceiling(max((max(values, default=0) for _, _, values in series), default=0))

    def y_of(value: float) -> float:
        return BOTTOM - (BOTTOM - TOP) * value / top

    totals = {key: int(sum(values)) for key, _, values in series}
    summary = (
        f"{totals['completed']:,} completed, {totals['failed']:,} failed and "
        f"{totals['retried']:,} retried in the {_subject(window, queue)}"
    )
    busiest = max(slots, key=lambda slot: slot.completed, default=None)
    if busiest is not None and busiest.completed:
        summary += f"; most completed at {busiest.at:%H:%M} UTC ({busiest.completed:,})"
    return Chart(
        id=f"throughput-{window.name}",
        title=f"Throughput, {_subject(window, queue)}",
        summary=summary + ".",
        unit=f"attempts per {_per(window)}",
        lines=tuple(_line(key, label, values, y_of) for key, label, values in series),
        y_ticks=tuple(Tick(y_of(value), _count(value)) for value in (0, top / 2, top)),
        x_ticks=_x_ticks(slots, window),
        empty=None if any(totals.values()) else f"No attempt ended in the last {window.name}.",
    )


def latency_chart(slots: Sequence[Slot], window: Window, queue: str | None) -> Chart:
    """The p50 and p95 of how long jobs waited for a worker, per slot, on a log axis; a
    slot in which no job was picked up is a gap."""
    series = [(key, [slot.pickup_quantile(q) for slot in slots]) for key, q in _QUANTILES]
    floor = _LATENCY_TICKS[0][0]
    seen = [max(value, floor) for _, values in series for value in values if value is not None]
    low, high = _latency_range(min(seen, default=floor), max(seen, default=1.0))

    def y_of(value: float) -> float:
        share = (math.log10(max(value, floor)) - math.log10(low)) / (
            math.log10(high) - math.log10(low)
        )
        return BOTTOM - (BOTTOM - TOP) * share

    picked = sum(slot.picked for slot in slots)
    if picked:
        mean = sum(slot.pickup_seconds for slot in slots) / picked
        worst = max((value for value in series[1][1] if value is not None), default=0.0)
        summary = (
            f"{picked:,} jobs picked up in the {_subject(window, queue)}, after "
            f"{_seconds(mean)} on average; the highest p95 of a {_per(window)} "
            f"was {_seconds(worst)}."
        )
    else:
        summary = f"No job was picked up in the {_subject(window, queue)}."
    return Chart(
        id=f"latency-{window.name}",
        title=f"Pickup latency, {_subject(window, queue)}",
        summary=summary,
        unit="due to started",
        lines=tuple(_line(key, key, values, y_of) for key, values in series),
        y_ticks=tuple(Tick(y_of(at), label) for at, label in _LATENCY_TICKS if low <= at <= high),
        x_ticks=_x_ticks(slots, window),
        empty=None if picked else f"No job was picked up in the last {window.name}.",
    )


def _latency_range(lowest: float, highest: float) -> tuple[float, float]:
    """The ticks just below `lowest` and just above `highest`, at least two apart."""
    ticks = [at for at, _ in _LATENCY_TICKS]
    low = max((at for at in ticks if at <= lowest), default=ticks[0])
    high = min((at for at in ticks if at >= highest), default=ticks[-1])
    if low == high:
        index = ticks.index(low)
        low, high = (ticks[index - 1], low) if index else (low, ticks[1])
    return low, high


def _seconds(value: float) -> str:
    """A latency as an operator reads it: milliseconds below a second, then seconds."""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.0f} min"
