"""A job: as the store holds it (`Job`, and `Lease`, the proof of one claim of it), and as a
producer submits it (`NewJob`), with the one rule that resolves a submission's options.

A producer says what it knows (`NewJob.build`: the type, the payload, and any of the
options); what it leaves out comes from the type's handler (`TypeOptions`, declared on
the registry or published by a worker) and then from the service (MAX_ATTEMPTS).
`resolve` is that rule, and every way in calls it: `POST /jobs`, `POST /jobs/batch`,
`enqueue`, `enqueue_many` and the periodic scheduler (the client goes through the API),
so the same job lands in the same queue, with the same priority, budget, timeout and
unique key, whichever way it was sent.

A job's fields are declared here once: the store's columns, its inserts and its rows,
and the API's records are derived from them (docs/design.md, "How to add a job field").
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from uuid import UUID

from jobqueue.domain.attempts import AttemptRecord, latest_attempt
from jobqueue.domain.fields import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    JsonValue,
    check_idempotency_key,
    check_json,
    check_max_attempts,
    check_priority,
    check_queue,
    check_schedule,
    check_timeout,
    check_type,
)
from jobqueue.domain.partition import check_partition_key, partition_key_of
from jobqueue.domain.progress import Progress
from jobqueue.domain.status import TRAITS, Phase, Status
from jobqueue.domain.type_options import NO_OPTIONS, OPTIONS, TypeOptions, options_of
from jobqueue.domain.unique import Unique


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof of one claim. Outcome writes are fenced by the token, which grows at every
    claim; attempt numbers cannot fence because an operator's retry or a release repeats
    them."""

    job_id: UUID
    token: int


