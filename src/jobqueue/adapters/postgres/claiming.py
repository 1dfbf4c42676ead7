"""A process's claims of each queue (`PostgresJobStore.claim`, `record_and_claim`): where
each range's next scan starts (`claim_cursor.py`), which statement claims it (with
limits or without, as its last claim found it: `queries/claims.py`), and what came back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from jobqueue.adapters.postgres.claim_cursor import ClaimCursor, Ranges
from jobqueue.adapters.postgres.queries import claims as c
from jobqueue.adapters.postgres.rows import Row, job_from_row
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.errors import StoreError, StoreUnavailable
from jobqueue.domain.flow import Claimed, Headroom
from jobqueue.domain.job import Lease

# A statement sent on its own, its failures domain errors (`PostgresJobStore._fetch`).
Fetch = Callable[[Statement, Mapping[str, Any]], Awaitable[Sequence[Row]]]


class QueueClaims:
    """Claims by `worker` (as the attempt log names it), sent through `fetch`."""

    def __init__(self, fetch: Fetch, worker: str) -> None:
        self._fetch = fetch
        self._worker = worker
        self._cursors: defaultdict[str, ClaimCursor] = defaultdict(ClaimCursor)
        # Whether each queue had limits at its last claim: the statement its next uses.
        self._limited: defaultdict[str, bool] = defaultdict(bool)

    async def claim(
        self, queue: str, limit: int, lease: timedelta, types: Collection[str]
    ) -> Claimed:
        ranges = self._cursors[queue].next(types)
        statement = c.LIMITED_CLAIM if self._limited[queue] else c.CLAIM
        rows = await self._fetch(statement, self._values(queue, limit, lease, ranges))
        return await self._claimed(queue, rows, limit, lease, ranges)

    async def record_and_claim(
        self,
        endings: Mapping[str, Any],
        queue: str,
        limit: int,
        lease: timedelta,
        types: Collection[str],
    ) -> tuple[set[Lease], Claimed]:
        """`endings`: the values of `jobs.ENDINGS`."""
        ranges = self._cursors[queue].next(types)
        values = {**endings, **self._values(queue, limit, lease, ranges)}
        limited = self._limited[queue]
        statement = c.RECORD_AND_LIMITED_CLAIM if limited else c.RECORD_AND_CLAIM
        rows = await self._fetch(statement, values)
        first = rows[0]
        held = {
            Lease(job_id, token)
            for job_id, token in zip(
                first["ended_ids"] or (), first["ended_tokens"] or (), strict=True
            )
        }
        return held, await self._claimed(queue, rows, limit, lease, ranges)

    def _values(self, queue: str, limit: int, lease: timedelta, ranges: Ranges) -> dict[str, Any]:
        return {
            "worker": self._worker,
            "queue": queue,
            "limit": limit,
            "lease": lease,
            "priorities": [priority for priority, _ in ranges.ranges],
            "types": [job_type for _, job_type in ranges.ranges],
            "after_run_ats": [run_at for run_at, _ in ranges.after],
            "after_ids": [job_id for _, job_id in ranges.after],
        }

    async def _claimed(
        self, queue: str, rows: Sequence[Row], limit: int, lease: timedelta, ranges: Ranges
    ) -> Claimed:
        """What a claim returned (a row per job taken, or one without a job), topped up
        from the start of each range when it came back short of due jobs: jobs due behind
        the cursor (released, or committed late) are then claimed at once, not a poll
        later. Short because a limit held it back, it is not topped up. A claim without
        limits that found the queue limited took nothing: the limited one goes at once."""
        claimed = _claimed_from(rows, limit)
        limited, self._limited[queue] = self._limited[queue], rows[0]["limited"]
        if self._limited[queue] and not limited:
            claimed = await self._more(
                c.LIMITED_CLAIM, self._values(queue, limit, lease, ranges), limit
            )
        if len(claimed) < limit and not claimed.held_back and not ranges.at_start:
            wanted = limit - len(claimed)
            statement = c.LIMITED_CLAIM if self._limited[queue] else c.CLAIM
            values = self._values(queue, wanted, lease, ranges.from_start())
            more = await self._more(statement, values, wanted)
            claimed = Claimed(
                claimed + more,
                held_back=claimed.held_back | more.held_back,
                retry_in=more.retry_in,
            )
        # In the order the ranges were read: the order the pool starts them in.
        position = {each: index for index, each in enumerate(ranges.ranges)}
        claimed.sort(key=lambda job: (position[job.priority, job.type], job.run_at, job.id))
        self._cursors[queue].claimed(claimed, limit)
        return claimed

    async def _more(self, statement: Statement, values: Mapping[str, Any], wanted: int) -> Claimed:
        """A second claim in the same call; nothing when it fails: the first one is
        committed, and its jobs must reach the pool whatever happens to this one (the
        next claim starts over, nothing having moved on)."""
        try:
            rows = await self._fetch(statement, values)
        except (StoreUnavailable, StoreError):
            return Claimed()
        self._limited[values["queue"]] = rows[0]["limited"]
        return _claimed_from(rows, wanted)


def _claimed_from(rows: Sequence[Row], asked: int) -> Claimed:
    """A claim's rows as the jobs it took and what its queue's limits had left (on every
    row, and on the one row a claim that took nothing returns)."""
    first = rows[0]
    headroom = Headroom(first["concurrency_left"], first["rate_left"], first["rate_opens_in"])
    jobs = [job_from_row(row) for row in rows if row["id"] is not None]
    return Claimed.within(jobs, asked, headroom)
