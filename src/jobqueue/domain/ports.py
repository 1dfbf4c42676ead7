"""The outside things the core needs, named by what they do.

Declared here, by the code that consumes them; adapters implement them, and the unit
tests' fakes implement them too (a contract suite keeps both honest).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from jobqueue.domain.bulk import Selection, SelectionCount
from jobqueue.domain.dependencies import Dependency, Step
from jobqueue.domain.fields import DEFAULT_QUEUE, JsonValue
from jobqueue.domain.flow import Claimed, QueueLimits
from jobqueue.domain.job import Job, Lease, NewJob
from jobqueue.domain.job_types import JobType, JsonSchema, PublishedType
from jobqueue.domain.listing import JobPage, JobQuery, KeyLookup
from jobqueue.domain.outcome import Decision
from jobqueue.domain.periodic import LastSlot
from jobqueue.domain.processes import LiveProcess, ProcessInfo, Unconsumed
from jobqueue.domain.progress import Progress
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import Status
from jobqueue.domain.throughput import RollupCounts, Slot, Window


@dataclass(frozen=True, slots=True)
class Submitted:
    job: Job
    # True when an Idempotency-Key matched an earlier identical submission: no new job.
    replayed: bool
    # True when another job held the submission's unique key: `job` is that job.
    duplicate: bool = False


class PeriodicSlots(Protocol):
    """The last slot each periodic job ran (`domain/periodic.py`), kept by the store so that
    a slot runs at most once, ever."""

    async def insert_slot(
        self, name: str, slot: datetime, new: NewJob, *, missed: bool = False
    ) -> Job | None:
        """Store `new` as the job of `slot` of schedule `name`, in the same write that moves
        the schedule's last slot to `slot`, if `slot` is after it (`missed`, a slot made up
        for: only for a schedule that ran before). Return the job; None when the slot ran
        already, or when another job holds `new`'s unique key (the slot is used all the
        same)."""
        ...

    async def last_slots(self) -> Mapping[str, LastSlot]:
        """Each schedule that ran, with its last slot (and that slot's job)."""
        ...


class AttemptTransaction(Protocol):
    """An attempt's own transaction (`JobContext.transaction`), open until its ending."""

    @property
    def connection(self) -> Any:
        """What the handler writes on (the adapter's connection)."""
        ...

    async def finish(self, lease: Lease, decision: Decision) -> bool:
        """Write the ending in this transaction, fenced by `lease`, and commit both; when
        the lease no longer held the job, roll it all back and return False."""
        ...

    async def abandon(self) -> None:
        """Roll it back: the attempt did not complete."""
        ...


class AttemptTransactions(Protocol):
    async def begin(self) -> AttemptTransaction: ...


class JobStore(PeriodicSlots, Protocol):
    """The state machine's operations, each one atomic compare-and-swap in the store.

    Outcome writes and renewals (`record_many`, `renew`) are fenced by the claim's lease,
    each row by its own. Operations
    on a job id raise `JobNotFound` or `InvalidTransition`; `submit` raises
    `IdempotencyConflict`. Every operation raises `StoreUnavailable` when the store fails.
    """

    async def submit(self, new: NewJob) -> Submitted: ...

    async def submit_many(self, news: Sequence[NewJob]) -> Sequence[Submitted]:
        """Every job of `news`, or none (one transaction): each answered as by `submit`,
        in the order given; a conflict of any one fails the whole call."""
        ...

    async def submit_graph(self, steps: Sequence[Step]) -> Sequence[Submitted]:
        """Every job of `steps`, jobs that depend on each other by name and on stored jobs
        by id (`dependencies.py`), or none; raises a `DependencyError` for a graph that
        cannot be stored (nothing was)."""
        ...

    async def dependency_results(self, ids: Sequence[UUID]) -> Sequence[Dependency]:
        """The jobs of `ids` as a dependent's handler reads them (those still stored)."""
        ...

    async def workflow(self, workflow_id: UUID) -> Sequence[Job]:
        """A workflow's jobs (results left out), in submission order, at most
        `MAX_WORKFLOW_JOBS`; raises `WorkflowNotFound` when it has none."""
        ...

    async def cancel_workflow(self, workflow_id: UUID) -> int:
        """Cancel every live job of a workflow (running ones are told); how many."""
        ...

    async def retry_workflow(self, workflow_id: UUID) -> int:
        """Retry a workflow's jobs that ended without completing, each back to waiting
        for those of its dependencies that are live again (or pending); how many."""
        ...

    async def get(self, job_id: UUID) -> Job: ...

    async def claim(
        self,
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
        *,
        types: Collection[str],
    ) -> Claimed:
        """Up to `limit` due pending jobs of `queue` and of `types` (the types the claiming
        process runs), now processing under a fresh lease each, in the order
        `domain/claims.py` gives: the most urgent priority first; within it, the types in
        turn, each claim starting one type further on; within a type, due order."""
        ...

    async def record_many(self, endings: Sequence[tuple[Lease, Decision]]) -> set[Lease]:
        """End, in one write, each attempt whose lease still holds its job, as its decision
        says; return the leases that held. Due times (`decision.delay`) are counted from
        the store's clock.

        Each job is fenced by its own lease: one not returned was lost (its lease expired
        and the job was recovered, or a newer claim superseded it) and its decision is
        dropped; the others are unaffected. Leases, not ids, are returned: a batch may hold
        a stale attempt's lease and the current one for the same job, and only the current
        one may count.
        """
        ...

    async def record_and_claim(
        self,
        endings: Sequence[tuple[Lease, Decision]],
        limit: int,
        lease: timedelta,
        queue: str = DEFAULT_QUEUE,
        *,
        types: Collection[str],
    ) -> tuple[set[Lease], Claimed]:
        """`record_many(endings)` and `claim(...)` at once, atomically: one write
        where a busy pool would make two. The claim does not see the endings' effects: a
        job they make due again is claimable from the next call on."""
        ...

    async def renew(self, leases: Sequence[Lease], lease: timedelta) -> set[Lease]:
        """Extend, in one write, each of `leases` that still holds its job to `lease` from
        now (the store's clock); return those that held. A lease not returned is lost."""
        ...

    async def record_progress(self, reports: Sequence[tuple[Lease, Progress]]) -> set[Lease]:
        """Write, in one write, each running attempt's latest progress report, fenced by
        its lease as `renew` is; return the leases that held (a report of a lost lease is
        dropped)."""
        ...

    async def watch(self, job_id: UUID) -> None:
        """Mark a live job as waited for: the write that ends it, whoever makes it (its
        worker, lease recovery, an operator), or deletes it, announces it on the store's
        channel of endings. A job that ended already, or does not exist, is left alone."""
        ...

    async def retry(self, job_id: UUID) -> Job:
        """An operator's retry: a failed, dead-lettered or cancelled job back to pending
        with a fresh attempt budget, its attempts so far kept in its history."""
        ...

    async def cancel(self, job_id: UUID) -> Job:
        """An operator's cancel: a pending or running job is cancelled for good. A running
        attempt loses its lease in the same write (nothing it does later is written), and
        its process is told to stop it."""
        ...

    async def reschedule(
        self, job_id: UUID, *, run_at: datetime | None = None, delay: timedelta = timedelta(0)
    ) -> Job:
        """An operator's reschedule of a pending job: due at `run_at`, else `delay` from
        now by the store's clock (now: "run now"). Its attempts and options stay."""
        ...

    async def delete(self, job_id: UUID) -> Job:
        """An operator's delete of one job in any status but processing; return it as it
        was. Its unique key is free from then on."""
        ...

    async def cancel_many(self, selection: Selection) -> int:
        """`cancel` the first jobs `selection` names (pending or processing), at most its
        limit, skipping any a concurrent call or a worker's write holds; return how many."""
        ...

    async def retry_many(self, selection: Selection) -> int:
        """`retry` the oldest jobs `selection` names, at most its limit, skipping any a
        concurrent call holds; return how many."""
        ...

    async def discard_many(self, selection: Selection) -> int:
        """Delete the oldest jobs `selection` names, at most its limit, as retention would
        later; return how many."""
        ...

    async def count_selected(self, selection: Selection) -> SelectionCount:
        """How many jobs `selection` names among the first `bulk.COUNT_BUDGET` of its
        status's index range (more than the limit: a bulk call acts on the limit's
        worth); nothing is locked."""
        ...

    async def recover_expired(self, limit: int) -> Sequence[Job]:
        """Jobs whose lease ran out: to pending, or to dead_letter after the last attempt."""
        ...

    async def prune_finished(self, older_than: Mapping[Status, timedelta], limit: int) -> int:
        """Delete up to `limit` finished jobs, oldest first (within each type: the batch may
        take one type's before another's older ones): of each status in `older_than`,
        those that finished longer ago than its age by the store's clock. Return how many.

        Raises `ValueError` for a status that is not prunable (`check_prune_request`): dead
        letters await a person and live jobs are work to do, so none of them is ever pruned.
        """
        ...

    async def prune_key_starts(self, limit: int) -> int:
        """Forget up to `limit` partition keys' windows of starts whose last start has
        left its queue's key rate period (or whose queue has no key rate now): a key
        that stops getting jobs is not visited by claims again. Return how many."""
        ...

    async def list_jobs(self, query: JobQuery) -> JobPage:
        """One page of the jobs `query` asks for, in its status's order (`TRAITS`), ties
        broken by id; `next` is set only when more jobs follow the page. A query's
        `search` reads at most its budget of rows (`JobPage.searched`)."""
        ...

    async def find_by_key(self, lookup: KeyLookup) -> Job | None:
        """The job holding `lookup`'s key, by the key's unique index, or None."""
        ...

    async def pause_queue(self, queue: str) -> QueueState:
        """Stop claims from `queue` in every process from the moment this returns (running
        jobs finish); announced to the workers. Pausing a paused queue changes nothing."""
        ...

    async def resume_queue(self, queue: str) -> QueueState:
        """Let `queue` be claimed from again; announced to the workers."""
        ...

    async def paused_queues(self, queues: Sequence[str]) -> set[str]:
        """Which of `queues` are paused now."""
        ...

    async def set_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState:
        """An operator's limits for `queue` (`NO_LIMITS` lifts them), obeyed by every claim
        from the moment this returns, in every process, and kept until an operator
        changes them, whatever settings declare."""
        ...

    async def declare_queue_limits(self, queue: str, limits: QueueLimits) -> QueueState | None:
        """The limits a process's settings declare for `queue` (`NO_LIMITS`: none), written
        unless an operator set its limits; the state written, or None when left alone."""
        ...

    async def queue_summaries(self, max_age: timedelta | None = None) -> Sequence[QueueSummary]:
        """Every queue with live or held jobs, or paused or resumed once, by name.

        With `max_age`, the counts may be that old (older while a recount runs: a page
        refreshed every few seconds must not count every pending job each time); whether
        a queue is paused and who consumes it are read now."""
        ...

    async def queue_summary(self, queue: str, max_age: timedelta | None = None) -> QueueSummary:
        """`queue`'s summary alone, as `queue_summaries` has it; a queue nothing names yet
        is running and holds no jobs."""
        ...

    async def ping(self) -> None:
        """Raise `StoreUnavailable` unless the store answers."""
        ...


class PayloadDecoder(Protocol):
    """Turns a JSON payload into a handler's declared payload type.

    Raises `InvalidPayload` with a precise reason; the domain cannot use a
    serialisation library, so the conversion is an adapter's.
    """

    def decode(self, job_type: str, payload: JsonValue, into: type[Any]) -> Any: ...

    def schema(self, job_type: str, payload_type: type[Any]) -> JsonSchema | None:
        """The JSON Schema of what `decode` accepts into `payload_type`; None when it
        cannot say (the type is then published as taking any JSON)."""
        ...


class JobTypeCatalog(Protocol):
    """Where workers publish the job types they run, and API processes read them."""

    async def publish(self, types: Sequence[JobType], by: str) -> None:
        """Write `types` as worker `by`'s; each replaces what was published of it."""
        ...

    async def published(self) -> Sequence[PublishedType]:
        """Every type ever published (the latest publication of each), by name."""
        ...


class ProcessRegistry(Protocol):
    """Where worker processes say they are alive, and what they consume."""

    async def heartbeat(self, process: ProcessInfo, ttl: timedelta) -> None:
        """Record `process` as live for `ttl` from now (the store's clock), and forget
        every process whose time ran out."""
        ...

    async def leave(self, process_id: UUID) -> None:
        """Forget the process at once (a clean shutdown)."""
        ...

    async def live(self) -> Sequence[LiveProcess]:
        """The processes live now, by host and pid."""
        ...

    async def newly_unconsumed(self, grace: timedelta) -> Sequence[Unconsumed]:
        """Queues whose jobs have been due for `grace` with no live process consuming
        them, each returned once (to one caller, across processes) until a process
        consumes it again."""
        ...


class ThroughputRollup(Protocol):
    """The rollup the dashboard charts: per minute and queue, what attempts came to and
    how long jobs waited for a worker (`domain/throughput.py`)."""

    async def add(self, tallies: Mapping[str, RollupCounts]) -> None:
        """Add each queue's counts to its row of the current minute (the store's clock),
        to whatever other processes added there."""
        ...

    async def series(self, window: Window, queue: str | None = None) -> Sequence[Slot]:
        """`window.points` slots, oldest first, the last holding now: the sums of every
        queue's rows in each (of `queue`'s only, when given); empty slots are zeros."""
        ...

    async def prune(self, older_than: timedelta, limit: int) -> int:
        """Delete up to `limit` rows of minutes older than `older_than`; how many went."""
        ...
