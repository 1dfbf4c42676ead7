"""The ratios worth quoting from a run: each a comparison within the one run (a setup
against another, a scenario against the pgbench ceiling), for whichever measurements the
run has. Absolute numbers move with the machine's load; ratios within a run much less."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import pairwise

from jobqueue.bench.results import Latency, Throughput
from jobqueue.bench.runner import Run, seeded_rounds


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
            "drain_limits_not_binding_vs_none",
            "drain: 2 pools, limits set but not binding vs none, alternated (throughput)",
            lambda: rate("drain.limits.2pools") / rate("drain.plain.2pools"),
            ("drain.limits.2pools", "drain.plain.2pools"),
        ),
        (
            "drain_per_key_limits_vs_none",
            "drain: 2 pools, 100 keys with per-key limits vs none, alternated (throughput)",
            lambda: rate("drain.keys.2pools") / rate("drain.plain.2pools"),
            ("drain.keys.2pools", "drain.plain.2pools"),
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
            "graph_fan_vs_independent",
            "jobs that wait for jobs: a fan-out/fan-in vs as many independent jobs, one worker "
            "process, alternated (throughput)",
            partial(rate_ratio, "graph.fan", "graph.independent"),
            ("graph.fan", "graph.independent"),
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
