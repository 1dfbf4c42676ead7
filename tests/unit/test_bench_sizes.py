"""`jobqueue bench`'s options: the sizes they choose, and what they refuse."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from jobqueue.bench.command import parse_options, scenarios_of, sizes_of
from jobqueue.bench.sizes import (
    DEFAULT_SIZES,
    QUICK_SIZES,
    SCENARIOS,
    parse_processes,
    parse_scenarios,
)
from jobqueue.domain.dependencies import MAX_DEPENDENCIES
from jobqueue.entrypoints.cli import main as cli
from jobqueue.wire.requests import MAX_BATCH_JOBS


def test_no_option_gives_the_full_run_and_quick_the_small_one() -> None:
    assert sizes_of(parse_options([], epilog="")) == DEFAULT_SIZES
    assert sizes_of(parse_options(["--quick"], epilog="")) == QUICK_SIZES


def test_each_size_option_replaces_its_size_and_keeps_the_others_of_the_run_chosen() -> None:
    argv = ["--quick", "--drain-jobs", "500", "--processes", "4,1", "--process-workers", "10"]
    options = parse_options([*argv, "--scheduled-rows", "0", "--wait-samples", "20"], epilog="")

    assert sizes_of(options) == replace(
        QUICK_SIZES,
        drain_jobs=500,
        processes=(1, 4),
        process_workers=10,
        scheduled_rows=0,
        wait_samples=20,
    )


def test_the_full_run_drains_with_one_two_and_four_processes_of_ten_workers() -> None:
    assert DEFAULT_SIZES.processes == (1, 2, 4)
    assert DEFAULT_SIZES.process_workers == 10
    assert DEFAULT_SIZES.drain_jobs == 20_000


def test_the_full_run_seeds_a_hundred_thousand_scheduled_jobs_and_quick_two_thousand() -> None:
    assert DEFAULT_SIZES.scheduled_rows == 100_000
    assert QUICK_SIZES.scheduled_rows == 2_000


@pytest.mark.parametrize(
    ("text", "counts"), [("1,2,4", (1, 2, 4)), ("4, 2 ,1", (1, 2, 4)), ("3", (3,))]
)
def test_process_counts_are_read_in_any_order_and_kept_ascending(
    text: str, counts: tuple[int, ...]
) -> None:
    assert parse_processes(text) == counts


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0,2", "at least 1"),
        ("1,,2", "at least 1"),
        ("two", "at least 1"),
        ("2,2", "given twice"),
    ],
)
def test_process_counts_that_cannot_be_drained_with_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_processes(text)


def test_sizes_refuse_process_counts_out_of_order() -> None:
    with pytest.raises(ValueError, match="ascending"):
        replace(DEFAULT_SIZES, processes=(2, 1))
    with pytest.raises(ValueError, match="at least 1"):
        replace(DEFAULT_SIZES, processes=(0, 1))


def test_sizes_refuse_a_batch_that_post_jobs_batch_would_refuse() -> None:
    assert DEFAULT_SIZES.batch <= MAX_BATCH_JOBS
    with pytest.raises(ValueError, match=f"1 to {MAX_BATCH_JOBS} jobs"):
        replace(DEFAULT_SIZES, batch=MAX_BATCH_JOBS + 1)
    with pytest.raises(ValueError, match=f"1 to {MAX_BATCH_JOBS} jobs"):
        replace(DEFAULT_SIZES, batch=0)


def test_the_full_run_chains_a_thousand_jobs_and_fans_ten_layers_of_a_hundred() -> None:
    assert DEFAULT_SIZES.chain_jobs == 1_000
    assert (DEFAULT_SIZES.fan_layers, DEFAULT_SIZES.fan_width) == (10, 100)
    # Each job of the fan waits for the whole layer before: the harder case for locks.
    assert DEFAULT_SIZES.fan_in is None
    assert DEFAULT_SIZES.fan_waits_for == 100


def test_the_graph_options_replace_their_sizes_and_zero_skips_the_chain() -> None:
    argv = ["--chain-jobs", "0", "--fan-layers", "4", "--fan-width", "50", "--fan-in", "3"]

    sizes = sizes_of(parse_options(argv, epilog=""))

    assert sizes == replace(DEFAULT_SIZES, chain_jobs=0, fan_layers=4, fan_width=50, fan_in=3)
    assert sizes.fan_waits_for == 3


def test_sizes_refuse_a_fan_that_no_graph_could_hold() -> None:
    with pytest.raises(ValueError, match="jobs of the layer before"):
        replace(DEFAULT_SIZES, fan_width=10, fan_in=11)
    with pytest.raises(ValueError, match=f"1 to {MAX_DEPENDENCIES} jobs"):
        replace(DEFAULT_SIZES, fan_width=MAX_DEPENDENCIES + 1)


def test_only_runs_the_scenarios_named_in_the_order_they_run() -> None:
    assert scenarios_of(parse_options([], epilog="")) == SCENARIOS
    assert scenarios_of(parse_options(["--only", "fan, chain"], epilog="")) == ("chain", "fan")
    assert parse_scenarios("history,startup") == ("startup", "history")
    with pytest.raises(ValueError, match="no scenario 'graphs'"):
        parse_scenarios("chain,graphs")


@pytest.mark.parametrize(
    "argv",
    [
        ["--jobs", "0"],
        ["--processes", "1,1"],
        ["--latency-samples", "1"],
        ["--wait-samples", "1"],
        ["--scheduled-rows", "-1"],
        ["--fan-width", "0"],
        ["--fan-in", "101"],
        ["--only", "everything"],
        ["--bogus"],
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_options(argv, epilog="")

    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_a_baseline_is_read_with_the_options_and_one_that_is_no_report_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "before.json"
    report.write_text(json.dumps({"metrics": {"enqueue.http.c8": {"jobs_per_second": 1.0}}}))

    options = parse_options(["--quick", "--baseline", str(report)], epilog="")
    with pytest.raises(SystemExit) as exited:
        # Refused before a run that would take minutes, not after it.
        parse_options(["--baseline", str(tmp_path / "missing.json")], epilog="")

    assert options.baseline.metrics == {"enqueue.http.c8": {"jobs_per_second": 1.0}}
    assert parse_options([], epilog="").baseline is None
    assert exited.value.code == 2
    assert "--baseline: cannot read" in capsys.readouterr().err


def test_jobqueue_bench_help_shows_its_options_and_the_variables_it_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench", "--help"])

    shown = capsys.readouterr().out
    assert exited.value.code == 0
    assert "usage: jobqueue bench" in shown
    for option in (
        "--quick",
        "--json",
        "--jobs",
        "--drain-jobs",
        "--processes",
        "--scheduled-rows",
        "--baseline",
    ):
        assert option in shown
    variables = [line.split()[0] for line in shown.splitlines() if line.startswith("  ")]
    assert "DATABASE_URL" in variables
    # bench never uses the service's data directory, nor writes the service's logs
    assert "JOBQUEUE_DATA_DIR" not in variables
    assert "LOG_LEVEL" not in variables


def test_another_command_still_refuses_options_it_does_not_have(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["worker", "--quick"])

    assert exited.value.code == 2
    assert "unrecognized arguments: --quick" in capsys.readouterr().err


def test_the_command_line_of_other_commands_loads_nothing_of_the_benchmark() -> None:
    """A worker builds the same parser: the benchmark must cost its start-up nothing."""
    program = (
        "import sys\n"
        "from jobqueue.entrypoints.cli.main import build_parser\n"
        "build_parser().parse_args(['worker'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('jobqueue.bench')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )

    assert result.stdout.strip() == "[]"
