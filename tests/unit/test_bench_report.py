"""`jobqueue bench`'s report: its tables, its ratios and its JSON, from made-up figures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jobqueue.bench.baseline import Baseline, Pair, compare, load
from jobqueue.bench.ratios import ratios
from jobqueue.bench.report import as_json, metrics, render
from jobqueue.bench.results import Latency, Measurement, StartupTime, Throughput
from jobqueue.bench.runner import Run
from jobqueue.bench.sizes import QUICK_SIZES

ENVIRONMENT: dict[str, str | int | float] = {
    "postgresql": "15.18",
    "database_source": "DATABASE_URL",
    "cpu_count": 2,
    "python": "3.11.7",
    "jobqueue_package": "/src/jobqueue",
    "fsync": "on",
    "synchronous_commit": "on",
    "shared_buffers": "128MB",
}


def drain_in_processes(name: str, seconds: float, cpu: float | None) -> Measurement:
    return Measurement(name, f"drain: {name}", Throughput(1_000, seconds, 0.1, cpu))


def a_run(*measurements: Measurement, processes: tuple[int, ...] = (1, 2, 4)) -> Run:
    return Run(replace(QUICK_SIZES, processes=processes), dict(ENVIRONMENT), list(measurements))


def in_process_round(phase: str, drain_seconds: float, p50_seconds: float) -> list[Measurement]:
    """A round's drains (1 pool in `drain_seconds`, 2 in half that) and pickups (every
    sample `p50_seconds` with wake(), twice that polling only)."""

    def drained(pools: str, seconds: float) -> Measurement:
        return Measurement(f"drain.{phase}.{pools}", pools, Throughput(1_000, seconds, 0.1))

    def picked_up(mode: str, seconds: float) -> Measurement:
        return Measurement(f"pickup.{phase}.{mode}", mode, Latency.of([seconds, seconds]))

    return [
        drained("1pool", drain_seconds),
        drained("2pools", drain_seconds / 2),
        picked_up("wake", p50_seconds),
        picked_up("poll", 2 * p50_seconds),
    ]


def test_each_kind_of_figure_is_a_row_of_its_own_table_with_its_label_and_numbers() -> None:
    run = a_run(
        Measurement("startup.worker", "start a worker", StartupTime.of([0.5, 0.7, 0.6])),
        Measurement("enqueue.http.c8", "over HTTP", Throughput(2_000, 2.0, 0.5, 1.5)),
        Measurement("enqueue.single.c1", "in-process", Throughput(1_000, 0.5, 0.4)),
        Measurement("pickup.process.http", "pick up", Latency.of([0.001, 0.002, 0.003, 0.010])),
    )

    shown = render(run).splitlines()

    def row(label: str) -> list[str]:
        [line] = [line for line in shown if line.strip().startswith(label)]
        return line.split()[len(label.split()) :]

    assert row("start a worker") == ["3", "600", "500", "700"]
    # jobs, seconds, jobs/s, client CPU, service CPU and per job
    assert row("over HTTP") == ["2,000", "2.00", "1,000", "25%", "1.50", "750"]
    assert row("in-process") == ["1,000", "0.50", "2,000", "80%", "–", "–"]
    latency = Latency.of([0.001, 0.002, 0.003, 0.010])
    assert row("pick up") == [
        "4",
        f"{latency.p50_ms:.1f}",
        f"{latency.p95_ms:.1f}",
        f"{latency.p99_ms:.1f}",
        "10.0",
    ]
    assert "PostgreSQL 15.18 (DATABASE_URL), 2 CPU cores" in shown[0]
    assert any("shared and noisy" in line for line in shown)
    assert all(line == line.rstrip() for line in shown)


def test_waits_for_a_jobs_end_are_a_table_of_their_own_apart_from_the_pickups() -> None:
    run = a_run(
        Measurement("pickup.process.http", "pickup", Latency.of([0.001, 0.003])),
        Measurement("wait.http.c1", "waited", Latency.of([0.002, 0.004])),
    )

    shown = render(run)
    pickups = rows_of(shown, "Pickup latency, submission returned → handler started")
    waits = rows_of(shown, "Waits for a job's end, job ended → wait returned")

    assert set(pickups) == {"pickup"}
    assert set(waits) == {"waited"}
    assert waits["waited"][:2] == ["2", "3.0"]
    assert "reading its job every POLL_INTERVAL" in shown
    assert as_json(run)["metrics"]["wait.http.c1"]["kind"] == "latency"


def test_drains_with_more_processes_are_compared_with_the_next_fewer_in_rate_and_cpu() -> None:
    run = a_run(
        drain_in_processes("drain.processes.1", 1.0, 0.2),
        drain_in_processes("drain.processes.2", 0.5, 0.3),
        drain_in_processes("drain.processes.4", 0.4, 0.6),
    )

    found = {each.name: each.value for each in ratios(run)}

    assert found == {
        "drain_2procs_vs_1procs": pytest.approx(2.0),
        "drain_cpu_per_job_2procs_vs_1procs": pytest.approx(1.5),
        "drain_4procs_vs_2procs": pytest.approx(1.25),
        "drain_cpu_per_job_4procs_vs_2procs": pytest.approx(2.0),
    }
    assert "1.25×" in render(run)


def test_a_ratio_needs_both_of_its_figures_and_cpu_ratios_their_cpu_times() -> None:
    run = a_run(
        drain_in_processes("drain.processes.1", 1.0, None),
        drain_in_processes("drain.processes.2", 0.5, None),
        Measurement("pickup.process.http", "http", Latency.of([0.001, 0.004])),
    )

    assert [each.name for each in ratios(run)] == ["drain_2procs_vs_1procs"]


def test_the_json_holds_every_figure_and_service_cpu_only_where_it_was_measured() -> None:
    run = a_run(
        drain_in_processes("drain.processes.1", 1.0, 0.25),
        Measurement("enqueue.single.c1", "in-process", Throughput(1_000, 0.5, 0.4)),
        processes=(1,),
    )

    found = json.loads(json.dumps(as_json(run)))

    drained = found["metrics"]["drain.processes.1"]
    assert drained["jobs_per_second"] == pytest.approx(1_000)
    assert drained["service_cpu_seconds"] == pytest.approx(0.25)
    assert drained["service_cpu_us_per_job"] == pytest.approx(250)
    assert "service_cpu_seconds" not in found["metrics"]["enqueue.single.c1"]
    assert found["settings"]["processes"] == [1]
    assert found["settings"]["worker_process_settings"]["WORKERS"] == str(
        QUICK_SIZES.process_workers
    )
    assert found["environment"] == ENVIRONMENT


def test_each_seeded_round_is_compared_with_the_empty_table_as_a_slowdown() -> None:
    run = a_run(
        *in_process_round("empty", 1.0, 0.010),
        *in_process_round("scheduled", 1.25, 0.011),
        *in_process_round("history", 2.0, 0.030),
    )

    found = {each.name: each.value for each in ratios(run)}

    # Slower drains and later pickups both read above 1.
    for phase, drain, pickup in (("scheduled", 1.25, 1.1), ("history", 2.0, 3.0)):
        assert found[f"drain_{phase}_vs_empty_1pool"] == pytest.approx(drain)
        assert found[f"drain_{phase}_vs_empty_2pools"] == pytest.approx(drain)
        assert found[f"pickup_wake_{phase}_vs_empty_p50"] == pytest.approx(pickup)
        assert found[f"pickup_poll_{phase}_vs_empty_p50"] == pytest.approx(pickup)
    labels = [each.label for each in ratios(run)]
    assert "drain, 1 pool: 2,000 scheduled rows vs empty (slowdown factor, 1.00 = none)" in labels
    assert (
        "pickup p50 polling only: 2,000 finished rows vs empty (slowdown factor, 1.00 = none)"
        in labels
    )


def test_a_seeded_round_that_did_not_run_has_no_ratios_and_no_line_in_the_header() -> None:
    # As with --finished-rows 0: no history round, so neither its figures nor its seeding.
    run = a_run(*in_process_round("empty", 1.0, 0.010), *in_process_round("scheduled", 1.5, 0.02))
    run.environment.update(scheduled_seed_seconds=1.5, scheduled_table_size="1 MB")

    names = [each.name for each in ratios(run)]
    header = render(run).split("shared and noisy")[0]

    assert [name for name in names if "_vs_empty_" in name] == [
        "drain_scheduled_vs_empty_1pool",
        "drain_scheduled_vs_empty_2pools",
        "pickup_wake_scheduled_vs_empty_p50",
        "pickup_poll_scheduled_vs_empty_p50",
    ]
    assert "scheduled: 2,000 scheduled rows, jobs table 1 MB (built in 1.5s)" in header
    assert "history:" not in header


def test_batch_submission_over_http_is_compared_with_enqueue_many_and_single_posts() -> None:
    run = a_run(
        Measurement("enqueue.bulk.many", "many", Throughput(1_000, 0.02, 0.01)),
        Measurement("enqueue.http.c8", "single", Throughput(1_000, 0.5, 0.1, 0.3)),
        Measurement("enqueue.http_batch.c1", "batch 1", Throughput(1_000, 0.1, 0.1, 0.05)),
        Measurement("enqueue.http_batch.c4", "batch 4", Throughput(1_000, 0.04, 0.1, 0.03)),
    )

    found = {each.name: each.value for each in ratios(run)}

    # The most clients of the batch runs: the API's ceiling, not one producer's pace.
    assert found == {
        "enqueue_http_batch_c4_vs_many": pytest.approx(0.5),
        "enqueue_http_batch_c4_vs_http_c8": pytest.approx(12.5),
        "enqueue_cpu_per_job_http_batch_c4_vs_http_c8": pytest.approx(0.1),
    }


def rows_of(text: str, title: str) -> dict[str, list[str]]:
    """The rows of the table titled `title`: each label (words before the first figure or
    dash, labels here being single words) and its cells."""
    lines = text.split(title + "\n", 1)[1].split("\n\n\n", 1)[0].splitlines()
    found = {}
    for line in lines[3:]:  # blank, header, rule
        if not line:  # the caption follows
            break
        label, *cells = line.split()
        found[label] = cells
    return found


def earlier_report(tmp_path: Path, metrics: dict[str, Any], **extra: Any) -> Baseline:
    path = tmp_path / "before.json"
    path.write_text(json.dumps({"metrics": metrics, **extra}))
    return load(path)


def test_with_a_baseline_each_scenario_shows_both_figures_and_their_ratio_or_a_dash(
    tmp_path: Path,
) -> None:
    run = a_run(
        Measurement("enqueue.http.c8", "single", Throughput(2_000, 2.0, 0.5, 1.5)),
        Measurement("enqueue.http_batch.c4", "batch", Throughput(1_000, 0.1, 0.1, 0.2)),
        Measurement("pickup.empty.wake", "wake", Latency.of([0.002, 0.002])),
    )
    baseline = earlier_report(
        tmp_path,
        {
            "enqueue.http.c8": {
                "kind": "throughput",
                "label": "single, then",
                "jobs_per_second": 800.0,
                "service_cpu_us_per_job": 600.0,
            },
            "pickup.empty.wake": {"kind": "latency", "p50_ms": 4.0, "p99_ms": 1.0},
            "drain.gone": {"kind": "throughput", "label": "gone", "jobs_per_second": 5_000},
        },
        environment={"jobqueue_package": "/old/src/jobqueue", "postgresql": "15.17"},
    )

    shown = render(run, baseline)
    throughput = rows_of(shown, "Throughput against the baseline")
    latency = rows_of(shown, "Latency (pickups, waits, hops) against the baseline")

    # jobs/s before, now, ratio; µs/job before, now, ratio. Above 1: faster, costlier.
    assert throughput["single"] == ["800", "1,000", "1.25×", "600", "750", "1.25×"]
    assert throughput["batch"] == ["–", "10,000", "–", "–", "200", "–"]
    assert throughput["gone"] == ["5,000", "–", "–", "–", "–", "–"]
    assert list(throughput) == ["single", "batch", "gone"]  # this run's order, then the rest
    assert latency["wake"] == ["4.0", "2.0", "0.50×", "1.0", "2.0", "2.00×"]
    assert "Start-up against the baseline" not in shown  # neither run has one
    assert f"Baseline: {baseline.path} (jobqueue from /old/src/jobqueue, PostgreSQL 15.17)" in shown
    assert all(line == line.rstrip() for line in shown.splitlines())
    # Without a baseline, none of it.
    assert "against the baseline" not in render(run)


def test_an_older_baseline_lacking_figures_kinds_or_labels_is_compared_as_far_as_it_goes(
    tmp_path: Path,
) -> None:
    run = a_run(
        Measurement("enqueue.http.c8", "single", Throughput(2_000, 2.0, 0.5, 1.5)),
        Measurement("startup.worker", "start", StartupTime.of([0.4])),
    )
    baseline = earlier_report(
        tmp_path,
        {
            # No service CPU measured then, no kind, no label: matched by name all the same.
            "enqueue.http.c8": {"jobs_per_second": 500},
            "startup.worker": {"median_ms": "fast"},  # not a number: no figure
            "pickup.old": {"p50_ms": 1.0},  # no label: its name stands for it
            "mystery": {"jobs": 3},  # nothing says what it is: left out
            "broken": [1, 2],
        },
    )

    compared = {each.name: each for each in compare(metrics(run), baseline)}
    shown = render(run, baseline)

    assert set(compared) == {"enqueue.http.c8", "startup.worker", "pickup.old"}
    assert compared["enqueue.http.c8"].pairs == (Pair(500.0, 1_000.0), Pair(None, 750.0))
    assert compared["enqueue.http.c8"].pairs[0].ratio == pytest.approx(2.0)
    assert compared["enqueue.http.c8"].pairs[1].ratio is None
    assert compared["startup.worker"].pairs == (Pair(None, 400.0),)
    assert compared["pickup.old"].label == "pickup.old"
    assert rows_of(shown, "Start-up against the baseline")["start"] == ["–", "400", "–"]
    assert rows_of(shown, "Latency (pickups, waits, hops) against the baseline")["pickup.old"] == [
        "1.0",
        "–",
        "–",
        "–",
        "–",
        "–",
    ]
    # Figures of an older run, and nothing said about settings it did not record.
    assert "settings that differ" not in shown


def test_a_baseline_of_other_sizes_says_which_and_its_ratios_go_into_the_json(
    tmp_path: Path,
) -> None:
    run = a_run(Measurement("enqueue.http.c8", "single", Throughput(2_000, 2.0, 0.5, 1.5)))
    settings = json.loads(json.dumps(run.settings()))
    baseline = earlier_report(
        tmp_path,
        {"enqueue.http.c8": {"kind": "throughput", "jobs_per_second": 500.0}},
        settings={**settings, "jobs": 10_000, "processes": [1, 2, 4], "retired": 3},
    )

    shown = render(run, baseline)
    found = json.loads(json.dumps(as_json(run, baseline)))

    line = next(line for line in shown.splitlines() if line.startswith("settings that differ"))
    assert "jobs: 10000 → 100" in line
    assert "processes" not in line  # the same counts, a list in the file and a tuple here
    assert "retired" not in line  # a setting this run does not have
    assert found["baseline"]["path"] == str(baseline.path)
    assert found["baseline"]["ratios"] == {"enqueue.http.c8": {"jobs_per_second": 2.0}}
    assert "baseline" not in as_json(run)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ('["a list"]', "no metrics"),
        ('{"metrics": []}', "no metrics"),
    ],
)
def test_a_baseline_that_is_not_a_report_is_refused_saying_why(
    tmp_path: Path, content: str | None, reason: str
) -> None:
    path = tmp_path / "before.json"
    if content is not None:
        path.write_text(content)

    with pytest.raises(ValueError, match=reason):
        load(path)
