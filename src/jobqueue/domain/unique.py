"""Unique jobs: at most one job per key among the jobs in chosen statuses, and optionally
per period, decided by a unique index in the store, never by a read before the write.

A key is given, or derived from the job's type and payload (all of it, or the fields
`by` names), so that "one pending sync per account" is `Unique(by=("account_id",))`.
The statuses it counts in always include pending (scheduled jobs are pending jobs due
later) and processing: a job moves between those two by itself (claims, retries,
snoozes, recovery), and were one of them left out, a job coming back would collide with
the duplicate let in meanwhile and its own ending could not be written. A duplicate is
answered with the job that holds the key.

A period makes the key one per time slot of that length, counted by the store's clock
from the Unix epoch (`period=timedelta(hours=1)`: at most one job per key per clock
hour): a slot, unlike a window sliding back from each submission, is something a unique
index can decide.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.status import Status

MAX_UNIQUE_KEY_LENGTH = 255
# What a unique job counts in unless told otherwise: while it waits or runs.
ALWAYS_COUNTED: frozenset[Status] = frozenset({Status.PENDING, Status.PROCESSING})
DEFAULT_UNIQUE_STATES = ALWAYS_COUNTED
MIN_PERIOD = timedelta(seconds=1)
MAX_PERIOD = timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class Unique:
    """How a job is unique: by `key`, or by its type and payload (the fields `by` names,
    or all of it); among the jobs in `states`; per `period` when given."""

    key: str | None = None
    by: tuple[str, ...] | None = None
    states: frozenset[Status] = field(default=DEFAULT_UNIQUE_STATES)
    period: timedelta | None = None

    def __post_init__(self) -> None:
        """Raise `InvalidJob` saying what to change."""
        if self.key is not None and self.by is not None:
            raise InvalidJob("unique: give a key or the payload fields to derive it from, not both")
        if self.key is not None and not 1 <= len(self.key) <= MAX_UNIQUE_KEY_LENGTH:
            raise InvalidJob(f"unique key must be 1 to {MAX_UNIQUE_KEY_LENGTH} characters")
        if self.by is not None and (not self.by or not all(isinstance(f, str) for f in self.by)):
            raise InvalidJob("unique by must name one or more payload fields")
        missing = ALWAYS_COUNTED - self.states
        if missing:
            shown = ", ".join(sorted(status.value for status in missing))
            raise InvalidJob(
                f"unique states must include {shown}: a job moves between pending and "
                "processing by itself, and would collide with its own duplicate"
            )
        if self.period is not None and not MIN_PERIOD <= self.period <= MAX_PERIOD:
            raise InvalidJob(
                f"unique period must be between {MIN_PERIOD.total_seconds():g}s and "
                f"{MAX_PERIOD.days} days, got {self.period}"
            )
        if self.period is not None and self.period.microseconds:
            raise InvalidJob("unique period must be a whole number of seconds")

    def key_for(self, job_type: str, payload: Any) -> str:
        """The job's key, before its period's slot: the given key, or one derived from
        its type and payload (fields compared as JSON values, in any order)."""
        if self.key is not None:
            return self.key
        if self.by is None:
            chosen: Any = payload
        else:
            if not isinstance(payload, Mapping):
                raise InvalidJob("unique by names payload fields, but the payload is not an object")
            absent = [name for name in self.by if name not in payload]
            if absent:
                raise InvalidJob(f"unique by: the payload has no field {', '.join(absent)}")
            chosen = {name: payload[name] for name in self.by}
        canonical = json.dumps(chosen, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{job_type}:{digest}"

    @property
    def counted_in(self) -> tuple[str, ...]:
        """The statuses it counts in, as the store keeps them (sorted names)."""
        return tuple(sorted(status.value for status in self.states))


def unique_states(names: Collection[str]) -> frozenset[Status]:
    """Statuses by name; raise `InvalidJob` for a name that is none."""
    known = {status.value: status for status in Status}
    unknown = sorted(name for name in names if name not in known)
    if unknown:
        raise InvalidJob(f"unique states: unknown status {', '.join(unknown)}")
    return frozenset(known[name] for name in names)
