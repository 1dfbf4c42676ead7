"""Handlers by job type: what users write, and how the worker finds it."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.dependencies import Dependency
from jobqueue.domain.errors import InvalidJob, UnknownJobType
from jobqueue.domain.fields import DEFAULT_PRIORITY, DEFAULT_QUEUE, JsonValue, check_queue_name
from jobqueue.domain.flow import QueueLimits, Rate
from jobqueue.domain.flow import type_rates as rated_types
from jobqueue.domain.job_types import JobType
from jobqueue.domain.periodic import PeriodicJob
from jobqueue.domain.progress import Progress
from jobqueue.domain.type_options import NO_OPTIONS, TypeOptions
from jobqueue.domain.unique import Unique

if TYPE_CHECKING:
    from jobqueue.domain.ports import PayloadDecoder


class StopReason(StrEnum):
    """Why the worker asks an attempt to stop."""

    # The process is shutting down and SHUTDOWN_TIMEOUT has passed.
    SHUTDOWN = "shutdown"
    # The attempt outlived JOB_TIMEOUT.
    TIMEOUT = "timeout"
    # The job's lease could not be renewed: it was recovered or claimed elsewhere, or
    # the database could not be reached before it ran out. Its outcome will not be
    # written; another attempt may already be running.
    LEASE_LOST = "lease_lost"
    # An operator cancelled the job (`POST /jobs/{id}/cancel`). The cancel itself ended
    # the job: nothing the attempt does from here on is written.
    CANCELLED = "cancelled"


class StopRequest:
    """Whether, and why, the worker asked this attempt to stop: readable from any thread.

    An async handler is cancelled as well; a plain (sync) function runs in a thread
    that cannot be, so it should look at `requested` (or `wait`) between steps and return
    early when it is set.
    """

    def __init__(self) -> None:
        self._reason: StopReason | None = None
        # Made only when a thread waits on it: most attempts are async and never do, and
        # an Event (a lock and a condition) per attempt is measurable on the hot path.
        self._event: threading.Event | None = None

    @property
    def requested(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> StopReason | None:
        return self._reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested or `timeout` seconds pass; return whether it
        was requested. A sync handler sleeping between steps can sleep on this instead."""
        with _EVENTS:
            if self._event is None:
                self._event = threading.Event()
                if self._reason is not None:
                    self._event.set()
            event = self._event
        return event.wait(timeout)

    def request(self, reason: StopReason) -> None:
        """Ask the attempt to stop (the worker's call; the first reason given stays)."""
        with _EVENTS:
            if self._reason is None:
                self._reason = reason
            if self._event is not None:
                self._event.set()


