"""What a job type's handler declares for the jobs submitted without their own
(`TypeOptions`), and where a way in finds them (`options_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from jobqueue.domain.fields import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    check_max_attempts,
    check_priority,
    check_queue,
    check_timeout,
)
from jobqueue.domain.partition import check_partition_by
from jobqueue.domain.unique import Unique


@dataclass(frozen=True, slots=True)
class TypeOptions:
    """What a job type's handler declares for the jobs submitted without their own: the
    queue they go to, their priority, their attempt budget and attempt timeout (None:
    the service's), how they are unique, and the payload fields their partition key is
    made of (`partition.py`)."""

    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    max_attempts: int | None = None
    timeout: timedelta | None = None
    unique: Unique | None = None
    partition_by: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Raise `InvalidJob` saying what to change."""
        check_partition_by(self.partition_by)
        check_queue(self.queue)
        check_priority(self.priority)
        if self.max_attempts is not None:
            check_max_attempts(self.max_attempts)
        if self.timeout is not None:
            check_timeout(self.timeout)


# What a type without a handler, or one that declares nothing, gets.
NO_OPTIONS = TypeOptions()

# The options a submission may leave to its type and the service (`NewJob.left_out`):
# `TypeOptions`' fields, `unique` standing for the three unique_ fields it resolves to,
# `partition_by` for `partition_key`.
OPTIONS: frozenset[str] = frozenset(TypeOptions.__dataclass_fields__)


class OptionsSource(Protocol):
    """What knows each job type's options: a `Registry`, or `KnownTypes`."""

    def options_for(self, job_type: str) -> TypeOptions: ...


def options_of(source: object, job_type: str) -> TypeOptions:
    """`job_type`'s options if `source` knows options (a `Registry`, `KnownTypes`); a plain
    collection of type names declares none."""
    if source is not None and hasattr(source, "options_for"):
        known: OptionsSource = source
        return known.options_for(job_type)
    return NO_OPTIONS