@dataclass(frozen=True, slots=True)
class Job:
    id: UUID
    type: str
    payload: JsonValue
    status: Status
    attempts: int
    max_attempts: int
    run_at: datetime
    locked_until: datetime | None
    lease_token: int
    last_error: str | None
    idempotency_key: str | None
    created_at: datetime
    updated_at: datetime
    traceparent: str | None = None
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    # When its latest attempt was claimed, and by which process (host:pid).
    started_at: datetime | None = None
    worker: str | None = None
    # The endings of the earlier attempts it outlived (`attempts.py`), oldest first.
    attempt_log: tuple[AttemptRecord, ...] = ()
    # Snoozes since the job was submitted or an operator retried it (`outcome.Snooze`).
    snoozes: int = 0
    # Its unique key (`domain/unique.py`; with the period's slot), and the statuses in
    # which no other job may hold it; None for a job that is not unique.
    unique_key: str | None = None
    unique_states: tuple[str, ...] | None = None
    # How long one attempt may run; None: the worker's JOB_TIMEOUT.
    timeout: timedelta | None = None
    # Its queue's share it belongs to (`partition.py`); None: in no partition.
    partition_key: str | None = None
    # What its handler returned, as JSON (a completed job's, `Decision.complete`); None
    # when it returned nothing, and in listings, which leave it out (it may be large).
    result: JsonValue | None = None
    # Its handler's last report of how far it got (`progress.py`), kept once it ended.
    progress: Progress | None = None
    # The jobs it waits for (`dependencies.py`), None: none. It starts once every one of
    # them completed; when one ends otherwise it is cancelled, unless it runs anyway
    # (`run_anyway`: a callback, run once they all ended, whatever their outcomes).
    depends_on: tuple[UUID, ...] | None = None
    run_anyway: bool = False
    # The graph it was submitted in (`dependencies.py`); None: in none.
    workflow_id: UUID | None = None
    # How many of its dependencies have not ended yet (while it is waiting).
    waiting_for: int = 0

    @property
    def lease(self) -> Lease:
        return Lease(self.id, self.lease_token)

    @property
    def finished_at(self) -> datetime | None:
        """When it ended (finished or held): such a row is never written again, so its
        `updated_at` is that moment. None while it is live."""
        return None if TRAITS[self.status].phase is Phase.LIVE else self.updated_at

    @property
    def history(self) -> tuple[AttemptRecord, ...]:
        """Every attempt kept, oldest first: the log, then the one it still holds."""
        latest = latest_attempt(
            self.status,
            self.attempts,
            self.last_error,
            self.started_at,
            self.updated_at,
            self.worker,
        )
        return self.attempt_log if latest is None else (*self.attempt_log, latest)

    @property
    def pickup_latency(self) -> timedelta | None:
        """How long its latest attempt waited for a worker: from when the job was due to
        its claim (`started_at`), both on the database clock. Due is `run_at` (the end of
        a backoff or snooze, which are no wait), or `created_at` if later: a job
        scheduled in the past waited only since it exists. Never negative, as `run_at`
        may come from another clock (an application's enqueue). None before a claim."""
        if self.started_at is None:
            return None
        return max(timedelta(0), self.started_at - max(self.run_at, self.created_at))

    @property
    def is_last_attempt(self) -> bool:
        return self.attempts >= self.max_attempts


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class NewJob:
    """A submission that passed validation; construct it with `NewJob.build`.

    Its fields are the job's columns as they will be stored, but for those it left out
    (`left_out`), which hold the defaults until `resolve` takes them from the job's type.
    A job is due at once, or at `run_at`, or `delay` after it is stored (by the store's
    clock, the one claims compare with): never before. At most one of the two is set.
    """

    type: str
    max_attempts: int
    payload: JsonValue = field(default_factory=dict)
    idempotency_key: str | None = None
    traceparent: str | None = None
    run_at: datetime | None = None
    delay: timedelta | None = None
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    # Unique jobs (`Unique`): the key (before its period's slot), the statuses it counts
    # in, and the period whose slot the store adds to the key, by its clock.
    unique_key: str | None = None
    unique_states: tuple[str, ...] | None = None
    unique_period: timedelta | None = None
    # How long one attempt may run; None: the worker's JOB_TIMEOUT.
    timeout: timedelta | None = None
    partition_key: str | None = None
    # The options (`OPTIONS`) this submission did not give: `resolve` fills them in.
    left_out: frozenset[str] = frozenset()
    # The stored jobs it waits for, and whether it runs even if one of them does not
    # complete (`Job.depends_on`); a graph's jobs name each other (`dependencies.Step`).
    depends_on: tuple[UUID, ...] | None = None
    run_anyway: bool = False

    @classmethod
    def build(
        cls,
        *,
        type: str,
        payload: JsonValue | None = None,
        max_attempts: int | None = None,
        queue: str | None = None,
        priority: int | None = None,
        timeout: timedelta | None = None,
        unique: Unique | None = None,
        partition_key: str | None = None,
        idempotency_key: str | None = None,
        traceparent: str | None = None,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        depends_on: Collection[UUID] | None = None,
        run_anyway: bool = False,
        registered: Collection[str] | None = None,
        default_max_attempts: int | None = None,
    ) -> NewJob:
        """Validate a submission; raise `InvalidJob` with a message a client can act on.

        The options left out (None) are resolved later, by the way in the job is sent
        through (`resolve`, with the type's handler options). Given `registered` (a
        `Registry`, the known types), the type must be one of them, and the job is
        resolved at once by its options; given `default_max_attempts`, that is the budget
        when neither the submission nor the type gives one.
        """
        check_type(type, registered)
        if max_attempts is not None:
            check_max_attempts(max_attempts)
        if queue is not None:
            check_queue(queue)
        if priority is not None:
            check_priority(priority)
        if timeout is not None:
            check_timeout(timeout)
        check_idempotency_key(idempotency_key)
        check_partition_key(partition_key)
        check_schedule(run_at, delay)
        body: JsonValue = {} if payload is None else payload
        check_json("payload", body)
        options = NO_OPTIONS if registered is None else options_of(registered, type)
        resolved_now = registered is not None or default_max_attempts is not None
        if resolved_now and options is NO_OPTIONS:
            # What `resolve` with no options gives, made at once (one construction for a
            # bulk enqueue's thousand jobs, not two): the defaults, and the budget.
            if max_attempts is None:
                max_attempts = DEFAULT_MAX_ATTEMPTS
                if default_max_attempts is not None:
                    check_max_attempts(default_max_attempts)
                    max_attempts = default_max_attempts
            left_out = _NOTHING_LEFT
        else:
            left_out = _left_out(max_attempts, queue, priority, timeout, unique, partition_key)
        # By position, in the fields' order: keywords cost a third of the construction.
        new = cls(
            type,
            DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts,
            body,
            idempotency_key,
            traceparent,
            run_at,
            delay,
            DEFAULT_QUEUE if queue is None else queue,
            DEFAULT_PRIORITY if priority is None else priority,
            None if unique is None else unique.key_for(type, body),
            None if unique is None else unique.counted_in,
            None if unique is None else unique.period,
            timeout,
            partition_key,
            left_out,
            None if not depends_on else tuple(dict.fromkeys(depends_on)),
            run_anyway,
        )
        if not resolved_now or options is NO_OPTIONS:
            return new
        budget = DEFAULT_MAX_ATTEMPTS if default_max_attempts is None else default_max_attempts
        return resolve(new, options, budget)

    def stored_unique_key(self, now: datetime) -> str | None:
        """The unique key as stored at `now` (the store's clock): with the number of the
        period's slot it falls in, counted from the Unix epoch."""
        if self.unique_key is None or self.unique_period is None:
            return self.unique_key
        return f"{self.unique_key}@{(now - _EPOCH) // self.unique_period}"

    def due_at(self, now: datetime) -> datetime:
        """When the job becomes due if stored at `now` (the store's clock)."""
        if self.run_at is not None:
            return self.run_at
        if self.delay:
            return now + self.delay
        return now

    def stored(self, job_id: UUID, now: datetime) -> Job:
        """The job this submission becomes when stored at `now` (the store's clock):
        pending and due when `due_at` says, no attempt made, never leased."""
        # By position, in `Job`'s field order (keywords cost 40 % more, per job of a bulk
        # enqueue): id, type, payload, status, attempts, max_attempts, run_at,
        # locked_until, lease_token, last_error, idempotency_key, created_at, updated_at,
        # traceparent, queue, priority, started_at, worker, attempt_log, snoozes,
        # unique_key, unique_states, timeout, partition_key.
        return Job(
            job_id,
            self.type,
            self.payload,
            Status.PENDING,
            0,
            self.max_attempts,
            # `due_at`, without its call for the common job that is due at once.
            now if self.run_at is None and not self.delay else self.due_at(now),
            None,
            0,
            None,
            self.idempotency_key,
            now,
            now,
            self.traceparent,
            self.queue,
            self.priority,
            None,
            None,
            (),
            0,
            self.stored_unique_key(now),
            self.unique_states,
            self.timeout,
            self.partition_key,
            None,
            None,
            self.depends_on,
            self.run_anyway,
        )


