"""How far a running job got, as its handler reports it (`JobContext.progress`).

A fraction, counters (`done` of `total`), a message, or any of them: what a handler
knows. Written by the worker at most about once a second per job, fenced by the lease
like every other write of an attempt, and kept after the job ends (its last report says
how far it got), so a record and the dashboard show it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from jobqueue.domain.fields import storable_text

# A progress message is a line for a person watching the job, not a log.
MAX_PROGRESS_MESSAGE = 1_000
# Counters fit PostgreSQL's bigint and JSON's safe integers alike.
MAX_COUNTER = 2**53


@dataclass(frozen=True, slots=True)
class Progress:
    """One report. `fraction` is in [0, 1]; when left out and `total` is given, it is
    `done / total`. `at` is when the store wrote it (its clock); None before."""

    fraction: float | None = None
    done: int | None = None
    total: int | None = None
    message: str | None = None
    at: datetime | None = None

    @classmethod
    def build(
        cls,
        fraction: float | None = None,
        *,
        done: int | None = None,
        total: int | None = None,
        message: str | None = None,
    ) -> Progress:
        """Check a handler's report: a `TypeError` or `ValueError` says what is wrong
        with it (a handler's mistake, raised where it made it)."""
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, int | float):
                raise TypeError(f"progress fraction must be a number, got {fraction!r}")
            if not (math.isfinite(fraction) and 0 <= fraction <= 1):
                raise ValueError(f"progress fraction must be between 0 and 1, got {fraction}")
            fraction = float(fraction)
        for name, count in (("done", done), ("total", total)):
            if count is not None and (
                isinstance(count, bool)
                or not isinstance(count, int)
                or not 0 <= count <= MAX_COUNTER
            ):
                raise ValueError(f"progress {name} must be a whole number from 0, got {count!r}")
        if done is not None and total is not None and done > total:
            raise ValueError(f"progress done ({done}) must not exceed total ({total})")
        if message is not None:
            if not isinstance(message, str):
                raise TypeError(f"progress message must be text, got {type(message).__name__}")
            message = storable_text(message, MAX_PROGRESS_MESSAGE)
        if fraction is None and done is not None and total:
            fraction = done / total
        if (fraction, done, total, message) == (None, None, None, None):
            raise ValueError("progress needs a fraction, counters or a message")
        return cls(fraction, done, total, message)

    def as_json(self) -> dict[str, float | int | str]:
        """What the store keeps (without `at`, which it adds): the fields given."""
        fields = {
            "fraction": self.fraction,
            "done": self.done,
            "total": self.total,
            "message": self.message,
        }
        return {name: value for name, value in fields.items() if value is not None}
