"""`jobqueue bench`: its options, the sizes they choose, and the run, printed and saved.

`jobqueue`'s own parser hands everything after `bench` to `parse_options` here, so that
nothing of the benchmark is imported by the other commands (a worker's start-up counts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from jobqueue.bench.baseline import Baseline
from jobqueue.bench.baseline import load as load_baseline
from jobqueue.bench.errors import BenchError
from jobqueue.bench.sizes import (
    DEFAULT_SIZES,
    QUICK_SIZES,
    SCENARIOS,
    Sizes,
    parse_processes,
    parse_scenarios,
)
from jobqueue.domain.errors import JobQueueError
from jobqueue.entrypoints.service import exit_codes

# The subcommand timing the dashboard's pages (`bench/dashboard/`).
DASHBOARD = "dashboard"

DESCRIPTION = textwrap.fill(
    "Benchmark jobqueue on PostgreSQL: worker start-up; enqueue throughput (enqueue() one "
    "per call, in batches, enqueue_many(), POST /jobs and POST /jobs/batch to a jobqueue api "
    "process); drain throughput (in-process pools, and 1, 2, 4 jobqueue worker processes "
    "with their CPU time); pickup latency p50/p95/p99 (in-process, and into a worker "
    "process after an in-process enqueue or an HTTP submission); how soon a wait for a "
    "job's end returns it once it ended (Client.wait, one waiter and many, and "
    "jobqueue.wait in-process); jobs that wait for jobs (a chain's hop from a job's end to "
    "its dependent's start, a fan-out/fan-in's rate against independent jobs'); and the "
    "in-process runs "
    "again with many jobs scheduled for later, then with many finished rows. It runs on "
    "DATABASE_URL's server, in a database of its own (jobqueue_bench_<random>) that it "
    "creates and drops, so its role needs CREATEDB; it never writes into the database in "
    "DATABASE_URL. Unset, a temporary embedded PostgreSQL is used (not the one in "
    "JOBQUEUE_DATA_DIR). Progress goes to stderr, the report to stdout. `jobqueue bench "
    "dashboard` times the dashboard's pages on a big table instead (its own --help).",
    width=88,
    # Never "in-" at a line's end and "process" at the next one's start.
    break_on_hyphens=False,
)


def parse_options(argv: Sequence[str], epilog: str) -> argparse.Namespace:
    """The options after `jobqueue bench` (or `jobqueue bench dashboard`, whose own they
    are then); `--help` and usage errors exit here (0, 2)."""
    if list(argv[:1]) == [DASHBOARD]:
        from jobqueue.bench.dashboard.command import parse_options as dashboard_options

        return dashboard_options(argv[1:], epilog)
    parser = _parser(epilog)
    options = parser.parse_args(list(argv))
    try:
        sizes_of(options)
    except ValueError as error:
        # Options each valid alone but not together: a fan's --fan-in above its width.
        parser.error(f"--fan-width, --fan-in: {error}")
    return options


def sizes_of(options: argparse.Namespace) -> Sizes:
    sizes = QUICK_SIZES if options.quick else DEFAULT_SIZES
    chosen = {
        name: getattr(options, name)
        for name in (
            "jobs",
            "workers",
            "scheduled_rows",
            "finished_rows",
            "latency_samples",
            "wait_samples",
            "startup_runs",
            "drain_jobs",
            "processes",
            "process_workers",
            "chain_jobs",
            "fan_layers",
            "fan_width",
            "fan_in",
        )
        if getattr(options, name) is not None
    }
    return replace(sizes, **chosen)


def scenarios_of(options: argparse.Namespace) -> tuple[str, ...]:
    return SCENARIOS if options.only is None else tuple(options.only)


def run_bench(options: argparse.Namespace, database_url: str | None) -> int:
    """Run with the sizes `options` choose on `database_url`'s server (None: a temporary
    embedded one); print the report, write the JSON if asked; the exit status."""
    if getattr(options, DASHBOARD, False):
        from jobqueue.bench.dashboard.command import run_dashboard

        return run_dashboard(options, database_url)
    # Imported only now: they load SQLAlchemy, the pools and the report's table library.
    from jobqueue.bench import report
    from jobqueue.bench.database import server_for
    from jobqueue.bench.runner import run

    sizes = sizes_of(options)
    # The pools log every attempt at INFO; only trouble belongs next to the progress line.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        with server_for(database_url) as server:
            result = asyncio.run(run(server, sizes, scenarios_of(options)))
    except (BenchError, JobQueueError) as exc:
        print(f"jobqueue bench: {exc}", file=sys.stderr)
        return exit_codes.FAILED
    except KeyboardInterrupt:
        print("jobqueue bench: interrupted", file=sys.stderr)
        return exit_codes.FORCED
    print(report.render(result, options.baseline))
    if options.json is not None:
        found = report.as_json(result, options.baseline)
        options.json.write_text(json.dumps(found, indent=2) + "\n")
    return exit_codes.OK


def _parser(epilog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobqueue bench",
        description=DESCRIPTION,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    full, quick = DEFAULT_SIZES, QUICK_SIZES

    def sized(text: str, field: str) -> str:
        return f"{text} (default {getattr(full, field):,}; --quick {getattr(quick, field):,})"

    parser.add_argument(
        "--jobs",
        type=at_least(1),
        metavar="N",
        help=sized("jobs per enqueue run (in-process and HTTP) and per in-process drain", "jobs"),
    )
    parser.add_argument(
        "--workers",
        type=at_least(1),
        metavar="W",
        help=sized("workers per in-process pool", "workers"),
    )
    parser.add_argument(
        "--drain-jobs",
        type=at_least(1),
        metavar="N",
        help=sized("jobs per drain with jobqueue worker processes", "drain_jobs"),
    )
    parser.add_argument(
        "--processes",
        type=_processes,
        metavar="LIST",
        help="worker process counts to drain with, comma-separated (default "
        f"{_listed(full.processes)}; --quick {_listed(quick.processes)})",
    )
    parser.add_argument(
        "--process-workers",
        type=at_least(1),
        metavar="W",
        help=sized("WORKERS of each jobqueue worker process", "process_workers"),
    )
    parser.add_argument(
        "--scheduled-rows",
        type=at_least(0),
        metavar="N",
        help=sized(
            "pending jobs, scheduled a day or more ahead, in the table for another round of "
            "in-process drains and pickups; 0 skips it",
            "scheduled_rows",
        ),
    )
    parser.add_argument(
        "--finished-rows",
        type=at_least(0),
        metavar="R",
        help=sized(
            "completed rows in the table for the last round of in-process drains and "
            "pickups; 0 skips it",
            "finished_rows",
        ),
    )
    parser.add_argument(
        "--latency-samples",
        type=at_least(2),
        metavar="S",
        help=sized("jobs submitted per pickup latency run", "latency_samples"),
    )
    parser.add_argument(
        "--wait-samples",
        type=at_least(2),
        metavar="S",
        help=sized("waits for a job's end per run of waits", "wait_samples"),
    )
    parser.add_argument(
        "--startup-runs",
        type=at_least(1),
        metavar="K",
        help=sized(
            "timed worker start-ups (spawn to first handler call), after an untimed one",
            "startup_runs",
        ),
    )
    parser.add_argument(
        "--chain-jobs",
        type=at_least(0),
        metavar="N",
        help=sized("jobs of the chain, each after the one before; 0 skips it", "chain_jobs"),
    )
    parser.add_argument(
        "--fan-layers",
        type=at_least(0),
        metavar="L",
        help=sized(
            "layers of the fan-out/fan-in, each job after jobs of the layer before, then one "
            "job after the whole last layer; 0 skips it",
            "fan_layers",
        ),
    )
    parser.add_argument(
        "--fan-width",
        type=at_least(1),
        metavar="W",
        help=sized("jobs per layer of the fan", "fan_width"),
    )
    parser.add_argument(
        "--fan-in",
        type=at_least(1),
        metavar="K",
        help="jobs of the layer before each job of the fan waits for: its own place and "
        "the next ones (default: all of the layer)",
    )
    parser.add_argument(
        "--only",
        type=_scenarios,
        metavar="LIST",
        help=f"run only these scenarios, comma-separated, of: {', '.join(SCENARIOS)} "
        "(default: all)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes: well under a minute, to check that it works (figures meaningless)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--baseline",
        type=_baseline,
        metavar="PATH",
        help="a file an earlier run's --json wrote: show each scenario's figures of both "
        "runs side by side, with their ratio",
    )
    return parser


def _baseline(text: str) -> Baseline:
    # Read before the run, not after it: a wrong path must not cost minutes of benchmark.
    try:
        return load_baseline(Path(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _listed(counts: tuple[int, ...]) -> str:
    return ",".join(str(count) for count in counts)


def _processes(text: str) -> tuple[int, ...]:
    try:
        return parse_processes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _scenarios(text: str) -> tuple[str, ...]:
    try:
        return parse_scenarios(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def at_least(lowest: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {value}")
        return value

    return parse
