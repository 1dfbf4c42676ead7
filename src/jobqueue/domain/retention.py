"""How long finished jobs are kept, and which jobs may ever be deleted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from jobqueue.domain.status import PRUNABLE, TRAITS, Status

DEFAULT_COMPLETED = timedelta(days=7)
DEFAULT_FAILED = timedelta(days=30)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long finished jobs are kept after they finished; `None` keeps them forever.
    Cancelled jobs are kept as long as failed ones: both ended without success."""

    completed: timedelta | None = DEFAULT_COMPLETED
    failed: timedelta | None = DEFAULT_FAILED

    def __post_init__(self) -> None:
        for status, age in ((Status.COMPLETED, self.completed), (Status.FAILED, self.failed)):
            if age is not None and age <= timedelta(0):
                raise ValueError(
                    f"{status} jobs must be kept for a positive time (None keeps them), got {age}"
                )

    @classmethod
    def configured(cls, completed: timedelta, failed: timedelta) -> RetentionPolicy:
        """The policy of the RETENTION_* settings, where 0 keeps those jobs forever."""
        return cls(completed=completed or None, failed=failed or None)

    @property
    def ages(self) -> Mapping[Status, timedelta]:
        """The statuses pruned, each with the age from which its jobs are deleted."""
        kept = {
            Status.COMPLETED: self.completed,
            Status.FAILED: self.failed,
            Status.CANCELLED: self.failed,
        }
        return {status: age for status, age in kept.items() if age is not None}


def check_prune_request(older_than: Mapping[Status, timedelta], limit: int) -> None:
    """Raise `ValueError` unless a store may prune with these arguments.

    Only prunable (finished) jobs are ever deleted: a dead letter awaits a person, and
    pending or processing jobs are live work.
    """
    if limit < 1:
        raise ValueError(f"prune limit must be at least 1, got {limit}")
    for status, age in older_than.items():
        if not TRAITS[status].prunable:
            allowed = ", ".join(sorted(PRUNABLE))
            raise ValueError(f"only finished jobs ({allowed}) can be pruned, not {status}")
        if age < timedelta(0):
            raise ValueError(f"the age of {status} jobs to prune must not be negative, got {age}")