# Guards the lazy creation of a StopRequest's event against a waiting thread.
_EVENTS = threading.Lock()


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a handler knows about the attempt it runs in."""

    job_id: UUID
    job_type: str
    attempt: int
    max_attempts: int
    deadline: datetime
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    # Set by the worker to end the attempt early (timeout, shutdown, lost lease, a cancel).
    stop: StopRequest = field(default_factory=StopRequest)
    # How often the job snoozed so far (`Snooze`); those runs gave their attempts back.
    snoozes: int = 0
    # Where `progress` reports go (the worker's progress writer); None: nowhere.
    report_progress: Callable[[Progress], None] | None = None
    # What `transaction` opens (the worker's); None: no database to offer one.
    open_transaction: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    # What `dependencies` reads (the worker's); None: it waited for none.
    read_dependencies: Callable[[], Awaitable[tuple[Dependency, ...]]] | None = None

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """`async with ctx.transaction() as connection:` your writes to the jobs'
        database (a SQLAlchemy `AsyncConnection`) commit together with this job's
        completion, after the handler returns, or not at all: an exception out of the
        block, a failure, a timeout or a lost lease roll them back. Once per attempt,
        from an async handler."""
        if self.open_transaction is None:
            raise RuntimeError("ctx.transaction() is offered by a worker, on its database")
        return self.open_transaction()

    async def dependencies(self) -> tuple[Dependency, ...]:
        """The jobs it waited for (`depends_on`), in order, as they ended (status, result
        or error): all completed unless it runs anyway; one deleted since is left out.
        Read at the first call, from an async handler: one that needs none pays nothing."""
        if self.read_dependencies is None:
            return ()
        return await self.read_dependencies()

    def progress(
        self,
        fraction: float | None = None,
        *,
        done: int | None = None,
        total: int | None = None,
        message: str | None = None,
    ) -> None:
        """Say how far the job got: a `fraction` from 0 to 1, counters (`done` of
        `total`; the fraction is then theirs unless given), a `message`, or any of them.
        Call it as often as is natural: the worker writes the latest report about once a
        second, and the last one with the job's ending. Returns at once, from any thread
        (a sync handler's too). A report that makes no sense raises `ValueError` or
        `TypeError`."""
        report = Progress.build(fraction, done=done, total=total, message=message)
        if self.report_progress is not None:
            self.report_progress(report)

    @property
    def cancelled(self) -> bool:
        """Whether the worker asked this attempt to stop (`stop.reason` says why)."""
        return self.stop.requested

    @property
    def lease_lost(self) -> bool:
        """Whether the job is no longer this attempt's: its outcome will not be written."""
        return self.stop.reason is StopReason.LEASE_LOST

    @property
    def job_cancelled(self) -> bool:
        """Whether an operator cancelled the job while this attempt ran: the job is
        cancelled already, and nothing the handler does now is written."""
        return self.stop.reason is StopReason.CANCELLED


# What a handler returns is its job's result (JSON, `adapters/results.py`); None: no result.
Handler = Callable[[JobContext, Any], Awaitable[object] | object]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    name: str
    func: Handler
    # When set, payloads are converted into this type before the handler sees them, and a
    # payload that does not fit is refused at submission (400), not discovered at run time.
    payload_type: type[Any] | None
    is_async: bool
    # Defaults for the jobs of this type submitted without their own (the attempt
    # timeout among them).
    options: TypeOptions = field(default_factory=TypeOptions)
    # How long a failed attempt waits before the next; None: the service's BACKOFF_*.
    backoff: Backoff | None = None


class Registry:
    """`@registry.handler("type")` on a function `(ctx, payload)`; async or plain.

    A registry is a collection of job type names, so it can be passed where
    `NewJob.build` asks which types are registered.
    """

    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}
        self._periodic: dict[str, PeriodicJob] = {}
        self._limits: dict[str, QueueLimits] = {}

    def handler(
        self,
        name: str,
        *,
        payload: type[Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        timeout: timedelta | None = None,
        backoff: Backoff | None = None,
        unique: Unique | None = None,
        partition_by: tuple[str, ...] | None = None,
    ) -> Callable[[H], H]:
        """Register the decorated function for jobs of type `name`.

        `queue`, `priority`, `max_attempts` and `timeout` (how long one attempt may run,
        instead of JOB_TIMEOUT) are what this type's jobs get when their submission leaves
        them out;
        `backoff` spaces this type's retries instead of BACKOFF_BASE and BACKOFF_MAX;
        `unique` makes this type's jobs unique (`Unique`) unless a submission says how.
        `partition_by` names the payload fields this type's jobs' partition key is made
        of, unless a submission gives its own (`partition.py`).
        """
        if not name or not name.strip():
            raise ValueError("a handler needs a non-empty job type name")
        try:
            options = TypeOptions(
                queue=DEFAULT_QUEUE if queue is None else queue,
                priority=DEFAULT_PRIORITY if priority is None else priority,
                max_attempts=max_attempts,
                timeout=timeout,
                unique=unique,
                partition_by=partition_by,
            )
        except InvalidJob as error:
            raise ValueError(f"job type {name!r}: {error}") from None

        def register(func: H) -> H:
            if name in self._specs:
                raise ValueError(f"job type {name!r} already has a handler")
            self._specs[name] = HandlerSpec(
                name=name,
                func=func,
                payload_type=payload,
                is_async=_is_async(func),
                options=options,
                backoff=backoff,
            )
            return func

        return register

    def periodic(
        self,
        cron: str,
        *,
        name: str | None = None,
        payload: JsonValue = None,
        timezone: str = "UTC",
        catch_up: bool = False,
        **options: Any,
    ) -> Callable[[H], H]:
        """Register the decorated function as the handler of job type `name` (default:
        the function's name), with `options` as `handler` takes them, and run one job of
        it with `payload` at every slot of `cron` in `timezone` (`domain/periodic.py`):
        5 fields, or 6 with the seconds first. Every worker process schedules it; one job
        per slot exists however many do."""

        def register(func: H) -> H:
            job_type: str = name or str(getattr(func, "__name__", ""))
            self.schedule(
                PeriodicJob(
                    cron=cron,
                    job_type=job_type,
                    payload={} if payload is None else payload,
                    timezone=timezone,
                    catch_up=catch_up,
                )
            )
            return self.handler(job_type, **options)(func)

        return register

    def schedule(self, periodic: PeriodicJob) -> None:
        """Run jobs of a type (registered here or not) on a cron schedule."""
        if periodic.name in self._periodic:
            raise ValueError(f"periodic job {periodic.name!r} is declared twice")
        self._periodic[periodic.name] = periodic

    def periodic_jobs(self) -> list[PeriodicJob]:
        return [self._periodic[name] for name in sorted(self._periodic)]

    def limit(
        self,
        queue: str,
        *,
        concurrency: int | None = None,
        rate: str | Rate | None = None,
        key_concurrency: int | None = None,
        key_rate: str | Rate | None = None,
        type_rates: Mapping[str, str | Rate] | None = None,
    ) -> None:
        """Limit `queue` across every process (`domain/flow.py`): at most `concurrency`
        of its jobs running at once, at most `rate` starts ("100/1m"), at most
        `key_concurrency` running at once and `key_rate` starts ("10/1m") per partition
        key, at most so many starts of each job type `type_rates` names
        ({"send_sms": "10/s"}). Written as a worker process starts, unless an operator
        set the queue's limits; QUEUE_LIMITS overrides them queue by queue."""
        check_queue_name(queue)
        rated = rated_types(type_rates or {})
        self._limits[queue] = QueueLimits(
            concurrency, _rate(rate), key_concurrency, _rate(key_rate), rated
        )

    @property
    def queue_limits(self) -> dict[str, QueueLimits]:
        """The queues' limits declared in code (`limit`), by queue."""
        return dict(self._limits)

    def include(self, other: Registry) -> None:
        """Add every handler of `other` (e.g. a user's module next to the examples), its
        periodic jobs and its queues' limits."""
        for spec in other.specs():
            if spec.name in self._specs:
                raise ValueError(f"job type {spec.name!r} already has a handler")
            self._specs[spec.name] = spec
        for periodic in other.periodic_jobs():
            self.schedule(periodic)
        for queue, limits in other.queue_limits.items():
            if self._limits.get(queue, limits) != limits:
                raise ValueError(f"queue {queue!r} is limited twice, differently")
            self._limits[queue] = limits

    def get(self, name: str) -> HandlerSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownJobType(name, list(self._specs)) from None

    def check(self, job_type: str, payload: JsonValue, decoder: PayloadDecoder) -> None:
        """Refuse a job that no handler here would take, as a submission over HTTP is
        refused (400): an unknown type (`UnknownJobType`), or a payload that the type's
        declared payload type does not fit (`InvalidPayload`)."""
        spec = self.get(job_type)
        if spec.payload_type is not None:
            decoder.decode(job_type, payload, spec.payload_type)

    def described(self, decoder: PayloadDecoder) -> list[JobType]:
        """Each type as a worker publishes it (`domain/job_types.py`): its payload's
        JSON Schema as `decoder` converts payloads, its options, its docstring's summary."""
        return [
            JobType(
                name=spec.name,
                payload_schema=None
                if spec.payload_type is None
                else decoder.schema(spec.name, spec.payload_type),
                options=spec.options,
                description=_summary(spec.func),
            )
            for spec in self.specs()
        ]

    def options_for(self, name: str) -> TypeOptions:
        """The options of `name`'s handler; the defaults for a type without one."""
        spec = self._specs.get(name)
        return spec.options if spec is not None else NO_OPTIONS

    def backoff_for(self, name: str) -> Backoff | None:
        """How `name`'s retries are spaced, if its handler says; else None."""
        spec = self._specs.get(name)
        return spec.backoff if spec is not None else None

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def specs(self) -> list[HandlerSpec]:
        return [self._specs[name] for name in sorted(self._specs)]


def _summary(func: Handler) -> str | None:
    """The first paragraph of `func`'s docstring, on one line."""
    text = inspect.getdoc(func)
    if not text:
        return None
    return " ".join(text.split("\n\n", 1)[0].split())


def _is_async(func: Handler) -> bool:
    # A callable object with `async def __call__` is a coroutine function to the worker
    # too; run in a thread it would only create a coroutine that is never awaited.
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


def _rate(rate: str | Rate | None) -> Rate | None:
    return Rate.parse(rate) if isinstance(rate, str) else rate
