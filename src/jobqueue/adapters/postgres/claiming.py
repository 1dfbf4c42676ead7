"""A process's claims of each queue (`PostgresJobStore.claim`, `record_and_claim`): where
each range's next scan starts (`claim_cursor.py`) and the key its rotation resumes after
(`queries/keys.py`), which statement claims it (without limits, with limits on the whole
queue, with type rates, or with a per-key limit, as its last claim found it:
`queries/claims.py`), and what came back.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

from jobqueue.adapters.postgres.claim_cursor import START, ClaimCursor, Key, Ranges
from jobqueue.adapters.postgres.queries import claims as c
from jobqueue.adapters.postgres.queries import keys
from jobqueue.adapters.postgres.rows import Row, job_from_row
from jobqueue.adapters.postgres.statement import Statement
from jobqueue.domain.claims import Range
from jobqueue.domain.errors import StoreError, StoreUnavailable
from jobqueue.domain.flow import Claimed, Headroom
from jobqueue.domain.job import Lease

# A statement sent on its own, its failures domain errors (`PostgresJobStore._fetch`).
Fetch = Callable[[Statement, Mapping[str, Any]], Awaitable[Sequence[Row]]]


class ClaimedWith(enum.Enum):
    """Which limits a queue had at its last claim, and so which statements claim it."""

    NONE = (c.CLAIM, c.RECORD_AND_CLAIM)
    QUEUE = (c.LIMITED_CLAIM, c.RECORD_AND_LIMITED_CLAIM)
    # Type rates, with or without limits of the whole queue.
    TYPES = (c.TYPED_CLAIM, c.RECORD_AND_TYPED_CLAIM)
    KEYS = (c.KEYED_CLAIM, c.RECORD_AND_KEYED_CLAIM)
    QUEUE_AND_KEYS = (c.LIMITED_KEYED_CLAIM, c.RECORD_AND_LIMITED_KEYED_CLAIM)

    @classmethod
    def of(cls, row: Row) -> ClaimedWith:
        if row["keyed"]:
            return cls.QUEUE_AND_KEYS if row["limited"] else cls.KEYS
        if row["type_rated"]:
            return cls.TYPES
        return cls.QUEUE if row["limited"] else cls.NONE

    @property
    def keyed(self) -> bool:
        return self in (ClaimedWith.KEYS, ClaimedWith.QUEUE_AND_KEYS)

    @property
    def claim(self) -> Statement:
        return self.value[0]

    @property
    def record_and_claim(self) -> Statement:
        return self.value[1]


class QueueClaims:
    """Claims by `worker` (as the attempt log names it), sent through `fetch`."""

    def __init__(self, fetch: Fetch, worker: str) -> None:
        self._fetch = fetch
        self._worker = worker
        self._cursors: defaultdict[str, ClaimCursor] = defaultdict(ClaimCursor)
        # The limits each queue had at its last claim: the statements its next uses.
        self._limits: defaultdict[str, ClaimedWith] = defaultdict(lambda: ClaimedWith.NONE)
        # The key each queue's rotation resumes after ("": from the first), and where
        # each range's sweep for jobs without a key goes on.
        self._after_key: defaultdict[str, str] = defaultdict(str)
        self._sweeps: defaultdict[str, dict[Range, Key]] = defaultdict(dict)
        # Keyed claims of each queue since its last sweep (a first claim sweeps), and
        # whether that sweep found jobs without a key (`keys.SWEEP_EVERY`).
        self._unswept: defaultdict[str, int] = defaultdict(lambda: keys.SWEEP_EVERY - 1)
        self._found_unkeyed: defaultdict[str, bool] = defaultdict(bool)

    async def claim(
        self, queue: str, limit: int, lease: timedelta, types: Collection[str]
    ) -> Claimed:
        ranges = self._cursors[queue].next(types)
        sent = self._limits[queue]
        values = self._values(queue, limit, lease, ranges, sent)
        rows = await self._fetch(sent.claim, values)
        return await self._claimed(queue, rows, limit, lease, ranges, sent, values)

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
        sent = self._limits[queue]
        values = {**endings, **self._values(queue, limit, lease, ranges, sent)}
        rows = await self._fetch(sent.record_and_claim, values)
        # On one row (the first), or on none when no ending held its lease; looked for,
        # not assumed at rows[0]: read from the wrong row, every ending would seem lost.
        ended = next((row for row in rows if row["ended_ids"] is not None), None)
        ids, tokens = ((), ()) if ended is None else (ended["ended_ids"], ended["ended_tokens"])
        held = {Lease(job_id, token) for job_id, token in zip(ids, tokens, strict=True)}
        return held, await self._claimed(queue, rows, limit, lease, ranges, sent, values)

    def _values(
        self, queue: str, limit: int, lease: timedelta, ranges: Ranges, sent: ClaimedWith
    ) -> dict[str, Any]:
        """The values of the statements of `sent`: the rotation's and the sweep's only
        for a queue with a per-key limit (a plain claim, the hot path, makes none)."""
        values = {
            "worker": self._worker,
            "queue": queue,
            "limit": limit,
            "lease": lease,
            "priorities": [priority for priority, _ in ranges.ranges],
            "types": [job_type for _, job_type in ranges.ranges],
            "after_run_ats": [run_at for run_at, _ in ranges.after],
            "after_ids": [job_id for _, job_id in ranges.after],
        }
        if sent.keyed:
            sweep = [self._sweeps[queue].get(each, START) for each in ranges.ranges]
            values.update(
                sweep=self._sweeping(queue),
                after_key=self._after_key[queue],
                keys=max(2 * limit, keys.KEYS_VISITED),
                key_priorities=sorted({priority for priority, _ in ranges.ranges}),
                head_after_run_ats=[swept[0] for swept in sweep],
                head_after_ids=[swept[1] for swept in sweep],
            )
        return values

    def _sweeping(self, queue: str) -> bool:
        """Whether this keyed claim of `queue` sweeps for jobs without a key."""
        due = self._found_unkeyed[queue] or self._unswept[queue] + 1 >= keys.SWEEP_EVERY
        self._unswept[queue] = 0 if due else self._unswept[queue] + 1
        return due

    async def _claimed(
        self,
        queue: str,
        rows: Sequence[Row],
        limit: int,
        lease: timedelta,
        ranges: Ranges,
        sent: ClaimedWith,
        values: Mapping[str, Any],
    ) -> Claimed:
        """What a claim returned (a row per job taken, or one without a job), topped up
        from the start of each range when it came back short of due jobs: jobs due behind
        the cursor (released, or committed late) are then claimed at once, not a poll
        later. Short because a limit held it back, it is not topped up, nor is a claim of
        keys (it reads no range cursor). A claim that found the queue's limits other
        than it was written for took nothing of it: the right one goes at once. `sent`:
        the statements it was sent with (another claim of the queue may have changed the
        queue's since), and `values` its values."""
        claimed = self._took(queue, rows, limit, ranges.ranges, sent, values)
        self._limits[queue] = ClaimedWith.of(rows[0])
        now = self._limits[queue]
        if now is not sent and not claimed:
            values = self._values(queue, limit, lease, ranges, now)
            claimed = await self._more(now, values, limit, ranges.ranges)
        topped = not self._limits[queue].keyed and not ranges.at_start
        if len(claimed) < limit and not claimed.held_back and topped:
            wanted = limit - len(claimed)
            now = self._limits[queue]
            values = self._values(queue, wanted, lease, ranges.from_start(), now)
            more = await self._more(now, values, wanted, ranges.ranges)
            claimed = Claimed(
                claimed + more,
                held_back=claimed.held_back | more.held_back,
                retry_in=more.retry_in,
                windows_open_in=more.windows_open_in,
            )
        # In the order the ranges were read: the order the pool starts them in.
        position = {each: index for index, each in enumerate(ranges.ranges)}
        claimed.sort(key=lambda job: (position[job.priority, job.type], job.run_at, job.id))
        self._cursors[queue].claimed(claimed, limit)
        return claimed

    async def _more(
        self, sent: ClaimedWith, values: Mapping[str, Any], wanted: int, ranges: list[Range]
    ) -> Claimed:
        """A second claim in the same call; nothing when it fails: the first one is
        committed, and its jobs must reach the pool whatever happens to this one (the
        next claim starts over, nothing having moved on)."""
        try:
            rows = await self._fetch(sent.claim, values)
        except (StoreUnavailable, StoreError):
            return Claimed()
        self._limits[values["queue"]] = ClaimedWith.of(rows[0])
        return self._took(values["queue"], rows, wanted, ranges, sent, values)

    def _swept(self, queue: str, row: Row, ranges: list[Range]) -> None:
        """Where each range's sweep goes on: after the last job it read, or from the
        start once a range had fewer left than the probe."""
        ends = zip(
            row["head_positions"],
            row["head_reads"],
            row["head_run_ats"],
            row["head_ids"],
            strict=True,
        )
        sweep = self._sweeps[queue] = {}
        for position, read, run_at, job_id in ends:
            if read >= keys.SWEEP_PROBE:
                sweep[ranges[position - 1]] = (run_at, job_id)

    def _took(
        self,
        queue: str,
        rows: Sequence[Row],
        asked: int,
        ranges: list[Range],
        sent: ClaimedWith,
        values: Mapping[str, Any],
    ) -> Claimed:
        """A claim's rows as the jobs it took and what its queue's limits had left (on
        every row, and on the one row a claim that took nothing returns); where its
        rotation of keys and its sweep resume, for a claim sent as `sent`'s with
        `values`."""
        first = rows[0]
        if first["next_after_key"] is not None:
            self._after_key[queue] = first["next_after_key"]
        headroom = Headroom(
            first["concurrency_left"],
            first["rate_left"],
            first["rate_opens_in"],
            first["keys_full"],
            first["keys_rate_spent"],
            first["key_rate_opens_in"],
            first["types_rate_spent"],
            first["type_rate_opens_in"],
        )
        jobs = [job_from_row(row) for row in rows if row["id"] is not None]
        if sent.keyed and values["sweep"]:
            self._swept(queue, first, ranges)
            self._found_unkeyed[queue] = any(job.partition_key is None for job in jobs)
        return Claimed.within(jobs, asked, headroom)
