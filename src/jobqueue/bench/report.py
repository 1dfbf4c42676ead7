"""The run as tables for people, the ratios worth quoting, and the JSON for tools.

The tables are drawn by rich (already installed with Litestar, declared as a dependency of
its own since this imports it), rendered to plain text with no colour, so a report pasted
into a document or kept in a log reads the same as on the terminal.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobqueue.bench import baseline as earlier
from jobqueue.bench.baseline import FIGURES, Baseline, Compared
from jobqueue.bench.results import Latency, Measurement, StartupTime, Throughput
from jobqueue.bench.runner import Run, seeded_rounds

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

    def cpu_per_job(name: str) -> float:
        result = found[name]
        assert isinstance(result, Throughput)
        assert result.service_cpu_per_job_us is not None
        return result.service_cpu_per_job_us

    def rate_ratio(top: str, bottom: str) -> float:
        return rate(top) / rate(bottom)

    def p50_ratio(top: str, bottom: str) -> float:
        return p50(top) / p50(bottom)

    def cpu_ratio(top: str, bottom: str) -> float:
        return cpu_per_job(top) / cpu_per_job(bottom)

    def has_cpu(name: str) -> bool:
        # Zero: the run took less than one clock tick of it, too little to compare.
        result = found.get(name)
        return isinstance(result, Throughput) and bool(result.service_cpu_seconds)

    lowest, highest = min(run.sizes.submitters), max(run.sizes.submitters)
    most = max(run.sizes.http_batch_clients)
    single_http = f"enqueue.http.c{run.sizes.http_clients}"
    batch_http = f"enqueue.http_batch.c{most}"
    slowdown = "slowdown factor, 1.00 = none"
    candidates: list[tuple[str, str, Callable[[], float], tuple[str, ...]]] = [
        (
            f"enqueue_single_c{highest}_vs_c{lowest}",
            f"enqueue(engine): {highest} submitters vs {lowest} (throughput)",
            lambda: rate(f"enqueue.single.c{highest}") / rate(f"enqueue.single.c{lowest}"),
            (f"enqueue.single.c{highest}", f"enqueue.single.c{lowest}"),
        ),
        (
            f"enqueue_bulk_vs_single_c{lowest}",
            f"enqueue: enqueue() batches vs enqueue(engine), {lowest} submitter (throughput)",
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
            f"enqueue_http_vs_single_c{highest}",
            f"enqueue: POST /jobs vs enqueue(engine), {run.sizes.http_clients} clients vs "
            f"{highest} submitters (throughput)",
            lambda: (
                rate(f"enqueue.http.c{run.sizes.http_clients}") / rate(f"enqueue.single.c{highest}")
            ),
            (f"enqueue.http.c{run.sizes.http_clients}", f"enqueue.single.c{highest}"),
        ),
        (
            f"enqueue_http_batch_c{most}_vs_many",
            f"enqueue: POST /jobs/batch, {most} clients, vs enqueue_many() (throughput)",
            partial(rate_ratio, batch_http, "enqueue.bulk.many"),
            (batch_http, "enqueue.bulk.many"),
        ),
        (
            f"enqueue_http_batch_c{most}_vs_http_c{run.sizes.http_clients}",
            f"enqueue: POST /jobs/batch vs POST /jobs, {most} vs {run.sizes.http_clients} "
            "clients (throughput)",
            partial(rate_ratio, batch_http, single_http),
            (batch_http, single_http),
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
    ]
    # Each seeded round against the empty table, as slowdowns: empty's rate over the
    # round's, the round's latency over empty's. partial, not lambda: a lambda would read
    # `phase` when called, after the loop, and see only the last one.
    for phase, table in seeded_rounds(run.sizes):
        versus = f"{table} vs empty"
        candidates += [
            (
                f"drain_{phase}_vs_empty_1pool",
                f"drain, 1 pool: {versus} ({slowdown})",
                partial(rate_ratio, "drain.empty.1pool", f"drain.{phase}.1pool"),
                ("drain.empty.1pool", f"drain.{phase}.1pool"),
            ),
            (
                f"drain_{phase}_vs_empty_2pools",
                f"drain, 2 pools: {versus} ({slowdown})",
                partial(rate_ratio, "drain.empty.2pools", f"drain.{phase}.2pools"),
                ("drain.empty.2pools", f"drain.{phase}.2pools"),
            ),
            (
                f"pickup_wake_{phase}_vs_empty_p50",
                f"pickup p50 with wake(): {versus} ({slowdown})",
                partial(p50_ratio, f"pickup.{phase}.wake", "pickup.empty.wake"),
                (f"pickup.{phase}.wake", "pickup.empty.wake"),
            ),
            (
                f"pickup_poll_{phase}_vs_empty_p50",
                f"pickup p50 polling only: {versus} ({slowdown})",
                partial(p50_ratio, f"pickup.{phase}.poll", "pickup.empty.poll"),
                (f"pickup.{phase}.poll", "pickup.empty.poll"),
            ),
        ]
    if has_cpu(batch_http) and has_cpu(single_http):
        candidates.append(
            (
                f"enqueue_cpu_per_job_http_batch_c{most}_vs_http_c{run.sizes.http_clients}",
                f"enqueue: API CPU per job, POST /jobs/batch vs POST /jobs, {most} vs "
                f"{run.sizes.http_clients} clients",
                partial(cpu_ratio, batch_http, single_http),
                (batch_http, single_http),
            )
        )
    for fewer, more in pairwise(run.sizes.processes):
        top, bottom = f"drain.processes.{more}", f"drain.processes.{fewer}"
        candidates.append(
            (
                f"drain_{more}procs_vs_{fewer}procs",
                f"drain: {more} worker processes vs {fewer} (throughput)",
                partial(rate_ratio, top, bottom),
                (top, bottom),
            )
        )
        if has_cpu(top) and has_cpu(bottom):
            candidates.append(
                (
                    f"drain_cpu_per_job_{more}procs_vs_{fewer}procs",
                    f"drain: worker CPU per job, {more} processes vs {fewer}",
                    partial(cpu_ratio, top, bottom),
                    (top, bottom),
                )
            )
    candidates.append(
        (
            "pickup_process_http_vs_enqueue_p99",
            "pickup p99 into a worker process: POST /jobs vs enqueue(engine) (latency)",
            lambda: p99("pickup.process.http") / p99("pickup.process.enqueue"),
            ("pickup.process.http", "pickup.process.enqueue"),
        )
    )
    return [
        Ratio(name, label, compute())
        for name, label, compute, needs in candidates
        if all(each in found for each in needs)
    ]


def as_json(run: Run, baseline: Baseline | None = None) -> dict[str, Any]:
    found = {
        "environment": run.environment,
        "settings": run.settings(),
        "metrics": metrics(run),
        "ratios": {each.name: each.value for each in ratios(run)},
        "note": NOISE_NOTE,
    }
    if baseline is not None:
        found["baseline"] = earlier.as_json(earlier.compare(metrics(run), baseline), baseline)
    return found


def metrics(run: Run) -> dict[str, dict[str, Any]]:
    """Every figure as the JSON holds it: also what a baseline's figures are matched with."""
    return {each.name: {"label": each.label, **each.result.as_json()} for each in run.measurements}


