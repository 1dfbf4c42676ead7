"""`jobqueue bench --quick` end to end: every metric and ratio reported with sane values,
in a scratch database of its own that it drops, never in the database it was given, and
set against an earlier report given with --baseline."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import jobqueue
from tests.support.bench_runs import fetch, run_bench, tables
from tests.support.postgres import Server

# Scenarios whose jobs are `--jobs`, and those run by `jobqueue worker` processes, whose
# jobs are `--drain-jobs` and whose CPU time is measured.
THROUGHPUTS = {
    "enqueue.single.c1",
    "enqueue.single.c8",
    "enqueue.bulk.in_transaction",
    "enqueue.bulk.many",
    "enqueue.http.c8",
    "enqueue.http_batch.c1",
    "enqueue.http_batch.c4",
    "drain.empty.1pool",
    "drain.empty.2pools",
    "drain.plain.2pools",
    "drain.limits.2pools",
    "drain.keys.2pools",
    "drain.scheduled.1pool",
    "drain.scheduled.2pools",
    "drain.history.1pool",
    "drain.history.2pools",
}
PROCESS_DRAINS = {"drain.processes.1", "drain.processes.2"}
LATENCIES = {
    "pickup.empty.poll",
    "pickup.empty.wake",
    "pickup.process.http",
    "pickup.process.enqueue",
    "pickup.scheduled.poll",
    "pickup.scheduled.wake",
    "pickup.history.poll",
    "pickup.history.wake",
}
STARTUPS = {"startup.worker"}
# Waits for a job's end: one waiter over HTTP, --quick's 5 at once, one in-process.
WAITS = {"wait.http.c1", "wait.http.c5", "wait.in_process.c1"}
# Jobs that wait for jobs, run by one worker process: the chain's total and hops, the
# fan and as many independent jobs (medians of three runs each).
GRAPH_THROUGHPUTS = {"graph.chain", "graph.fan", "graph.independent"}
GRAPH_LATENCIES = {"graph.chain.hop"}
RATIOS = {
    "enqueue_single_c8_vs_c1",
    "enqueue_bulk_vs_single_c1",
    "enqueue_multirow_vs_in_transaction",
    "enqueue_http_vs_single_c8",
    "enqueue_http_batch_c4_vs_many",
    "enqueue_http_batch_c4_vs_http_c8",
    "drain_2pools_vs_1pool",
    "drain_limits_not_binding_vs_none",
    "drain_per_key_limits_vs_none",
    "pickup_poll_vs_wake_p50",
    "pickup_poll_vs_wake_p99",
    "drain_scheduled_vs_empty_1pool",
    "drain_scheduled_vs_empty_2pools",
    "pickup_wake_scheduled_vs_empty_p50",
    "pickup_poll_scheduled_vs_empty_p50",
    "drain_history_vs_empty_1pool",
    "drain_history_vs_empty_2pools",
    "pickup_wake_history_vs_empty_p50",
    "pickup_poll_history_vs_empty_p50",
    "drain_2procs_vs_1procs",
    "drain_cpu_per_job_2procs_vs_1procs",
    "pickup_process_http_vs_enqueue_p99",
    "graph_fan_vs_independent",
}
# API CPU per job, batch against single: only when the batch run took a clock tick of it,
# which --quick's few batches may not.
CPU_RATIOS = {"enqueue_cpu_per_job_http_batch_c4_vs_http_c8"}
# An earlier report as an older `jobqueue bench` may have written it: one scenario this
# run has too, with no service CPU; one it no longer has; one without kind or label.
BASELINE_METRICS = {
    "enqueue.http.c8": {"kind": "throughput", "label": "over HTTP", "jobs_per_second": 50.0},
    "drain.retired": {"kind": "throughput", "label": "retired drain", "jobs_per_second": 9.0},
    "pickup.empty.wake": {"p50_ms": 1000.0, "p99_ms": 2000.0},
}


@dataclass(frozen=True)
class QuickRun:
    result: subprocess.CompletedProcess[str]
    report: dict[str, Any]
    tables_before: set[str]
    tables_after: set[str]


@pytest.fixture(scope="module")
def quick_run(postgres_server: Server, tmp_path_factory: pytest.TempPathFactory) -> QuickRun:
    folder = tmp_path_factory.mktemp("bench")
    output, baseline = folder / "bench.json", folder / "before.json"
    baseline.write_text(json.dumps({"metrics": BASELINE_METRICS}))
    before = tables(postgres_server.url)
    result = run_bench(postgres_server.url, "--json", str(output), "--baseline", str(baseline))
    assert result.returncode == 0, result.stderr
    return QuickRun(result, json.loads(output.read_text()), before, tables(postgres_server.url))


def numbers(metric: dict[str, Any]) -> dict[str, float]:
    """A metric's figures, less the CPU time of the processes under test: a short run may
    take less than one clock tick of it (checked on its own)."""
    return {
        key: value
        for key, value in metric.items()
        if key not in {"kind", "label", "service_cpu_seconds", "service_cpu_us_per_job"}
    }


@pytest.mark.slow
def test_quick_run_reports_every_throughput_with_positive_consistent_numbers(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    jobs = quick_run.report["settings"]["jobs"]

    assert set(metrics) >= THROUGHPUTS
    for name in THROUGHPUTS:
        metric = metrics[name]
        assert metric["kind"] == "throughput", name
        assert all(math.isfinite(v) and v > 0 for v in numbers(metric).values()), metric
        assert metric["jobs"] == jobs, name
        assert metric["jobs_per_second"] == pytest.approx(metric["jobs"] / metric["seconds"])


@pytest.mark.slow
def test_quick_run_drains_through_worker_processes_and_measures_their_cpu(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    settings = quick_run.report["settings"]

    assert settings["processes"] == [1, 2]
    assert settings["worker_process_settings"]["WORKERS"] == str(settings["process_workers"])
    for name in PROCESS_DRAINS:
        metric = metrics[name]
        assert metric["kind"] == "throughput", name
        assert all(math.isfinite(v) and v > 0 for v in numbers(metric).values()), metric
        assert metric["jobs"] == settings["drain_jobs"], name
        # Read from /proc, which the machines running these tests have.
        assert metric["service_cpu_seconds"] >= 0, metric
        assert metric["service_cpu_us_per_job"] == pytest.approx(
            metric["service_cpu_seconds"] / metric["jobs"] * 1e6
        )
    # The API process's CPU time during the HTTP enqueue: even --quick's requests take
    # many clock ticks of it; its few batches may take less than one.
    assert metrics["enqueue.http.c8"]["service_cpu_seconds"] > 0
    for clients in (1, 4):
        assert metrics[f"enqueue.http_batch.c{clients}"]["service_cpu_seconds"] >= 0


@pytest.mark.slow
def test_quick_run_reports_every_pickup_latency_as_ordered_positive_percentiles(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    samples = quick_run.report["settings"]["latency_samples"]

    graphs = GRAPH_THROUGHPUTS | GRAPH_LATENCIES
    assert set(metrics) == THROUGHPUTS | PROCESS_DRAINS | LATENCIES | STARTUPS | WAITS | graphs
    for name in LATENCIES:
        metric = metrics[name]
        assert metric["kind"] == "latency", name
        assert all(math.isfinite(v) and v > 0 for v in numbers(metric).values()), metric
        assert metric["samples"] == samples, name
        assert metric["p50_ms"] <= metric["p95_ms"] <= metric["p99_ms"] <= metric["max_ms"]


@pytest.mark.slow
def test_quick_run_reports_every_wait_for_a_jobs_end_as_ordered_percentiles_in_a_table(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    settings = quick_run.report["settings"]
    printed = quick_run.result.stdout.split("Waits for a job's end", 1)[1]

    assert settings["concurrent_waiters"] == 5
    for name in WAITS:
        metric = metrics[name]
        assert metric["kind"] == "latency", name
        # A wait that began after its job ended is not counted; every other one is.
        assert 2 <= metric["samples"] <= settings["wait_samples"], metric
        assert all(math.isfinite(v) and v >= 0 for v in numbers(metric).values()), metric
        assert metric["p50_ms"] <= metric["p95_ms"] <= metric["p99_ms"] <= metric["max_ms"]
        # The services' POLL_INTERVAL, which a wait would fall back to without its
        # notification, is named; the row is in the waits' table, not the pickups'.
        assert "POLL_INTERVAL=1s" in metric["label"]
        assert metric["label"] in printed
    assert "5 waiters at once" in metrics["wait.http.c5"]["label"]


@pytest.mark.slow
def test_quick_run_reports_the_chains_hops_and_the_fan_beside_independent_jobs(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    settings = quick_run.report["settings"]
    printed = quick_run.result.stdout.split("Dependencies, a job's end", 1)[1]
    layers, width = settings["fan_layers"], settings["fan_width"]

    hop = metrics["graph.chain.hop"]
    assert hop["kind"] == "latency"
    assert hop["samples"] == settings["chain_jobs"] - 1
    assert 0 < hop["p50_ms"] <= hop["p95_ms"] <= hop["p99_ms"] <= hop["max_ms"]
    assert hop["label"] in printed
    jobs = {
        "graph.chain": settings["chain_jobs"],
        "graph.fan": layers * width + 1,
        "graph.independent": layers * width,
    }
    for name, count in jobs.items():
        metric = metrics[name]
        assert metric["kind"] == "throughput", name
        assert metric["jobs"] == count, name
        assert all(math.isfinite(v) and v > 0 for v in numbers(metric).values()), metric
    # A chain of several jobs lasts longer than one of its hops.
    assert metrics["graph.chain"]["seconds"] * 1000 > hop["p50_ms"]
    assert f"each after all {width} of the layer before" in metrics["graph.fan"]["label"]
    environment = quick_run.report["environment"]
    assert environment["chain_submit_seconds"] > 0
    assert environment["fan_submit_seconds"] > 0


@pytest.mark.slow
def test_quick_run_reports_worker_startup_as_ordered_positive_times_of_this_checkout(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    runs = quick_run.report["settings"]["startup_runs"]
    package = quick_run.report["environment"]["jobqueue_package"]

    for name in STARTUPS:
        metric = metrics[name]
        assert metric["kind"] == "startup", name
        assert all(math.isfinite(v) and v > 0 for v in numbers(metric).values()), metric
        assert metric["runs"] == runs, name
        assert metric["min_ms"] <= metric["median_ms"] <= metric["max_ms"]
        assert f"{metric['median_ms']:.0f}" in quick_run.result.stdout
    # The worker subprocesses ran the code under test, which the report names.
    assert Path(package) == Path(jobqueue.__file__).resolve().parent
    assert f"jobqueue from {package}" in quick_run.result.stdout


@pytest.mark.slow
def test_quick_run_reports_every_ratio_and_prints_them_with_the_environment(
    quick_run: QuickRun,
) -> None:
    ratios = quick_run.report["ratios"]
    environment = quick_run.report["environment"]
    printed = quick_run.result.stdout

    assert RATIOS <= set(ratios) <= RATIOS | CPU_RATIOS
    assert all(math.isfinite(value) and value > 0 for value in ratios.values()), ratios
    assert environment["cpu_count"] >= 1
    assert environment["server_version_num"] >= 130000
    assert f"PostgreSQL {environment['postgresql']}" in printed
    assert f"{environment['cpu_count']} CPU cores" in printed
    assert "shared and noisy" in printed
    assert f"{ratios['drain_2pools_vs_1pool']:.2f}×" in printed
    # Each seeded round says what its table held, and how big it was.
    settings = quick_run.report["settings"]
    for phase, rows, noun in (
        ("scheduled", settings["scheduled_rows"], "scheduled"),
        ("history", settings["finished_rows"], "finished"),
    ):
        assert (
            f"{phase}: {rows:,} {noun} rows, jobs table {environment[f'{phase}_table_size']}"
            in printed
        )


@pytest.mark.slow
def test_quick_run_drops_its_scratch_database_and_leaves_the_given_one_alone(
    quick_run: QuickRun, postgres_server: Server
) -> None:
    scratch = quick_run.report["environment"]["database"]

    assert scratch.startswith("jobqueue_bench_")
    assert not fetch(postgres_server.url, "SELECT 1 FROM pg_database WHERE datname = $1", scratch)
    assert quick_run.tables_after == quick_run.tables_before


@pytest.mark.slow
def test_quick_run_sets_its_figures_against_the_baseline_where_both_have_them(
    quick_run: QuickRun,
) -> None:
    metrics = quick_run.report["metrics"]
    against = quick_run.report["baseline"]
    printed = quick_run.result.stdout.split("Throughput against the baseline", 1)[1]

    def row(label: str) -> list[str]:
        [line] = [line for line in printed.splitlines() if line.strip().startswith(label)]
        return line.split()[len(label.split()) :]

    http = metrics["enqueue.http.c8"]["jobs_per_second"]
    wake = metrics["pickup.empty.wake"]
    assert against["ratios"]["enqueue.http.c8"] == {"jobs_per_second": pytest.approx(http / 50)}
    assert against["ratios"]["pickup.empty.wake"] == {
        "p50_ms": pytest.approx(wake["p50_ms"] / 1000),
        "p99_ms": pytest.approx(wake["p99_ms"] / 2000),
    }
    assert set(against["ratios"]) == {"enqueue.http.c8", "pickup.empty.wake"}
    # This run's label, both rates and their ratio; no service CPU in the baseline.
    assert row(metrics["enqueue.http.c8"]["label"])[:3] == [
        "50",
        f"{http:,.0f}",
        f"{http / 50:.2f}×",
    ]
    assert row(metrics["enqueue.http.c8"]["label"])[3] == "–"
    assert row(metrics["enqueue.http_batch.c4"]["label"])[:3] == [
        "–",
        f"{metrics['enqueue.http_batch.c4']['jobs_per_second']:,.0f}",
        "–",
    ]
    assert row("retired drain") == ["9", "–", "–", "–", "–", "–"]
