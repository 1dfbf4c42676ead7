"""Pools running jobs of two types in two queues against the fake store, observed by the
Prometheus metrics: each (queue, type) counted apart, and the pickup latency measured on
the store's clock, which moves only when told."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobqueue.adapters.telemetry.metrics import Metrics
from jobqueue.domain.errors import Permanent
from jobqueue.domain.job import NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore, ManualClock
from tests.unit.pool_harness import config, eventually, make_pool, running

GREET = {"queue": "default", "type": "greet"}
DOOMED = {"queue": "default", "type": "doomed"}
EMAIL = {"queue": "mail", "type": "email"}


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_pools_count_each_queue_and_type_apart_with_their_pickup_latency() -> None:
    clock = ManualClock()
    store = InMemoryJobStore(clock)
    registry = Registry()
    tries: list[int] = []

    @registry.handler("greet")
    async def greet(ctx: JobContext, payload: Any) -> None:
        pass

    @registry.handler("doomed")
    async def doomed(ctx: JobContext, payload: Any) -> None:
        raise Permanent("never")

    @registry.handler("email")
    async def email(ctx: JobContext, payload: Any) -> None:
        tries.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("smtp down")

    for labels in (GREET, DOOMED, EMAIL):
        await store.submit(NewJob(type=labels["type"], queue=labels["queue"], max_attempts=3))
    # Due at submission, claimed 90 s later by the store's clock.
    clock.advance(timedelta(seconds=90))
    metrics = Metrics()

    default = make_pool(store, registry, observer=metrics)
    mail = make_pool(store, registry, config(queue="mail"), observer=metrics)
    async with running(default), running(mail):
        await eventually(
            lambda: sample(metrics, "jobs_retried_total", **EMAIL) == 1, "email was retried"
        )
        # The retry is due after its backoff (milliseconds); it waits 30 s more.
        clock.advance(timedelta(seconds=30))
        await eventually(
            lambda: sample(metrics, "jobs_completed_total", **EMAIL) == 1, "email completed"
        )
        await eventually(
            lambda: sample(metrics, "jobs_completed_total", **GREET) == 1, "greet completed"
        )
        await eventually(
            lambda: sample(metrics, "jobs_failed_total", **DOOMED, status="failed") == 1,
            "doomed failed",
        )

    assert tries == [1, 2]
    assert {job.status for job in store.jobs()} == {Status.COMPLETED, Status.FAILED}
    # Each pair's counters hold its own jobs alone.
    assert sample(metrics, "jobs_completed_total", **DOOMED) == 0
    assert sample(metrics, "jobs_failed_total", **GREET, status="failed") == 0
    assert sample(metrics, "jobs_retried_total", **GREET) == 0
    assert sample(metrics, "jobs_completed_total", queue="default", type="email") is None
    for labels, outcome in [(GREET, "completed"), (DOOMED, "failed"), (EMAIL, "retried")]:
        duration = "job_processing_duration_seconds_count"
        assert sample(metrics, duration, **labels, outcome=outcome) == 1
    # One observation per started attempt: the 90 s a first attempt waited, and the
    # retry's 30 s less its backoff (at most FAST's 8 ms).
    pickup = "job_pickup_latency_seconds"
    for labels in (GREET, DOOMED):
        assert sample(metrics, f"{pickup}_count", **labels) == 1
        assert sample(metrics, f"{pickup}_sum", **labels) == 90
    assert sample(metrics, f"{pickup}_count", **EMAIL) == 2
    assert sample(metrics, f"{pickup}_sum", **EMAIL) == pytest.approx(120, abs=0.01)
    assert sample(metrics, f"{pickup}_bucket", **EMAIL, le="10.0") == 0
    assert sample(metrics, f"{pickup}_bucket", **EMAIL, le="60.0") == 1
