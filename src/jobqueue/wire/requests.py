"""Request bodies: a job to submit (`POST /jobs`), a batch of them (`POST /jobs/batch`),
when a pending job is due again (`POST /jobs/{id}/reschedule`), and which jobs a bulk
action takes (`POST /jobs/retry|discard|cancel`).

Each field says what it means in its `Meta` description, which the OpenAPI document
shows. A submission's options are `NewJob.build`'s keywords under the same names, so a
new one is a field here (and a key of `SubmitOptions`, the client's keywords), decoded
by `options()`: durations arrive as text ("90s") and uniqueness as an object.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, TypedDict, Unpack
from uuid import UUID

import msgspec

from jobqueue.domain.dependencies import MAX_DEPENDENCIES, MAX_NAME_LENGTH
from jobqueue.domain.durations import format_duration, parse_duration
from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.fields import (
    MAX_ATTEMPTS,
    MAX_DELAY,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_PRIORITY,
    MAX_QUEUE_LENGTH,
    MAX_TIMEOUT,
    MAX_TYPE_LENGTH,
    MIN_ATTEMPTS,
    MIN_PRIORITY,
    QUEUE_NAME,
)
from jobqueue.domain.partition import MAX_PARTITION_KEY_LENGTH
from jobqueue.domain.status import Status
from jobqueue.domain.unique import DEFAULT_UNIQUE_STATES, MAX_UNIQUE_KEY_LENGTH, Unique

# The most jobs one batch submission (`POST /jobs/batch`) holds: a request the server
# decodes, checks and inserts whole, in one transaction, in about a second; enough for a
# workflow of a thousand steps and more, submitted at once.
MAX_BATCH_JOBS = 5_000

JobType = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_TYPE_LENGTH,
        description="A job type some worker runs, e.g. 'sleep' or 'webhook'.",
    ),
]
QueueName = Annotated[
    str,
    msgspec.Meta(pattern=f"^{QUEUE_NAME.pattern}$", max_length=MAX_QUEUE_LENGTH),
]
Duration = Annotated[
    str,
    msgspec.Meta(
        examples=["90s", "1h30m"],
        description="A duration: a number and a unit (ms, s, m, h), repeated, e.g. '1h30m'.",
    ),
]


class UniqueRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """At most one job per key among the jobs in `states`: a duplicate is answered 200
    with the job holding the key and `duplicate: true`."""

    key: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=MAX_UNIQUE_KEY_LENGTH,
                description="The key; absent: derived from the type and the payload.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    by: (
        Annotated[
            list[str],
            msgspec.Meta(description="Derive the key from these payload fields only."),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    states: (
        Annotated[
            list[Status],
            msgspec.Meta(
                description="The statuses the key counts in; must include pending and "
                "processing; those two when absent."
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    period: (
        Annotated[
            Duration,
            msgspec.Meta(
                description="At most one job per key per slot of this length, counted from "
                "the Unix epoch by the database's clock, e.g. '1h'."
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    def unique(self) -> Unique:
        """Raises `InvalidJob` for a uniqueness no job can have."""
        return Unique(
            key=None if self.key is msgspec.UNSET else self.key,
            by=None if self.by is msgspec.UNSET else tuple(self.by),
            states=DEFAULT_UNIQUE_STATES
            if self.states is msgspec.UNSET
            else frozenset(self.states),
            period=None
            if self.period is msgspec.UNSET
            else duration_of(self.period, "unique period"),
        )

    @classmethod
    def of(cls, unique: Unique) -> UniqueRequest:
        return cls(
            key=msgspec.UNSET if unique.key is None else unique.key,
            by=msgspec.UNSET if unique.by is None else list(unique.by),
            states=sorted(unique.states),
            period=msgspec.UNSET if unique.period is None else format_duration(unique.period),
        )


class CreateJobRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `POST /jobs`. Every field but `type` may be left out: the job then gets its
    type's handler option, else the service's default."""

    type: JobType
    payload: Annotated[
        Any,
        msgspec.Meta(
            description="Any JSON value, checked against the handler's payload type. "
            "Defaults to {}."
        ),
    ] = msgspec.field(default_factory=dict)
    # UNSET rather than None: an explicit `null` is a mistake worth reporting, while an
    # absent field means "the default".
    max_attempts: (
        Annotated[
            int,
            msgspec.Meta(
                ge=MIN_ATTEMPTS,
                le=MAX_ATTEMPTS,
                description="Attempts before the job is dead-lettered; absent: the type's, "
                "else the service's MAX_ATTEMPTS.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    run_at: (
        Annotated[
            datetime,
            msgspec.Meta(
                tz=True,
                description="Not before this instant (RFC 3339, with an offset), by the "
                "database's clock; due at once when absent or past. Not with delay.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    delay: (
        Annotated[
            Duration,
            msgspec.Meta(
                description="Not before this long after the job is stored, by the "
                f"database's clock, at most {MAX_DELAY.days} days. Not with run_at."
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    queue: (
        Annotated[
            QueueName,
            msgspec.Meta(
                description="The queue the job waits in; absent: the type's, else 'default'."
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    priority: (
        Annotated[
            int,
            msgspec.Meta(
                ge=MIN_PRIORITY,
                le=MAX_PRIORITY,
                description=f"{MIN_PRIORITY} is the most urgent: within a queue, due jobs "
                f"are claimed by priority. Absent: the type's, else {MIN_PRIORITY}.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    timeout: (
        Annotated[
            Duration,
            msgspec.Meta(
                description="How long one attempt may run, at most "
                f"{MAX_TIMEOUT.days} days; absent: the type's, else the worker's "
                "JOB_TIMEOUT."
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    unique: UniqueRequest | msgspec.UnsetType = msgspec.UNSET
    partition_key: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=MAX_PARTITION_KEY_LENGTH,
                description="The share of its queue the job belongs to (a tenant, an "
                "account): a queue's key_concurrency and key_rate limits cap each key's "
                "running jobs and starts, and claims rotate between keys. Absent: made of "
                "the payload fields the type's partition_by names, else none.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    depends_on: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME_LENGTH)]],
        msgspec.Meta(
            max_length=MAX_DEPENDENCIES,
            description="Jobs it waits for: ids of stored jobs, or in a batch the names "
            "(or places, e.g. '0') of the batch's jobs. It starts once every one "
            "completed, and is cancelled when one ends otherwise, unless run_anyway.",
        ),
    ] = msgspec.field(default_factory=list)
    run_anyway: Annotated[
        bool,
        msgspec.Meta(
            description="Run once every job it depends on ended, whatever their outcomes "
            "(a callback), rather than be cancelled when one did not complete."
        ),
    ] = False

    def after(self) -> tuple[str | int, ...]:
        """What it waits for, as a `Step` takes it: names, ids, or places ('0')."""
        return tuple(int(each) if each.isdigit() else each for each in self.depends_on)

    def options(self) -> dict[str, Any]:
        """The options given, decoded, as `NewJob.build` takes them; raises `InvalidJob`
        for a duration or a uniqueness that is none. Dependencies are the graph's
        (`after`)."""
        given: dict[str, Any] = {"run_anyway": self.run_anyway}
        for name in _OPTIONS:
            value = getattr(self, name)
            if value is msgspec.UNSET:
                continue
            if isinstance(value, UniqueRequest):
                value = value.unique()
            elif name in _DURATIONS:
                value = duration_of(value, name)
            given[name] = value
        return given


class BatchJob(CreateJobRequest, forbid_unknown_fields=True, frozen=True):
    """One job of `POST /jobs/batch`: a `POST /jobs` body, with its own Idempotency-Key (a
    batch has no header per job)."""

    idempotency_key: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=MAX_IDEMPOTENCY_KEY_LENGTH,
                description="This job's Idempotency-Key: the same key with the same job "
                "replays the first job (`replayed: true`); with a different job, the "
                "batch is refused (409).",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    name: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=MAX_NAME_LENGTH,
                description="What the batch's other jobs call it in their depends_on.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


# A submission's options: `CreateJobRequest`'s fields but what every job has, and its
# dependencies, which are the graph's.
_OPTIONS = tuple(
    name
    for name in CreateJobRequest.__struct_fields__
    if name not in ("type", "payload", "depends_on", "run_anyway")
)
_DURATIONS = ("delay", "timeout")


class BatchRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Body of `POST /jobs/batch`: every job is stored, or none. Jobs may depend on each
    other by name (a graph, and a workflow); a `callback` runs once all of them ended."""

    jobs: Annotated[
        list[BatchJob],
        msgspec.Meta(
            min_length=1,
            max_length=MAX_BATCH_JOBS,
            description=f"1 to {MAX_BATCH_JOBS} jobs, stored all together or not at all.",
        ),
    ]
    callback: Annotated[
        CreateJobRequest | None,
        msgspec.Meta(
            description="A job that runs once every job of the batch ended, whatever "
            "their outcomes, and reads their statuses and results from its context."
        ),
    ] = None


class SubmitOptions(TypedDict, total=False):
    """What a submission may say besides its type and payload: `CreateJobRequest`'s
    options, as both clients' `submit` (and `job_request`) take them as keywords.
    Durations may be `timedelta`s, uniqueness a `Unique`."""

    max_attempts: int
    # Not before this instant (aware), or this long after it is stored: at most one.
    run_at: datetime
    delay: timedelta | str
    queue: str
    priority: int
    timeout: timedelta | str
    unique: Unique
    partition_key: str
    # Given: replays an earlier identical submission with it. Absent: a new key per
    # call (per job of a batch), so that the call can be sent again safely; but none for
    # a job that depends on others, or is depended on, which takes none.
    idempotency_key: str
    # The jobs it waits for: stored jobs' ids, or in a batch the names (`job_request`'s
    # `name=`) or places (0, 1, …) of the batch's jobs. It starts once each completed.
    depends_on: Sequence[UUID | str | int]
    # Run once every one of them ended, whatever their outcomes, rather than be
    # cancelled when one did not complete.
    run_anyway: bool


def job_request(
    job_type: str,
    payload: Any = None,
    *,
    name: str | None = None,
    **options: Unpack[SubmitOptions],
) -> BatchJob:
    """A job to submit (`submit`) or one of a batch (`submit_batch`), as the API's body
    holds it, from `SubmitOptions` keywords: a `timedelta` as a duration, a `Unique` as
    its request, `depends_on`'s ids and places as text. `name` is what the batch's
    other jobs call it in their `depends_on`."""
    given: dict[str, Any] = {} if name is None else {"name": name}
    for option, value in options.items():
        if value is None:
            continue
        if isinstance(value, timedelta):
            value = format_duration(value)
        elif isinstance(value, Unique):
            value = UniqueRequest.of(value)
        elif option == "depends_on":
            value = _references(value)
        given[option] = value
    return BatchJob(type=job_type, payload={} if payload is None else payload, **given)


def _references(depends_on: object) -> list[str]:
    """`depends_on` as the API takes it: each id, name or place as text."""
    if isinstance(depends_on, str | UUID) or not isinstance(depends_on, Iterable):
        raise TypeError(f"depends_on takes a list of job ids, names or places, got {depends_on!r}")
    return [str(each) for each in depends_on]


def duration_of(text: str, name: str) -> timedelta:
    """`text`, a duration given as field `name`; raises `InvalidJob` for none."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise InvalidJob(f"{name}: {error}") from None
