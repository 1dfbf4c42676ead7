"""A `Metrics` holding every series it can: what a user document and a dashboard may name."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from jobqueue.adapters.telemetry.metrics import Metrics
from jobqueue.domain.flow import Limit
from jobqueue.domain.job import Job
from jobqueue.domain.status import Status

# The one (queue, type) whose series `every_series` creates.
EXAMPLE_PAIR = {"queue": "default", "type": "sleep"}


def every_series() -> Metrics:
    """A fresh `Metrics` with every child it creates up front, those one (queue, type)
    gets at its first event (`EXAMPLE_PAIR`), the depth gauge's, which a refresh creates
    (each counted status, 0 when absent), and a limited queue's."""
    metrics = Metrics()
    now = datetime(2030, 1, 1, tzinfo=UTC)
    metrics.series(
        Job(
            id=uuid.uuid4(),
            payload={},
            status=Status.PROCESSING,
            attempts=1,
            max_attempts=1,
            run_at=now,
            locked_until=None,
            lease_token=1,
            last_error=None,
            idempotency_key=None,
            created_at=now,
            updated_at=now,
            queue=EXAMPLE_PAIR["queue"],
            type=EXAMPLE_PAIR["type"],
        )
    )
    metrics.set_queue_depth({})
    # A claim held back by each limit: the series a limited queue gets at its first.
    metrics.claim_held_back(EXAMPLE_PAIR["queue"], frozenset(Limit))
    return metrics
