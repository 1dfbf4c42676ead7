"""`jobqueue bench dashboard`: its options, and the run, printed and saved.

A subcommand of `jobqueue bench` rather than a script under bench/: it needs the
benchmark's embedded server, API process, keep-alive client and progress line, and the
installed `jobqueue` command is what a user (and the lead, after each merge) re-runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from jobqueue.bench.command import at_least
from jobqueue.bench.dashboard.dataset import DATABASE, Dataset
from jobqueue.bench.errors import BenchError
from jobqueue.domain.errors import JobQueueError
from jobqueue.entrypoints.service import exit_codes

FULL = Dataset(finished=5_000_000, pending=500_000)

DESCRIPTION = textwrap.fill(
    "Time every dashboard page and fragment on a big jobs table. Fills a database "
    "(--database) with --finished finished jobs and --pending pending ones "
    "over 20 queues and 30 types (or reuses it when it already holds exactly that), starts "
    "a jobqueue api process on it, finds every signed-in GET route under /ui in the app's "
    "route table, fills its path parameters from the data and tries its filters, and "
    "requests each URL --requests times after --warmup untimed ones. Server time is the "
    "access log's duration of each request; the client's round trip is shown beside it. "
    "Exits 1 if a URL answers anything but 2xx or its server time p95 is over --budget-ms. "
    "The database lives on DATABASE_URL's server when set (kept between runs; its role "
    "needs CREATEDB), else on an embedded PostgreSQL in --data-dir (kept), else on a "
    "temporary one. Progress goes to stderr, the table to stdout.",
    width=88,
    break_on_hyphens=False,
)


def parse_options(argv: Sequence[str], epilog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="jobqueue bench dashboard",
        description=DESCRIPTION,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--finished",
        type=at_least(0),
        default=FULL.finished,
        metavar="N",
        help=f"finished jobs in the table (default {FULL.finished:,})",
    )
    parser.add_argument(
        "--pending",
        type=at_least(0),
        default=FULL.pending,
        metavar="N",
        help=f"pending jobs in the table, 30%% scheduled for later (default {FULL.pending:,})",
    )
    parser.add_argument(
        "--requests",
        type=at_least(2),
        default=50,
        metavar="N",
        help="timed requests per URL (default 50)",
    )
    parser.add_argument(
        "--warmup",
        type=at_least(0),
        default=5,
        metavar="N",
        help="untimed requests per URL first (default 5)",
    )
    parser.add_argument(
        "--budget-ms",
        type=float,
        default=100.0,
        metavar="MS",
        help="the server time p95 no URL may exceed (default 100)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="keep the embedded PostgreSQL's data here, and reuse its filled table next time "
        "(several GB at the full size); ignored with DATABASE_URL",
    )
    parser.add_argument(
        "--database",
        default=DATABASE,
        metavar="NAME",
        help=f"the database the table is kept in, created if missing (default {DATABASE}); "
        "never give the one your service uses: it is emptied and filled",
    )
    parser.add_argument(
        "--refill",
        action="store_true",
        help="fill the table again even if it holds the sizes asked",
    )
    parser.add_argument(
        "--markdown", type=Path, metavar="PATH", help="also write the table here, in Markdown"
    )
    options = parser.parse_args(list(argv))
    options.dashboard = True
    return options


def run_dashboard(options: argparse.Namespace, database_url: str | None) -> int:
    """The run the options ask for; the exit status."""
    from jobqueue.bench.dashboard import report
    from jobqueue.bench.dashboard.run import run

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    dataset = Dataset(finished=options.finished, pending=options.pending)
    try:
        result = asyncio.run(
            run(
                dataset,
                database_url=database_url,
                data_dir=options.data_dir,
                database=options.database,
                refill=options.refill,
                requests=options.requests,
                warmup=options.warmup,
            )
        )
    except (BenchError, JobQueueError) as exc:
        print(f"jobqueue bench dashboard: {exc}", file=sys.stderr)
        return exit_codes.FAILED
    except KeyboardInterrupt:
        print("jobqueue bench dashboard: interrupted", file=sys.stderr)
        return exit_codes.FORCED
    print(report.terminal(result, options.budget_ms))
    if options.markdown is not None:
        options.markdown.write_text(report.markdown(result, options.budget_ms))
    problems = report.problems(result, options.budget_ms)
    for problem in problems:
        print(f"jobqueue bench dashboard: {problem}", file=sys.stderr)
    return exit_codes.FAILED if problems else exit_codes.OK