# Wide enough that no table ever wraps: a table takes only the width it needs.
_WIDTH = 400


def render(run: Run, baseline: Baseline | None = None) -> str:
    """The report; with `baseline`, followed by this run's figures against that one's."""
    env = run.environment
    sizes = run.sizes
    lines = [
        f"jobqueue benchmark: PostgreSQL {env['postgresql']} ({env['database_source']}), "
        f"{env['cpu_count']} CPU cores, Python {env['python']}, "
        f"jobqueue from {env['jobqueue_package']}",
        f"fsync={env['fsync']} synchronous_commit={env['synchronous_commit']} "
        f"shared_buffers={env['shared_buffers']}; {sizes.jobs:,} jobs per run, "
        f"{sizes.workers} workers per pool, {sizes.drain_jobs:,} jobs per drain with worker "
        f"processes, {sizes.latency_samples} pickups per latency run",
    ]
    for phase, table in seeded_rounds(sizes):
        if f"{phase}_table_size" in env:
            lines.append(
                f"{phase}: {table}, jobs table {env[f'{phase}_table_size']} "
                f"(built in {env[f'{phase}_seed_seconds']:.1f}s)"
            )
    lines += ["", NOISE_NOTE]
    measured = run.measurements
    tables = [
        startup_table([m for m in measured if isinstance(m.result, StartupTime)]),
        throughput_table([m for m in measured if isinstance(m.result, Throughput)]),
        latency_table([m for m in measured if isinstance(m.result, Latency)]),
        ratio_table(ratios(run)),
    ]
    text = "\n".join(lines) + "\n" + "".join(_text(table) for table in tables)
    if baseline is not None:
        text += _against(run, baseline)
    return text.rstrip()


_TITLES = {
    "throughput": "Throughput against the baseline",
    "latency": "Pickup latency against the baseline",
    "startup": "Start-up against the baseline",
}
_AGAINST_NOTE = (
    "ratio: this run's figure over the baseline's, so above 1.00 is faster for jobs/s and "
    "slower for µs/job and ms; – where a run lacks the scenario or the figure. Across runs "
    "the machine's load moves every figure: believe a change that repeats, not one run's."
)


