"""The bodies of the requests on queues: their limits (`PUT /queues/{name}/limits`)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from jobqueue.domain.flow import (
    MAX_CONCURRENCY,
    MAX_TYPE_RATES,
    QueueLimits,
    Rate,
    TypeRates,
    type_rates,
)


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
    key_rate: (
        Annotated[
            str,
            msgspec.Meta(
                description="At most this many starts of one partition key within any "
                "window of a period, as starts/period: 10/1m, 2/s.",
                examples=["10/1m"],
            ),
        ]
        | None
    ) = None
    type_rates: (
        Annotated[
            dict[str, str],
            msgspec.Meta(
                description="At most so many starts of a job type within any window of a "
                "period, type by type, as starts/period (up to "
                f"{MAX_TYPE_RATES} types); the queue's other types are not paced. Not "
                "combined with key_concurrency or key_rate.",
                examples=[{"send_sms": "10/s"}],
            ),
        ]
        | None
    ) = None

    def limits(self) -> QueueLimits:
        """The limits asked for; raises `ValueError` naming the rate that is wrong and
        saying why."""
        return QueueLimits(
            self.concurrency,
            _rate("rate", self.rate),
            self.key_concurrency,
            _rate("key_rate", self.key_rate),
            _type_rates(self.type_rates),
        )


def _rate(name: str, text: str | None) -> Rate | None:
    # Named: with two rates in a body, "a rate limit must be between 1 and …" alone would
    # not say which one is wrong.
    if text is None:
        return None
    try:
        return Rate.parse(text)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def _type_rates(rates: dict[str, str] | None) -> TypeRates:
    if rates is None:
        return ()
    try:
        return type_rates(rates)
    except ValueError as error:
        raise ValueError(f"type_rates: {error}") from None
