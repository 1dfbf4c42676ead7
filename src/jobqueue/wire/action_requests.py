"""Bodies of an operator's actions on jobs: a reschedule, and bulk retries, discards and
cancels."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

import msgspec

from jobqueue.domain.bulk import MAX_SELECTED, Selection
from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.fields import MAX_DELAY, MAX_TYPE_LENGTH
from jobqueue.domain.status import Status
from jobqueue.domain.transitions import Operation
from jobqueue.wire.requests import Duration, QueueName, duration_of


class RescheduleRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `POST /jobs/{id}/reschedule`: when the pending job is due, an instant or a
    delay from now; one of the two."""

    run_at: (
        Annotated[
            datetime,
            msgspec.Meta(
                tz=True,
                description="Due at this instant (RFC 3339, with an offset), by the "
                "database's clock; at once when past. Not with delay.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    delay: (
        Annotated[
            Duration,
            msgspec.Meta(
                description="Due this long from now, by the database's clock, at most "
                f"{MAX_DELAY.days} days. Not with run_at.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    def when(self) -> tuple[datetime | None, timedelta]:
        """`run_at`, else the delay; raises `InvalidJob` unless exactly one is given."""
        if (self.run_at is msgspec.UNSET) == (self.delay is msgspec.UNSET):
            raise InvalidJob('give run_at or delay (exactly one), e.g. {"delay": "10m"}')
        if self.run_at is not msgspec.UNSET:
            return self.run_at, timedelta(0)
        assert self.delay is not msgspec.UNSET
        return None, duration_of(self.delay, "delay")


class BulkRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `POST /jobs/retry`, `/jobs/discard` and `/jobs/cancel`: which jobs, at most
    how many, the oldest first."""

    status: Annotated[Status, msgspec.Meta(description="Act on jobs of this status.")]
    queue: (
        Annotated[QueueName, msgspec.Meta(description="Only jobs of this queue; any when absent.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    type: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=MAX_TYPE_LENGTH,
                description="Only jobs of this type; any when absent.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    limit: Annotated[
        int,
        msgspec.Meta(ge=1, le=MAX_SELECTED, description="At most this many, the oldest first."),
    ] = MAX_SELECTED

    def selection(self, operation: Operation) -> Selection:
        """Raises `ValueError` for a selection `operation` may not act on."""
        return Selection(
            self.status,
            queue=None if self.queue is msgspec.UNSET else self.queue,
            type=None if self.type is msgspec.UNSET else self.type,
            limit=self.limit,
            operation=operation,
        )
