"""Jobs, their statuses, and the transitions between statuses, written once as data."""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol, TypeAlias
from uuid import UUID

from jobqueue.domain.attempts import AttemptRecord, latest_attempt
from jobqueue.domain.errors import InvalidJob, UnknownJobType
from jobqueue.domain.status import TRAITS, Phase, Status
from jobqueue.domain.unique import Unique

JsonValue: TypeAlias = dict[str, "JsonValue"] | list["JsonValue"] | str | int | float | bool | None

MIN_ATTEMPTS = 1
MAX_ATTEMPTS = 100
# The attempt budget of a job submitted without one (MAX_ATTEMPTS overrides it).
DEFAULT_MAX_ATTEMPTS = 5
MAX_TYPE_LENGTH = 200
MAX_IDEMPOTENCY_KEY_LENGTH = 255
# Queues: every job is in one; a worker process consumes the queues it is given, each with
# its own concurrency. A name is what a setting, a URL path and a metric label can carry.
DEFAULT_QUEUE = "default"
MAX_QUEUE_LENGTH = 64
QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
# Priorities within a queue: due jobs are claimed most urgent (lowest) first, then by
# due time. Strict: a steady flood of urgent jobs starves the less urgent ones.
MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 0
PRIORITIES = range(MIN_PRIORITY, MAX_PRIORITY + 1)
# The furthest ahead a job may be scheduled by `delay`: far beyond any real schedule, and
# a bound that makes a typo (a delay in milliseconds read as seconds) a clear refusal.
MAX_DELAY = timedelta(days=3650)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Operation(StrEnum):
    """What causes a transition; each one is a single guarded store statement.

    The attempt's endings (complete .. release) are written by `JobStore.record_many`; the
    others are store methods of the same name.
    """

    CLAIM = "claim"
    COMPLETE = "complete"
    # A retryable failure: back to pending, due again after a backoff delay.
    BACKOFF = "backoff"
    FAIL = "fail"
    DEAD_LETTER = "dead_letter"
    RELEASE = "release"
    RECOVER = "recover"
    # A handler's "not yet" (`Snooze`): back to pending later, the attempt given back.
    SNOOZE = "snooze"
    # An operator's request: a job that ended without success back to pending with a
    # fresh budget.
    RETRY = "retry"
    # An operator's request: a job that has not finished stops for good, running or not.
    CANCEL = "cancel"


@dataclass(frozen=True, slots=True)
class Transition:
    operation: Operation
    source: Status
    target: Status


TRANSITIONS: frozenset[Transition] = frozenset(
    {
        Transition(Operation.CLAIM, Status.PENDING, Status.PROCESSING),
        Transition(Operation.COMPLETE, Status.PROCESSING, Status.COMPLETED),
        Transition(Operation.BACKOFF, Status.PROCESSING, Status.PENDING),
        Transition(Operation.FAIL, Status.PROCESSING, Status.FAILED),
        Transition(Operation.DEAD_LETTER, Status.PROCESSING, Status.DEAD_LETTER),
        # Shutdown gives the attempt back; the job simply waits for the next claim.
        Transition(Operation.RELEASE, Status.PROCESSING, Status.PENDING),
        Transition(Operation.SNOOZE, Status.PROCESSING, Status.PENDING),
        # A lease that ran out means the attempt was lost with its process: it counts.
        Transition(Operation.RECOVER, Status.PROCESSING, Status.PENDING),
        Transition(Operation.RECOVER, Status.PROCESSING, Status.DEAD_LETTER),
        # An operator's retry, of a job that ended without success.
        Transition(Operation.RETRY, Status.DEAD_LETTER, Status.PENDING),
        Transition(Operation.RETRY, Status.FAILED, Status.PENDING),
        Transition(Operation.RETRY, Status.CANCELLED, Status.PENDING),
        # A running job's attempt is stopped by the same write: its lease ends with it,
        # so nothing the handler does later can be written over the cancellation.
        Transition(Operation.CANCEL, Status.PENDING, Status.CANCELLED),
        Transition(Operation.CANCEL, Status.PROCESSING, Status.CANCELLED),
    }
)