_NOTHING_LEFT: frozenset[str] = frozenset()
_NOTHING_GIVEN = (None, None, None, None, None, None)


def _left_out(
    max_attempts: int | None,
    queue: str | None,
    priority: int | None,
    timeout: timedelta | None,
    unique: Unique | None,
    partition_key: str | None,
) -> frozenset[str]:
    if (max_attempts, queue, priority, timeout, unique, partition_key) == _NOTHING_GIVEN:
        return OPTIONS
    named = {
        "max_attempts": max_attempts,
        "queue": queue,
        "priority": priority,
        "timeout": timeout,
        "unique": unique,
        "partition_by": partition_key,
    }
    return frozenset(name for name, value in named.items() if value is None)


def resolve(new: NewJob, options: TypeOptions, default_max_attempts: int) -> NewJob:
    """`new` ready to store: each option it left out taken from its type's `options`, and
    its attempt budget from `default_max_attempts` (the MAX_ATTEMPTS setting) when neither
    gives one. Raises `InvalidJob` for a default budget out of range, or when the type's
    unique key cannot be derived from the payload (a field it names is missing)."""
    left = new.left_out
    if not left:
        return new
    budget = new.max_attempts
    if "max_attempts" in left:
        budget = options.max_attempts or default_max_attempts
        check_max_attempts(budget)
    unique = options.unique if "unique" in left else None
    if unique is None:
        key, states, period = new.unique_key, new.unique_states, new.unique_period
    else:
        key = unique.key_for(new.type, new.payload)
        states, period = unique.counted_in, unique.period
    partition_key = new.partition_key
    if "partition_by" in left and options.partition_by is not None:
        partition_key = partition_key_of(new.payload, options.partition_by)
    # By position, as `build` makes it.
    return NewJob(
        new.type,
        budget,
        new.payload,
        new.idempotency_key,
        new.traceparent,
        new.run_at,
        new.delay,
        options.queue if "queue" in left else new.queue,
        options.priority if "priority" in left else new.priority,
        key,
        states,
        period,
        options.timeout if "timeout" in left else new.timeout,
        partition_key,
        frozenset(),
        new.depends_on,
        new.run_anyway,
    )
