"""The run as tables for people, the ratios worth quoting, and the JSON for tools.

The tables are drawn by rich (already installed with Litestar, declared as a dependency of
its own since this imports it), rendered to plain text with no colour, so a report pasted
into a document or kept in a log reads the same as on the terminal.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobqueue.bench import baseline as earlier
from jobqueue.bench.baseline import FIGURES, Baseline, Compared
from jobqueue.bench.ratios import Ratio, ratios
from jobqueue.bench.results import Latency, Measurement, StartupTime, Throughput
from jobqueue.bench.runner import Run, seeded_rounds

NOISE_NOTE = (
    "These machines are shared and noisy: quote the ratios measured within one run, "
    "not absolute numbers, and never compare absolute numbers across runs."
)


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
        f"processes, {sizes.latency_samples} pickups per latency run, {sizes.wait_samples} "
        "waits per run of waits",
    ]
    for phase, table in seeded_rounds(sizes):
        if f"{phase}_table_size" in env:
            lines.append(
                f"{phase}: {table}, jobs table {env[f'{phase}_table_size']} "
                f"(built in {env[f'{phase}_seed_seconds']:.1f}s)"
            )
    lines += _graph_lines(run)
    lines += ["", NOISE_NOTE]
    measured = run.measurements
    tables = [
        startup_table([m for m in measured if isinstance(m.result, StartupTime)]),
        throughput_table([m for m in measured if isinstance(m.result, Throughput)]),
        latency_table([m for m in measured if _is_latency(m) and _kind(m) == "pickup"]),
        wait_table([m for m in measured if _is_latency(m) and _kind(m) == "wait"]),
        hop_table([m for m in measured if _is_latency(m) and _kind(m) == "graph"]),
        ratio_table(ratios(run)),
    ]
    # A table with no rows is of scenarios that did not run (`--only`).
    text = "\n".join(lines) + "\n" + "".join(_text(table) for table in tables if table.row_count)
    if baseline is not None:
        text += _against(run, baseline)
    return text.rstrip()


_TITLES = {
    "throughput": "Throughput against the baseline",
    "latency": "Latency (pickups, waits, hops) against the baseline",
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


def _is_latency(measurement: Measurement) -> bool:
    return isinstance(measurement.result, Latency)


def _kind(measurement: Measurement) -> str:
    """What a latency measures, by its name: a wait for a job's end (`wait.`), a hop
    between jobs of a graph (`graph.`), else a pickup."""
    kind = measurement.name.split(".", 1)[0]
    return kind if kind in {"wait", "graph"} else "pickup"


def _graph_lines(run: Run) -> list[str]:
    """How long the graphs' submissions took, when they ran: their inserts are no part of
    their figures, which start at the commit."""
    env, sizes = run.environment, run.sizes
    lines = []
    if "chain_submit_seconds" in env:
        lines.append(
            f"chain: {sizes.chain_jobs:,} jobs submitted as one graph in "
            f"{env['chain_submit_seconds']:.2f}s"
        )
    if "fan_submit_seconds" in env:
        jobs = sizes.fan_layers * sizes.fan_width + 1
        lines.append(
            f"fan: {jobs:,} jobs submitted as one graph in {env['fan_submit_seconds']:.2f}s "
            "(median)"
        )
    return lines


def latency_table(rows: Sequence[Measurement]) -> Table:
    return _latencies("Pickup latency, submission returned → handler started", rows)


def wait_table(rows: Sequence[Measurement]) -> Table:
    return _latencies(
        "Waits for a job's end, job ended → wait returned",
        rows,
        caption="From the job's finished_at (its ending's now()) to time.time() as the wait "
        "returned. Each job is waited for at once after its submission; its handler sleeps "
        "the time shown, then returns a result every answer is checked to carry.\nNo "
        "listening connection was lost during a run, so no wait fell back to reading its "
        "job every POLL_INTERVAL; a wait begun after its job ended is not counted.",
    )


def hop_table(rows: Sequence[Measurement]) -> Table:
    return _latencies(
        "Dependencies, a job's end → its dependent's start",
        rows,
        caption="From the finished_at of a job (its ending's now(), the statement whose "
        "trigger releases its dependent) to its dependent's started_at (its claim's now()), "
        "as stored. Every job completed once, and none started before a job it waits for "
        "ended.",
    )


def _latencies(title: str, rows: Sequence[Measurement], caption: str | None = None) -> Table:
    table = _table(title, ("samples", "p50 ms", "p95 ms", "p99 ms", "max ms"), caption=caption)
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
