"""`Job.pickup_latency`: how long a claimed attempt waited, from due to claim."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from jobqueue.domain.job import Job
from jobqueue.domain.status import Status

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def claimed(*, created: timedelta, due: timedelta, started: timedelta | None) -> Job:
    """A job created, due and claimed at those offsets from T0."""
    return Job(
        id=uuid.uuid4(),
        type="sleep",
        payload={},
        status=Status.PROCESSING,
        attempts=1,
        max_attempts=3,
        run_at=T0 + due,
        locked_until=None,
        lease_token=1,
        last_error=None,
        idempotency_key=None,
        created_at=T0 + created,
        updated_at=T0,
        started_at=None if started is None else T0 + started,
    )


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def test_it_runs_from_run_at_to_the_claim() -> None:
    # Scheduled for later (or a retry after its backoff): the delay is not waiting.
    assert claimed(created=s(0), due=s(60), started=s(75)).pickup_latency == s(15)


def test_a_job_due_before_it_was_created_waited_from_its_creation() -> None:
    assert claimed(created=s(10), due=s(-3600), started=s(12)).pickup_latency == s(2)


def test_a_claim_before_run_at_by_another_clock_is_no_wait() -> None:
    assert claimed(created=s(0), due=s(5), started=s(4)).pickup_latency == timedelta(0)


def test_a_job_never_claimed_has_none() -> None:
    assert claimed(created=s(0), due=s(0), started=None).pickup_latency is None
