"""The bodies of the requests on queues: their limits (`PUT /queues/{name}/limits`)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from jobqueue.domain.flow import MAX_CONCURRENCY, QueueLimits, Rate


class QueueLimitsRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `PUT /queues/{name}/limits`: the queue's limits, each absent or null for
    none (the body replaces every limit the queue had)."""

    concurrency: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=MAX_CONCURRENCY,
                description="At most this many of its jobs running at once, in all processes.",
            ),
        ]
        | None
    ) = None
    rate: (
        Annotated[
            str,
            msgspec.Meta(
                description="At most this many starts within any window of a period, "
                "as starts/period: 100/1m, 20/s, 5/500ms.",
                examples=["100/1m"],
            ),
        ]
        | None
    ) = None
    key_concurrency: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=MAX_CONCURRENCY,
                description="At most this many jobs of one partition key running at once, "
                "in all processes; claims rotate between keys.",
            ),
        ]
        | None
    ) = None

    def limits(self) -> QueueLimits:
        """The limits asked for; raises `ValueError` saying what is wrong with the rate."""
        rate = None if self.rate is None else Rate.parse(self.rate)
        return QueueLimits(self.concurrency, rate, self.key_concurrency)
