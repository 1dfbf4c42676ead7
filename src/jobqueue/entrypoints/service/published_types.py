"""Job types across processes: workers publish the types they run, API processes read
them, so that an API needs none of the workers' code (`domain/job_types.py`).

- A worker process (`TypePublisher`) writes its registry's types at start and again
  every `PUBLISH_INTERVAL`: once the workers of an older version are gone, the table says
  what the running ones take, within that interval.
- An API process (`TypeCatalogue`) reads them at start and every `REFRESH_INTERVAL`, and
  at once (at most once per `LOOK_AGAIN_AFTER`) when a submission names a type it does not
  know, so a worker's new type is accepted as soon as that worker has started. Its own
  registry's types (the built-in examples, `--handlers`) come first and are checked by
  their payload types, as its workers would check them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta

from jobqueue.adapters.telemetry.logging import Outage
from jobqueue.domain.errors import StoreError
from jobqueue.domain.job_types import KnownTypes, PublishedType, SchemaCompiler
from jobqueue.domain.ports import JobTypeCatalog, PayloadDecoder
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.service.interval_loop import IntervalLoop

_log = logging.getLogger("jobqueue")

PUBLISH_INTERVAL = timedelta(minutes=5)
PUBLISH_RETRY = timedelta(seconds=5)
REFRESH_INTERVAL = timedelta(seconds=10)
# How soon an unknown type may send the API to the table again: a client retrying a
# misspelt type in a loop reads it at most this often.
LOOK_AGAIN_AFTER = 1.0


class TypePublisher:
    """Publishes a worker process's types (`run` until `stop`): at start, then every
    `interval`; after a failure, again every `retry_every` until it succeeds, so an API
    learns the types soon after an outage that began before the worker started."""

    def __init__(
        self,
        catalog: JobTypeCatalog,
        registry: Registry,
        decoder: PayloadDecoder,
        worker: str,
        *,
        interval: timedelta = PUBLISH_INTERVAL,
        retry_every: timedelta = PUBLISH_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._catalog = catalog
        self._types = registry.described(decoder)
        self._worker = worker
        self._interval = interval.total_seconds()
        self._clock = clock
        self._due = -math.inf
        self._periodic = IntervalLoop(
            self._tick, retry_every, name="publishing job types", logger=_log
        )
        # Not an outage (that is logged and retried by the loop): most likely a schema
        # without `job_types` yet, during a deploy that migrates later. Said once.
        self._refused = Outage(
            _log,
            "could not publish this worker's job types; API processes without their "
            "code will refuse them until it can",
        )

    async def run(self) -> None:
        await self._periodic.run()

    def stop(self) -> None:
        self._periodic.stop()

    async def _tick(self) -> None:
        if self._clock() >= self._due:
            await self.publish()

    async def publish(self) -> None:
        """Publish now. Raises `StoreUnavailable` in an outage (the loop logs it)."""
        try:
            await self._catalog.publish(self._types, by=self._worker)
        except StoreError as error:
            # Tried again at the next interval.
            self._refused.failed(str(error))
        else:
            self._refused.ok()
        self._due = self._clock() + self._interval


@dataclass(frozen=True, slots=True)
class Published:
    """Where an API reads the types workers published, and how it checks their payloads."""

    catalog: JobTypeCatalog
    compiler: SchemaCompiler


class TypeCatalogue:
    """The types an API process accepts (`current`), kept up to date from `published`
    (None: only its own registry's, as in tests and a process without a database)."""

    def __init__(
        self,
        registry: Registry,
        decoder: PayloadDecoder,
        published: Published | None = None,
        *,
        interval: timedelta = REFRESH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._own = registry.described(decoder)
        self._published = published
        self._clock = clock
        self._current = self._known(())
        self._seen: Sequence[PublishedType] = ()
        # Bumped whenever `current` changes: the OpenAPI document is rebuilt on it.
        self.version = 0
        self._read_at = -math.inf
        self._reading = asyncio.Lock()
        self._refused = Outage(
            _log,
            "could not read the published job types; only this process's own are "
            "accepted until it can",
        )
        self._periodic = IntervalLoop(self.refresh, interval, name="reading job types", logger=_log)

    @property
    def current(self) -> KnownTypes:
        return self._current

    @property
    def seen(self) -> Sequence[PublishedType]:
        """The publications last read, with when and by whom."""
        return self._seen

    async def knowing(self, names: Collection[str]) -> KnownTypes:
        """`current`, read again first if it lacks one of `names` and was not read within
        `LOOK_AGAIN_AFTER`. Raises `StoreUnavailable` when that read cannot be made: the
        type may well exist, so the client should try again rather than be told no."""
        current = self._current
        if self._published is not None and any(name not in current for name in names):
            await self.fresh()
        return self._current

    async def fresh(self) -> KnownTypes:
        """`current`, read again unless that was done within `LOOK_AGAIN_AFTER`."""
        if self._published is not None and self._clock() - self._read_at >= LOOK_AGAIN_AFTER:
            await self.refresh()
        return self._current

    async def refresh(self) -> None:
        if self._published is None:
            return
        started = self._clock()
        async with self._reading:
            if self._read_at >= started:
                # Read while this waited for the lock: concurrent misses share one read.
                return
            try:
                seen = await self._published.catalog.published()
            except StoreError as error:
                # Read, though refused: looked at again no sooner than a success would be.
                self._read_at = self._clock()
                self._refused.failed(str(error))
                return
            self._read_at = self._clock()
            self._refused.ok()
            changed = [each.type for each in seen] != [each.type for each in self._seen]
            self._seen = seen
            if changed:
                self._current = self._known(seen)
                self.version += 1
                _log.info(
                    "job types read",
                    extra={"job_types": list(self._current), "published": len(seen)},
                )

    def _known(self, seen: Sequence[PublishedType]) -> KnownTypes:
        compiler = self._published.compiler if self._published is not None else None
        return KnownTypes(self._registry, self._own, seen, compiler)

    async def run(self) -> None:
        await self._periodic.run()

    def stop(self) -> None:
        self._periodic.stop()
