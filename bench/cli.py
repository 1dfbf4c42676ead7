"""`python -m bench`: parse the sizes, find a database, run, print and save the report."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench import report
from bench.database import BenchError, server_from_environment
from bench.runner import DEFAULT_SIZES, QUICK_SIZES, Sizes, run
from jobqueue.domain.errors import JobQueueError


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    sizes = _sizes(arguments)
    # The pools log every attempt at INFO; only trouble belongs next to the progress line.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        with server_from_environment() as server:
            result = asyncio.run(run(server, sizes))
    except (BenchError, JobQueueError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    print(report.render(result))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(report.as_json(result), indent=2) + "\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Benchmark jobqueue on PostgreSQL: worker start-up, enqueue and drain throughput, "
            "pickup latency, and the same with many finished rows. Uses DATABASE_URL's "
            "server (in a scratch database it creates and drops) or else a temporary "
            "embedded PostgreSQL."
        ),
    )
    parser.add_argument("--jobs", type=_at_least(1), help="jobs per enqueue run and per drain")
    parser.add_argument("--workers", type=_at_least(1), help="workers per pool")
    parser.add_argument(
        "--finished-rows",
        type=_at_least(0),
        help="completed rows in the table for the second round of drains and pickups (0 skips)",
    )
    parser.add_argument(
        "--latency-samples", type=_at_least(2), help="jobs submitted per pickup latency run"
    )
    parser.add_argument(
        "--startup-runs",
        type=_at_least(1),
        help="timed worker start-ups (spawn to first handler call), after an untimed one",
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: a few seconds, to check it works"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here")
    return parser


def _sizes(arguments: argparse.Namespace) -> Sizes:
    sizes = QUICK_SIZES if arguments.quick else DEFAULT_SIZES
    chosen = {
        field: getattr(arguments, field)
        for field in ("jobs", "workers", "finished_rows", "latency_samples", "startup_runs")
        if getattr(arguments, field) is not None
    }
    return replace(sizes, **chosen)


def _at_least(lowest: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {value}")
        return value

    return parse