def _against(run: Run, baseline: Baseline) -> str:
    """This run set against `baseline`: what the baseline was, then one table per kind."""
    env = baseline.environment
    lines = [
        "",
        f"Baseline: {baseline.path} (jobqueue from {env.get('jobqueue_package', '?')}, "
        f"PostgreSQL {env.get('postgresql', '?')})",
    ]
    differing = earlier.differing_settings(run.settings(), baseline)
    if differing:
        lines.append("settings that differ (baseline → this run): " + "; ".join(differing))
    lines.append(_AGAINST_NOTE)
    compared = earlier.compare(metrics(run), baseline)
    tables = [
        against_table(
            _TITLES[kind], FIGURES[kind], [each for each in compared if each.kind == kind]
        )
        for kind in FIGURES
        if any(each.kind == kind for each in compared)
    ]
    return "\n".join(lines) + "\n" + "".join(_text(table) for table in tables)


def against_table(title: str, figures: Sequence[earlier.Figure], rows: Sequence[Compared]) -> Table:
    """Each figure as baseline, this run, and the ratio, side by side."""
    headers = [
        header
        for figure in figures
        for header in (f"{figure.header} before", f"{figure.header} now", "ratio")
    ]
    table = _table(title, headers)
    for row in rows:
        cells = []
        for figure, pair in zip(figures, row.pairs, strict=True):
            cells += [
                _figure(pair.before, figure.digits),
                _figure(pair.now, figure.digits),
                _figure(pair.ratio, 2, "×"),
            ]
        table.add_row(Text(row.label), *cells)
    return table


def _figure(value: float | None, digits: int, unit: str = "") -> str:
    return "–" if value is None else f"{value:,.{digits}f}{unit}"


def startup_table(rows: Sequence[Measurement]) -> Table:
    table = _table(
        "Start-up, spawn → first handler call", ("runs", "median ms", "min ms", "max ms")
    )
    for row in rows:
        result = row.result
        assert isinstance(result, StartupTime)
        values = (result.median_ms, result.min_ms, result.max_ms)
        table.add_row(Text(row.label), f"{result.runs}", *(f"{value:.0f}" for value in values))
    return table


def throughput_table(rows: Sequence[Measurement]) -> Table:
    table = _table(
        "Throughput",
        ("jobs", "seconds", "jobs/s", "client CPU", "service CPU s", "µs/job"),
        caption="client CPU: this process's CPU time over wall time (100% = one core busy all "
        "along); near 100%, Python in the benchmark, not PostgreSQL, set the pace.\n"
        "service CPU: the jobqueue api or worker processes' CPU time during the run, added "
        "up, and per job.",
    )
    for row in rows:
        result = row.result
        assert isinstance(result, Throughput)
        service = result.service_cpu_seconds
        per_job = result.service_cpu_per_job_us
        table.add_row(
            Text(row.label),
            f"{result.jobs:,}",
            f"{result.seconds:.2f}",
            f"{result.per_second:,.0f}",
            f"{result.client_cpu_share:.0%}",
            "–" if service is None else f"{service:.2f}",
            "–" if per_job is None else f"{per_job:,.0f}",
        )
    return table


def latency_table(rows: Sequence[Measurement]) -> Table:
    table = _table(
        "Pickup latency, submission returned → handler started",
        ("samples", "p50 ms", "p95 ms", "p99 ms", "max ms"),
    )
    for row in rows:
        result = row.result
        assert isinstance(result, Latency)
        values = (result.p50_ms, result.p95_ms, result.p99_ms, result.max_ms)
        table.add_row(Text(row.label), f"{result.samples}", *(f"{value:.1f}" for value in values))
    return table


def ratio_table(found: Sequence[Ratio]) -> Table:
    table = _table("Ratios (from this run)", ("ratio",), first="comparison")
    for each in found:
        table.add_row(Text(each.label), f"{each.value:.2f}×")
    return table


def _table(
    title: str, numbers: Sequence[str], *, caption: str | None = None, first: str = "scenario"
) -> Table:
    """A table whose first column (`first`) names each row and whose others hold `numbers`."""
    table = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column(first, justify="left")
    for header in numbers:
        table.add_column(header, justify="right")
    return table


def _text(table: Table) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=_WIDTH, color_system=None, highlight=False, emoji=False, markup=False
    )
    console.print()
    console.print(table)
    # Rich pads every line to the table's width; a report has no use for the spaces.
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
