"""The dashboard bench's table, for the terminal and in Markdown for bench/RESULTS.md, and
what fails the run."""

from __future__ import annotations

from jobqueue.bench.dashboard.run import Result
from jobqueue.bench.dashboard.timing import Timed

_HEADER = ("URL", "route", "status", "server p50", "server p95", "server max", "round trip p95")


def _row(timed: Timed, budget_ms: float) -> tuple[str, ...]:
    statuses = sorted(set(timed.statuses))
    over = " (over)" if timed.server.p95_ms > budget_ms else ""
    return (
        timed.target.url,
        timed.target.label,
        ",".join(str(status) for status in statuses),
        f"{timed.server.p50_ms:.1f}",
        f"{timed.server.p95_ms:.1f}{over}",
        f"{timed.server.max_ms:.1f}",
        f"{timed.round_trip.p95_ms:.1f}",
    )


def _heading(result: Result, budget_ms: float) -> str:
    filled = "reused from an earlier run" if result.reused else "filled by this run"
    return (
        f"{result.dataset.describe()} ({result.table_size}, {filled}; {result.source}). "
        f"{result.requests} timed requests per URL, one at a time; times in ms; server time "
        f"from the access log, round trip from the bench's keep-alive client; budget: "
        f"server p95 ≤ {budget_ms:g} ms."
    )


def terminal(result: Result, budget_ms: float) -> str:
    rows = [_HEADER, *(_row(timed, budget_ms) for timed in result.timed)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    numeric = range(3, len(_HEADER))
    lines = [
        "  ".join(
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    return "\n".join([_heading(result, budget_ms), "", *lines])


def markdown(result: Result, budget_ms: float) -> str:
    def line(cells: tuple[str, ...]) -> str:
        escaped = (cell.replace("|", "\\|") for cell in cells)
        return "| " + " | ".join(escaped) + " |"

    rows = [
        line(tuple(f"`{cell}`" if i == 0 else cell for i, cell in enumerate(_row(t, budget_ms))))
        for t in result.timed
    ]
    alignment = "|---|---|---|" + "---:|" * (len(_HEADER) - 3)
    return "\n".join([_heading(result, budget_ms), "", line(_HEADER), alignment, *rows]) + "\n"


def problems(result: Result, budget_ms: float) -> list[str]:
    """What fails the run: a URL answering anything but 2xx, or over budget at p95."""
    found = []
    for timed in result.timed:
        if timed.failed:
            statuses = sorted(set(timed.statuses))
            found.append(f"{timed.target.url} answered {statuses}")
        if timed.server.p95_ms > budget_ms:
            found.append(
                f"{timed.target.url}: server time p95 {timed.server.p95_ms:.1f} ms, over "
                f"{budget_ms:g} ms"
            )
    return found
