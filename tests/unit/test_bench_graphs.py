"""`jobqueue bench`'s jobs that wait for jobs: the graphs it submits, a chain's hops, and
how their figures are reported, from made-up times."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from jobqueue.bench.graph_shapes import chain, edges, fan, hops, too_early
from jobqueue.bench.ratios import ratios
from jobqueue.bench.report import as_json, render
from jobqueue.bench.results import Latency, Measurement, Throughput, median_run
from jobqueue.bench.runner import Run
from jobqueue.bench.sizes import QUICK_SIZES
from jobqueue.domain.dependencies import link
from jobqueue.domain.job import NewJob

NEW = NewJob.build(type="bench.step", default_max_attempts=3, registered=["bench.step"])
AT = datetime(2026, 12, 5, tzinfo=UTC)


def ms(value: float) -> datetime:
    return AT + timedelta(milliseconds=value)


def test_a_chain_is_each_job_after_the_one_before_and_links_as_one_graph() -> None:
    steps = chain(4, NEW)
    ids = [uuid4() for _ in steps]

    linked = link(steps, ids)

    assert [step.after for step in steps] == [(), (0,), (1,), (2,)]
    assert [new.depends_on for new in linked.news] == [None, (ids[0],), (ids[1],), (ids[2],)]
    assert edges(steps) == 3


def test_a_chain_of_a_thousand_links_without_exhausting_the_stack() -> None:
    steps = chain(1_000, NEW)

    assert len(link(steps, [uuid4() for _ in steps]).news) == 1_000


def test_a_fan_waiting_for_all_of_each_layer_then_one_job_after_the_last() -> None:
    steps = fan(3, 4, 4, NEW)

    assert len(steps) == 3 * 4 + 1
    assert [step.after for step in steps[:4]] == [()] * 4
    assert all(step.after == (0, 1, 2, 3) for step in steps[4:8])
    assert all(step.after == (4, 5, 6, 7) for step in steps[8:12])
    assert steps[-1].after == (8, 9, 10, 11)
    # (layers - 1) × width × width, and the last job's width.
    assert edges(steps) == 2 * 4 * 4 + 4


def test_a_fan_waiting_for_some_of_the_layer_before_takes_its_place_and_the_next_round() -> None:
    steps = fan(2, 5, 3, NEW)

    assert [step.after for step in steps[5:10]] == [
        (0, 1, 2),
        (1, 2, 3),
        (2, 3, 4),
        (0, 3, 4),
        (0, 1, 4),
    ]
    assert steps[-1].after == (5, 6, 7, 8, 9)
    assert edges(steps) == 5 * 3 + 5
    # Each job of a layer is waited for by as many as each waits for: all are ancestors.
    waited = [sum(place in step.after for step in steps[5:10]) for place in range(5)]
    assert waited == [3] * 5


@pytest.mark.parametrize("waits_for", [0, 6])
def test_a_fan_refuses_to_wait_for_none_or_more_than_a_layer(waits_for: int) -> None:
    with pytest.raises(ValueError, match="1 to 5"):
        fan(2, 5, waits_for, NEW)


def test_a_hop_is_the_next_jobs_start_less_the_jobs_end() -> None:
    times = [(ms(0), ms(2)), (ms(5), ms(6)), (ms(6.5), ms(9))]

    assert hops(times) == pytest.approx([0.003, 0.0005])
    assert hops(times[:1]) == []


def test_a_job_started_before_a_job_it_waits_for_ended_is_found_by_its_place() -> None:
    steps = fan(2, 2, 2, NEW)  # 0, 1; then 2 and 3 after both; then 4 after 2 and 3
    times = [
        (ms(0), ms(1)),
        (ms(0), ms(3)),
        (ms(4), ms(5)),
        (ms(2), ms(5)),  # before job 1 ended
        (ms(6), ms(7)),
    ]

    assert too_early(steps, times) == [3]
    assert too_early(steps, [*times[:3], (ms(3.5), ms(5)), times[4]]) == []


def test_the_median_run_is_the_lower_middle_by_rate() -> None:
    runs = [Throughput(100, seconds, 0.0) for seconds in (1.0, 4.0, 2.0, 0.5)]

    assert median_run(runs).seconds == 2.0
    assert median_run(runs[:3]).seconds == 2.0


def graph_run() -> Run:
    sizes = replace(QUICK_SIZES, chain_jobs=4, fan_layers=2, fan_width=3)
    measurements = [
        Measurement("graph.chain", "chained", Throughput(4, 0.04, 0.001, 0.01)),
        Measurement("graph.chain.hop", "hop", Latency.of([0.002, 0.004, 0.006])),
        Measurement("graph.fan", "fanned", Throughput(7, 0.07, 0.001, 0.01)),
        Measurement("graph.independent", "alone", Throughput(6, 0.03, 0.001, 0.01)),
        Measurement("pickup.process.http", "picked", Latency.of([0.001, 0.003])),
    ]
    environment: dict[str, str | int | float] = {
        "postgresql": "15.20",
        "database_source": "DATABASE_URL",
        "cpu_count": 2,
        "python": "3.11.7",
        "jobqueue_package": "/src/jobqueue",
        "fsync": "on",
        "synchronous_commit": "on",
        "shared_buffers": "128MB",
        "chain_submit_seconds": 0.125,
        "fan_submit_seconds": 2.5,
    }
    return Run(sizes, environment, measurements, scenarios=("chain", "fan", "processes"))


def test_a_chains_hops_are_a_table_of_their_own_and_its_total_a_throughput() -> None:
    shown = render(graph_run())
    hops_table = shown.split("Dependencies, a job's end → its dependent's start")[1]
    pickups = shown.split("Pickup latency")[1].split("Dependencies, a job")[0]

    assert "hop" in hops_table.split("Ratios")[0]
    assert " hop " not in pickups
    assert "picked" in pickups
    throughput = shown.split("Throughput")[1].split("Pickup latency")[0]
    assert "chained" in throughput
    assert "fanned" in throughput
    # The submissions' times, which no figure counts.
    assert "chain: 4 jobs submitted as one graph in 0.12s" in shown
    assert "fan: 7 jobs submitted as one graph in 2.50s (median)" in shown


def test_the_fan_is_compared_with_the_independent_jobs_by_rate() -> None:
    found = {each.name: each.value for each in ratios(graph_run())}

    assert found == {"graph_fan_vs_independent": pytest.approx(0.5)}
    assert "0.50×" in render(graph_run())


def test_tables_of_scenarios_that_did_not_run_are_left_out_and_the_json_says_which_ran() -> None:
    shown = render(graph_run())
    found = as_json(graph_run())

    assert "Start-up" not in shown
    assert "Waits for a job's end" not in shown
    assert found["settings"]["scenarios"] == ("chain", "fan", "processes")
    assert found["settings"]["fan_in"] is None
    assert found["metrics"]["graph.chain.hop"]["samples"] == 3
