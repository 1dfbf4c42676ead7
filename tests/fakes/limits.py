"""Queue limits for the in-memory store (`tests/fakes/`), kept as PostgreSQL's claim
keeps them (`adapters/postgres/queries/flow.py`): the running jobs are the slots, and the
starts within the rate's window are remembered per queue."""

from __future__ import annotations

import builtins
from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from jobqueue.adapters.postgres.queries.keys import KEYS_VISITED
from jobqueue.domain.flow import NO_LIMITS, Headroom, LimitsSource, QueueLimits, Rate
from jobqueue.domain.job import Job
from jobqueue.domain.queues import QueueState


class FakeLimits:
    def __init__(self) -> None:
        self._limits: dict[str, tuple[QueueLimits, LimitsSource]] = {}
        self._starts: defaultdict[str, list[datetime]] = defaultdict(list)
        self._key_starts: defaultdict[tuple[str, str], list[datetime]] = defaultdict(list)
        self._type_starts: defaultdict[tuple[str, str], list[datetime]] = defaultdict(list)
        # The key each queue's rotation resumes after, as a process keeps it.
        self._after_key: defaultdict[str, str] = defaultdict(str)

    def set(self, queue: str, limits: QueueLimits) -> None:
        if limits.any:
            self._limits[queue] = (limits, LimitsSource.OPERATOR)
        else:
            self._limits.pop(queue, None)

    def declare(self, queue: str, limits: QueueLimits) -> bool:
        """Settings' limits, unless an operator's stand; whether they were written."""
        current = self._limits.get(queue)
        if current is not None and current[1] is LimitsSource.OPERATOR:
            return False
        if limits.any:
            self._limits[queue] = (limits, LimitsSource.SETTINGS)
            return True
        self._limits.pop(queue, None)
        return False

    # `builtins.set`: within this class, `set` names the method above.
    @property
    def queues(self) -> builtins.set[str]:
        return set(self._limits)

    def headroom(self, queue: str, running: int, now: datetime) -> Headroom:
        limits = self.limits(queue)
        concurrency = None if limits.concurrency is None else limits.concurrency - running
        if limits.rate is None:
            return Headroom(concurrency)
        left, opens_at = _window(self._recent(queue, now), limits.rate, now)
        return Headroom(concurrency, left, opens_at - now)

    def rotation(
        self,
        queue: str,
        due: list[Job],
        running: list[Job],
        limit: int,
        headroom: Headroom,
        now: datetime,
    ) -> tuple[list[Job], Headroom]:
        """`due` (in claim order) as a claim with a per-key limit takes them
        (`queries/keys.py`): the jobs without a key first (PostgreSQL finds those by a
        sweep of the queue; here, all at once), then key after key from the one after the
        last taken from, wrapping round, each up to its free slots (its running jobs and
        its rate's window), until `limit`; their starts are recorded per key."""
        limits = self.limits(queue)
        keys = sorted({job.partition_key for job in due if job.partition_key is not None})
        after = self._after_key[queue]
        keys = ([key for key in keys if key > after] + [key for key in keys if key <= after])[
            : max(2 * limit, KEYS_VISITED)
        ]
        busy = Counter(job.partition_key for job in running)
        order = [job for job in due if job.partition_key is None][:limit]
        visited: dict[str, tuple[int, int | None, datetime | None]] = {}
        for key in keys:
            if len(order) >= limit:
                break
            slots, rate_left, opens_at = self._key_turn(queue, key, busy[key], now)
            visited[key] = (slots, rate_left, opens_at)
            own = sorted(
                (job for job in due if job.partition_key == key),
                key=lambda job: (job.priority, job.run_at),
            )
            order += own[: max(0, min(slots, limit - len(order)))]
        order = order[:limit]
        taken = [job.partition_key for job in order if job.partition_key is not None]
        if taken or visited:
            self._after_key[queue] = str(taken[-1] if taken else list(visited)[-1])
        took = Counter(taken)
        for key, count in took.items():
            if limits.key_rate is not None:
                self._key_starts[queue, str(key)] += [now] * count
        if len(order) >= limit:
            return order, replace(headroom, keys_full=None)
        full = [key for key, (slots, _, _) in visited.items() if slots <= took[key]]
        spent = [
            opens_at
            for key, (_, rate_left, opens_at) in visited.items()
            if rate_left is not None and opens_at is not None and rate_left <= took[key]
        ]
        return order, replace(
            headroom,
            keys_full=len(full),
            keys_rate_spent=len(spent),
            key_rate_opens_in=min(spent) - now if spent else None,
        )

    def _key_turn(
        self, queue: str, key: str, running: int, now: datetime
    ) -> tuple[int, int | None, datetime | None]:
        """A key's free slots, what its rate has left and when its window opens (None
        without a key rate), as `jobqueue_key_turn` counts them."""
        limits = self.limits(queue)
        slots = None if limits.key_concurrency is None else limits.key_concurrency - running
        if limits.key_rate is None:
            return max(0, slots or 0), None, None
        period = limits.key_rate.period
        recent = sorted(at for at in self._key_starts[queue, key] if at > now - period)
        self._key_starts[queue, key] = recent
        rate_left, opens_at = _window(recent, limits.key_rate, now)
        slots = rate_left if slots is None else min(slots, rate_left)
        return max(0, slots), rate_left, opens_at

    def by_type_rates(
        self, queue: str, due: list[Job], types: Collection[str], now: datetime
    ) -> tuple[list[Job], dict[str, tuple[int, datetime]]]:
        """`due` (in claim order) less each rated type's jobs past what its window has
        left, and the turn of each rated type the claim runs (its slots, when its window
        lets one more start), as `queries/type_rates.py` takes them."""
        turns = {
            name: _window(self._of_type(queue, name, rate, now), rate, now)
            for name, rate in self.limits(queue).type_rates
            if name in types
        }
        seen: Counter[str] = Counter()
        allowed = []
        for job in due:
            seen[job.type] += 1
            if job.type not in turns or seen[job.type] <= turns[job.type][0]:
                allowed.append(job)
        return allowed, turns

    def types_started(
        self,
        queue: str,
        taken: list[Job],
        turns: dict[str, tuple[int, datetime]],
        headroom: Headroom,
        now: datetime,
    ) -> Headroom:
        """`taken`'s starts written into their types' windows; what the windows of the
        turns had left."""
        took = Counter(job.type for job in taken)
        for name in turns:
            self._type_starts[queue, name] += [now] * took[name]
        if not turns:
            return headroom
        spent = [opens_at for name, (left, opens_at) in turns.items() if left <= took[name]]
        return replace(
            headroom,
            types_rate_spent=len(spent),
            type_rate_opens_in=min(spent) - now if spent else None,
        )

    def _of_type(self, queue: str, name: str, rate: Rate, now: datetime) -> list[datetime]:
        recent = sorted(at for at in self._type_starts[queue, name] if at > now - rate.period)
        self._type_starts[queue, name] = recent
        return recent

    def forget_key_starts(self, now: datetime, limit: int) -> int:
        """Forget up to `limit` keys' windows whose last start left their period."""
        stale = [
            (queue, key)
            for (queue, key), starts in self._key_starts.items()
            if (rate := self.limits(queue).key_rate) is None
            or not starts
            or max(starts) <= now - rate.period
        ][:limit]
        for each in stale:
            del self._key_starts[each]
        return len(stale)

    def started(self, queue: str, count: int, now: datetime) -> None:
        if self.limits(queue).rate is not None:
            self._starts[queue] = self._recent(queue, now) + [now] * count

    def limits(self, queue: str) -> QueueLimits:
        return self._limits.get(queue, (NO_LIMITS, None))[0]

    def state(
        self, queue: str, paused_at: datetime | None, running: int, now: datetime
    ) -> QueueState:
        limits, source = self._limits.get(queue, (NO_LIMITS, None))
        return QueueState(
            queue,
            paused_at,
            limits,
            source,
            running if limits.concurrency or limits.key_concurrency else None,
            len(self._recent(queue, now)) if limits.rate is not None else None,
            tuple(
                (name, len(self._of_type(queue, name, rate, now)))
                for name, rate in limits.type_rates
            ),
        )

    def _recent(self, queue: str, now: datetime) -> list[datetime]:
        rate = self.limits(queue).rate
        if rate is None:
            return []
        return sorted(at for at in self._starts[queue] if at > now - rate.period)


def _window(recent: list[datetime], rate: Rate, now: datetime) -> tuple[int, datetime]:
    """What a rate's window of `recent` starts (sorted, all within the period) has left,
    and when it lets one more start."""
    return rate.limit - len(recent), (recent[0] if recent else now) + rate.period