def sources(operation: Operation) -> frozenset[Status]:
    """The statuses from which `operation` may start."""
    return frozenset(t.source for t in TRANSITIONS if t.operation is operation)


def targets(operation: Operation, source: Status) -> frozenset[Status]:
    """The statuses `operation` may lead to from `source` (empty when refused)."""
    return frozenset(
        t.target for t in TRANSITIONS if t.operation is operation and t.source is source
    )


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
    def is_last_attempt(self) -> bool:
        return self.attempts >= self.max_attempts


@dataclass(frozen=True, slots=True)
class NewJob:
    """A submission that passed validation; construct it with `NewJob.build`.

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

    @classmethod
    def build(
        cls,
        *,
        type: str,
        payload: JsonValue | None = None,
        max_attempts: int | None = None,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        registered: Collection[str] | None = None,
        idempotency_key: str | None = None,
        traceparent: str | None = None,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        queue: str | None = None,
        priority: int | None = None,
        unique: Unique | None = None,
    ) -> NewJob:
        """Validate a submission; raise `InvalidJob` with a message a client can act on.

        `registered` is the set of known job types; `None` skips that check (enqueueing
        for a worker fleet whose handlers this process does not load). When it is a
        `Registry`, the type's handler options (`queue`, `priority`, `max_attempts`) are
        the defaults of what the submission leaves out (`unique` included).
        `default_max_attempts` is the budget when neither gives one: the service passes
        its MAX_ATTEMPTS setting.
        """
        _check_type(type, registered)
        options = _options_of(registered, type)
        if max_attempts is None:
            max_attempts = options.max_attempts
        attempts = default_max_attempts if max_attempts is None else max_attempts
        _check_max_attempts(attempts)
        # An option is valid already (`JobOptions` checked it): only given values are.
        if queue is None:
            queue = options.queue
        else:
            _check_queue(queue)
        if priority is None:
            priority = options.priority
        else:
            _check_priority(priority)
        _check_idempotency_key(idempotency_key)
        _check_schedule(run_at, delay)
        body: JsonValue = {} if payload is None else payload
        _check_json("payload", body)
        if unique is None:
            unique = options.unique
        # By position, in the fields' order: keywords cost a third of the construction.
        if unique is None:
            return cls(
                type, attempts, body, idempotency_key, traceparent, run_at, delay, queue, priority
            )
        return cls(
            type,
            attempts,
            body,
            idempotency_key,
            traceparent,
            run_at,
            delay,
            queue,
            priority,
            unique.key_for(type, body),
            unique.counted_in,
            unique.period,
        )

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
        # unique_key, unique_states.
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
        )


def _check_type(job_type: object, registered: Collection[str] | None) -> None:
    if not isinstance(job_type, str) or not job_type.strip():
        raise InvalidJob("type must be a non-empty string")
    if len(job_type) > MAX_TYPE_LENGTH:
        raise InvalidJob(f"type must be at most {MAX_TYPE_LENGTH} characters")
    if registered is not None and job_type not in registered:
        raise UnknownJobType(job_type, list(registered))


def _check_max_attempts(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob("max_attempts must be an integer")
    if not MIN_ATTEMPTS <= value <= MAX_ATTEMPTS:
        raise InvalidJob(
            f"max_attempts must be between {MIN_ATTEMPTS} and {MAX_ATTEMPTS}, got {value}"
        )


@dataclass(frozen=True, slots=True)
class JobOptions:
    """What a job type's handler declares for the jobs submitted without their own: the
    queue they go to, their priority, their attempt budget (None: the service's)."""

    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    max_attempts: int | None = None
    unique: Unique | None = None

    def __post_init__(self) -> None:
        _check_queue(self.queue)
        _check_priority(self.priority)
        if self.max_attempts is not None:
            _check_max_attempts(self.max_attempts)


class OptionsSource(Protocol):
    """What knows each job type's options: `domain.registry.Registry`."""

    def options_for(self, job_type: str) -> JobOptions: ...


def _options_of(registered: object, job_type: str) -> JobOptions:
    # A Registry knows each type's options; any other collection of names declares none.
    if registered is not None and hasattr(registered, "options_for"):
        source: OptionsSource = registered
        return source.options_for(job_type)
    return NO_OPTIONS


def check_queue_name(name: object) -> str:
    """`name` if it is a valid queue name; raise `ValueError` saying why not."""
    if not isinstance(name, str) or QUEUE_NAME.fullmatch(name) is None:
        raise ValueError(
            f"queue name must be 1 to {MAX_QUEUE_LENGTH} letters, digits or '_.:-', "
            f"starting with a letter or digit; got {name!r}"
        )
    return name


def _check_queue(queue: object) -> None:
    try:
        check_queue_name(queue)
    except ValueError as error:
        raise InvalidJob(str(error)) from None


def _check_priority(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob("priority must be an integer")
    if value not in PRIORITIES:
        raise InvalidJob(
            f"priority must be between {MIN_PRIORITY} (most urgent) and {MAX_PRIORITY}, got {value}"
        )


# After the checks it runs: what a type without a handler's options gets.
NO_OPTIONS = JobOptions()


def _check_schedule(run_at: object, delay: object) -> None:
    if run_at is not None and delay is not None:
        raise InvalidJob("give run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidJob(f"run_at must be a datetime, got a {type(run_at).__name__}")
        if run_at.utcoffset() is None:
            # A time without an offset means a different instant on every machine.
            raise InvalidJob("run_at must carry a time zone offset, e.g. 2026-12-01T09:00:00Z")
    if delay is not None:
        if not isinstance(delay, timedelta):
            raise InvalidJob(f"delay must be a timedelta, got a {type(delay).__name__}")
        if not timedelta(0) <= delay <= MAX_DELAY:
            raise InvalidJob(f"delay must be between 0 and {MAX_DELAY.days} days, got {delay}")


def _check_idempotency_key(key: object) -> None:
    if key is None:
        return
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InvalidJob(
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} non-blank characters"
        )


# A location inside a payload as (label, parent): rendered only when reporting an error,
# so walking a deeply nested payload does not build a path string per level.
_Where: TypeAlias = tuple[str, "_Where | None"]


def _render(where: _Where) -> str:
    labels: list[str] = []
    node: _Where | None = where
    while node is not None:
        labels.append(node[0])
        node = node[1]
    return "".join(reversed(labels))


_SCALARS = (str, bool, int, type(None))


def _check_json(path: str, value: object) -> None:
    # Most payloads are one flat object of strings, numbers and booleans: checked in one
    # pass, without the walk's bookkeeping (which cost ~7 µs per job, a third of a bulk
    # enqueue's client time). Anything else takes the full walk.
    if type(value) is dict and all(
        type(key) is str
        and (isinstance(child, _SCALARS) or (type(child) is float and math.isfinite(child)))
        for key, child in value.items()
    ):
        return
    _walk_json(path, value)


def _walk_json(path: str, value: object) -> None:
    # An explicit stack, not recursion: a deeply nested payload must be accepted or
    # refused, never end in RecursionError. `on_path` holds the containers being walked,
    # so a cycle (which JSON cannot represent) is refused while a list shared by two
    # branches (which serialises fine) is not.
    stack: list[tuple[_Where, object, bool]] = [((path, None), value, False)]
    on_path: set[int] = set()
    while stack:
        where, item, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            continue
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidJob(f"{_render(where)} holds {item}, which JSON cannot represent")
            continue
        if not isinstance(item, list | dict):
            raise InvalidJob(
                f"{_render(where)} holds a {type(item).__name__}, which is not a JSON value"
            )
        if id(item) in on_path:
            raise InvalidJob(f"{_render(where)} contains itself, which JSON cannot represent")
        on_path.add(id(item))
        stack.append((where, item, True))
        children: list[tuple[_Where, object, bool]] = []
        if isinstance(item, list):
            children = [((f"[{i}]", where), child, False) for i, child in enumerate(item)]
        else:
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidJob(f"{_render(where)} has a non-string key {key!r}")
                children.append(((f".{key}", where), child, False))
        # Reversed so that siblings are checked, and reported, in document order.
        stack.extend(reversed(children))
