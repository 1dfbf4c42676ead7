"""The run as a table for people, the ratios worth quoting, and the JSON for tools."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.results import Latency, Measurement, StartupTime, Throughput
from bench.runner import Run

NOISE_NOTE = (
    "These machines are shared and noisy: quote the ratios measured within one run, "
    "not absolute numbers, and never compare absolute numbers across runs."
)


@dataclass(frozen=True, slots=True)
class Ratio:
    name: str
    label: str
    value: float


def ratios(run: Run) -> list[Ratio]:
    """The comparisons the design cares about, for whichever measurements the run has."""
    found = {each.name: each.result for each in run.measurements}

    def rate(name: str) -> float:
        result = found[name]
        assert isinstance(result, Throughput)
        return result.per_second

    def p50(name: str) -> float:
        result = found[name]
        assert isinstance(result, Latency)
        return result.p50_ms

    def p99(name: str) -> float:
        result = found[name]
        assert isinstance(result, Latency)
        return result.p99_ms

    lowest, highest = min(run.sizes.submitters), max(run.sizes.submitters)
    history = f"{run.sizes.finished_rows:,} finished rows vs empty"
    slowdown = "slowdown factor, 1.00 = none"
    candidates: list[tuple[str, str, Callable[[], float], tuple[str, ...]]] = [
        (
            f"enqueue_single_c{highest}_vs_c{lowest}",
            f"enqueue, submit(): {highest} submitters vs {lowest} (throughput)",
            lambda: rate(f"enqueue.single.c{highest}") / rate(f"enqueue.single.c{lowest}"),
            (f"enqueue.single.c{highest}", f"enqueue.single.c{lowest}"),
        ),
        (
            f"enqueue_bulk_vs_single_c{lowest}",
            f"enqueue: enqueue() batches vs submit() with {lowest} submitter (throughput)",
            lambda: rate("enqueue.bulk.in_transaction") / rate(f"enqueue.single.c{lowest}"),
            ("enqueue.bulk.in_transaction", f"enqueue.single.c{lowest}"),
        ),
        (
            "enqueue_multirow_vs_in_transaction",
            "enqueue: enqueue_many() vs enqueue() batches (throughput)",
            lambda: rate("enqueue.bulk.many") / rate("enqueue.bulk.in_transaction"),
            ("enqueue.bulk.many", "enqueue.bulk.in_transaction"),
        ),
        (
            "drain_2pools_vs_1pool",
            "drain: 2 pools vs 1, empty table (throughput)",
            lambda: rate("drain.empty.2pools") / rate("drain.empty.1pool"),
            ("drain.empty.2pools", "drain.empty.1pool"),
        ),
        (
            "pickup_poll_vs_wake_p50",
            "pickup p50: polling only vs wake(), empty table (latency)",
            lambda: p50("pickup.empty.poll") / p50("pickup.empty.wake"),
            ("pickup.empty.poll", "pickup.empty.wake"),
        ),
        (
            "pickup_poll_vs_wake_p99",
            "pickup p99: polling only vs wake(), empty table (latency)",
            lambda: p99("pickup.empty.poll") / p99("pickup.empty.wake"),
            ("pickup.empty.poll", "pickup.empty.wake"),
        ),
        (
            "drain_history_vs_empty_1pool",
            f"drain, 1 pool: {history} ({slowdown})",
            lambda: rate("drain.empty.1pool") / rate("drain.history.1pool"),
            ("drain.empty.1pool", "drain.history.1pool"),
        ),
        (
            "drain_history_vs_empty_2pools",
            f"drain, 2 pools: {history} ({slowdown})",
            lambda: rate("drain.empty.2pools") / rate("drain.history.2pools"),
            ("drain.empty.2pools", "drain.history.2pools"),
        ),
        (
            "pickup_wake_history_vs_empty_p50",
            f"pickup p50 with wake(): {history} ({slowdown})",
            lambda: p50("pickup.history.wake") / p50("pickup.empty.wake"),
            ("pickup.history.wake", "pickup.empty.wake"),
        ),
        (
            "pickup_poll_history_vs_empty_p50",
            f"pickup p50 polling only: {history} ({slowdown})",
            lambda: p50("pickup.history.poll") / p50("pickup.empty.poll"),
            ("pickup.history.poll", "pickup.empty.poll"),
        ),
    ]
    return [
        Ratio(name, label, compute())
        for name, label, compute, needs in candidates
        if all(each in found for each in needs)
    ]


def as_json(run: Run) -> dict[str, Any]:
    return {
        "environment": run.environment,
        "settings": run.settings(),
        "metrics": {
            each.name: {"label": each.label, **each.result.as_json()} for each in run.measurements
        },
        "ratios": {each.name: each.value for each in ratios(run)},
        "note": NOISE_NOTE,
    }


def render(run: Run) -> str:
    env = run.environment
    sizes = run.sizes
    lines = [
        f"jobqueue benchmark: PostgreSQL {env['postgresql']} ({env['database_source']}), "
        f"{env['cpu_count']} CPU cores, Python {env['python']}, "
        f"jobqueue from {env['jobqueue_package']}",
        f"fsync={env['fsync']} synchronous_commit={env['synchronous_commit']} "
        f"shared_buffers={env['shared_buffers']}; {sizes.jobs:,} jobs per run, "
        f"{sizes.workers} workers per pool, {sizes.latency_samples} pickups per latency run",
    ]
    if "history_table_size" in env:
        lines.append(
            f"history: {sizes.finished_rows:,} finished rows, jobs table "
            f"{env['history_table_size']} (built in {env['history_seed_seconds']:.1f}s)"
        )
    lines += ["", NOISE_NOTE, ""]
    lines += _startup_table([m for m in run.measurements if isinstance(m.result, StartupTime)])
    lines += [""]
    lines += _throughput_table([m for m in run.measurements if isinstance(m.result, Throughput)])
    lines += [
        "client CPU: this process's CPU time over wall time (100% = one core busy all along);",
        "near 100%, Python in the benchmark process, not PostgreSQL, set the pace.",
        "",
    ]
    lines += _latency_table([m for m in run.measurements if isinstance(m.result, Latency)])
    lines += ["", "Ratios (from this run)"]
    found = ratios(run)
    width = max((len(each.label) for each in found), default=0)
    lines += [f"  {each.label.ljust(width)}  {each.value:7.2f}×" for each in found]
    return "\n".join(lines)


def _startup_table(rows: list[Measurement]) -> list[str]:
    title = "Start-up, spawn → first handler call"
    width = max([len(title)] + [len(row.label) for row in rows])
    columns = ("runs", "median ms", "min ms", "max ms")
    lines = [title.ljust(width) + "".join(f"  {column:>9}" for column in columns)]
    for row in rows:
        result = row.result
        assert isinstance(result, StartupTime)
        values = (result.median_ms, result.min_ms, result.max_ms)
        lines.append(
            f"{row.label.ljust(width)}  {result.runs:>9}"
            + "".join(f"  {value:>9.0f}" for value in values)
        )
    return lines


def _throughput_table(rows: list[Measurement]) -> list[str]:
    width = max([len("Throughput")] + [len(row.label) for row in rows])
    lines = [
        f"{'Throughput'.ljust(width)}  {'jobs':>9}  {'seconds':>8}  {'jobs/s':>9}"
        f"  {'client CPU':>10}"
    ]
    for row in rows:
        result = row.result
        assert isinstance(result, Throughput)
        lines.append(
            f"{row.label.ljust(width)}  {result.jobs:>9,}  {result.seconds:>8.2f}  "
            f"{result.per_second:>9,.0f}  {result.client_cpu_share:>10.0%}"
        )
    return lines


def _latency_table(rows: list[Measurement]) -> list[str]:
    title = "Pickup latency, submit returned → handler started"
    width = max([len(title)] + [len(row.label) for row in rows])
    columns = ("samples", "p50 ms", "p95 ms", "p99 ms", "max ms")
    lines = [title.ljust(width) + "".join(f"  {column:>8}" for column in columns)]
    for row in rows:
        result = row.result
        assert isinstance(result, Latency)
        values = (result.p50_ms, result.p95_ms, result.p99_ms, result.max_ms)
        lines.append(
            f"{row.label.ljust(width)}  {result.samples:>8}"
            + "".join(f"  {value:>8.1f}" for value in values)
        )
    return lines
