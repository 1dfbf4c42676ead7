"""The order in which a claim takes due jobs.

The most urgent priority first. Within a priority, the job types the claiming process
has handlers for, in turn: each claim starts one type further on, so that a flood of one
type cannot keep another's jobs waiting for more than about one claim. Within a type,
in due order. A process claims only the types it can run: the jobs of other types in
the same queue wait, untouched, for a process that has them.
"""

from __future__ import annotations

from collections.abc import Collection

from jobqueue.domain.fields import PRIORITIES

# One range of due jobs a claim reads: a priority, and a job type.
Range = tuple[int, str]


def claim_ranges(types: Collection[str], turn: int) -> list[Range]:
    """The ranges claim number `turn` of a queue reads, in order, for a process that runs
    `types`. Raises `ValueError` when it runs none."""
    names = sorted(types)
    if not names:
        raise ValueError("a claim needs the job types its process runs")
    start = turn % len(names)
    rotated = names[start:] + names[:start]
    return [(priority, name) for priority in PRIORITIES for name in rotated]
