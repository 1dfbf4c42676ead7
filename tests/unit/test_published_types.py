"""Job types without their code: what a worker publishes of its registry, how an API's
catalogue checks and refreshes them (against the in-memory catalog and a manual clock),
and how published payload schemas are checked."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
import pytest

from jobqueue.adapters.payload_schemas import JsonSchemaCompiler
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.domain.errors import InvalidPayload, StoreError, StoreUnavailable, UnknownJobType
from jobqueue.domain.job import NewJob
from jobqueue.domain.job_types import JobType, KnownTypes, PublishedType
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.type_options import TypeOptions
from jobqueue.domain.unique import Unique
from jobqueue.entrypoints.service.published_types import (
    LOOK_AGAIN_AFTER,
    Published,
    TypeCatalogue,
    TypePublisher,
)
from tests.fakes import InMemoryJobTypes

DECODER = MsgspecPayloadDecoder()
COMPILER = JsonSchemaCompiler()


class Order(msgspec.Struct, forbid_unknown_fields=True):
    sku: str
    quantity: Annotated[int, msgspec.Meta(ge=1)]


class Seconds:
    """A monotonic clock that moves when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _worker_registry() -> Registry:
    registry = Registry()

    @registry.handler("order", payload=Order, queue="shop", priority=2, max_attempts=4)
    async def order(ctx: JobContext, payload: Order) -> None:
        """Place an order.

        Details that stay out of the description.
        """

    @registry.handler("anything", unique=Unique(key="only-one", period=timedelta(hours=1)))
    def anything(ctx: JobContext, payload: Any) -> None:
        pass

    return registry


def _local_registry() -> Registry:
    registry = Registry()

    @registry.handler("local", payload=Order)
    async def local(ctx: JobContext, payload: Order) -> None:
        pass

    return registry


def _published(*types: JobType) -> list[PublishedType]:
    return [PublishedType(each, datetime(2030, 1, 1, tzinfo=UTC), "w:1") for each in types]


def test_a_registry_describes_each_type_with_its_payload_schema_options_and_summary() -> None:
    described = {each.name: each for each in _worker_registry().described(DECODER)}

    order = described["order"]
    assert order.payload_schema == msgspec.json.schema(Order)
    assert order.options == TypeOptions(queue="shop", priority=2, max_attempts=4)
    assert order.description == "Place an order."
    anything = described["anything"]
    assert anything.payload_schema is None
    assert anything.description is None
    assert anything.options.unique == Unique(key="only-one", period=timedelta(hours=1))


def test_published_types_are_checked_by_their_schema_and_local_ones_by_their_code() -> None:
    published = _worker_registry().described(DECODER)
    # The worker also publishes a `local`, but this process's own handler decides.
    shadowed = JobType("local", {"type": "string"})
    known = KnownTypes(
        _local_registry(),
        _local_registry().described(DECODER),
        _published(*published, shadowed),
        COMPILER,
    )

    assert list(known) == ["anything", "local", "order"]
    known.check("order", {"sku": "a", "quantity": 2}, DECODER)
    with pytest.raises(InvalidPayload, match=r"0 is less than the minimum of 1 - at `\$.quantity`"):
        known.check("order", {"sku": "a", "quantity": 0}, DECODER)
    with pytest.raises(InvalidPayload, match="Additional properties"):
        known.check("order", {"sku": "a", "quantity": 1, "gift": True}, DECODER)
    known.check("anything", [1, "two"], DECODER)
    # Checked by the local Struct (msgspec's words), not by the published string schema.
    with pytest.raises(InvalidPayload, match="Expected `object`, got `str`"):
        known.check("local", "text", DECODER)
    known.check("local", {"sku": "a", "quantity": 1}, DECODER)
    with pytest.raises(UnknownJobType, match=r"known types: 'anything', 'local', 'order'"):
        known.check("nope", {}, DECODER)
    assert known.options_for("order").queue == "shop"
    assert known.options_for("nope") == TypeOptions()
    by_name = {each.type.name: each for each in known.described()}
    assert by_name["local"].local
    assert by_name["local"].published is not None
    assert not by_name["order"].local


def test_new_jobs_of_a_published_type_get_its_options() -> None:
    known = KnownTypes(Registry(), (), _published(*_worker_registry().described(DECODER)), COMPILER)

    new = NewJob.build(type="order", payload={"sku": "a", "quantity": 1}, registered=known)
    assert (new.queue, new.priority, new.max_attempts) == ("shop", 2, 4)
    with pytest.raises(UnknownJobType):
        NewJob.build(type="nope", registered=known)


def test_published_schemas_need_a_compiler() -> None:
    with pytest.raises(ValueError, match="need a compiler"):
        KnownTypes(Registry(), (), _published(JobType("t", {"type": "object"})))


def test_an_invalid_published_schema_lets_payloads_through_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "jobqueue"):
        check = COMPILER.compile("odd", {"type": "no-such-type"})
    check({"anything": 1})
    assert [r.getMessage() for r in caplog.records] == [
        "a published payload schema is not valid JSON Schema; its payloads are checked "
        "only by the worker"
    ]


async def test_a_worker_publishes_its_types_at_start_and_again_each_interval() -> None:
    catalog = InMemoryJobTypes()
    clock = Seconds()
    publisher = TypePublisher(
        catalog, _worker_registry(), DECODER, "host:1", interval=timedelta(minutes=5), clock=clock
    )

    await publisher._tick()
    assert [each.type.name for each in await catalog.published()] == ["anything", "order"]
    assert {each.published_by for each in await catalog.published()} == {"host:1"}
    catalog.failing = StoreUnavailable("down")
    clock.now += 60
    await publisher._tick()  # not due: nothing sent, so nothing fails
    clock.now += 240
    with pytest.raises(StoreUnavailable):
        await publisher._tick()
    # Still due after an outage: the next tick tries again.
    catalog.failing = None
    await publisher._tick()


async def test_a_worker_whose_types_cannot_be_written_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = InMemoryJobTypes()
    catalog.failing = StoreError("relation job_types does not exist")
    clock = Seconds()
    publisher = TypePublisher(catalog, _worker_registry(), DECODER, "host:1", clock=clock)

    with caplog.at_level(logging.WARNING, "jobqueue"):
        for _ in range(3):
            await publisher.publish()
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith("could not publish this worker's job types")


def _catalogue(catalog: InMemoryJobTypes, clock: Seconds) -> TypeCatalogue:
    return TypeCatalogue(_local_registry(), DECODER, Published(catalog, COMPILER), clock=clock)


async def test_an_unknown_type_reads_the_published_ones_again_at_most_once_a_second() -> None:
    catalog = InMemoryJobTypes()
    clock = Seconds()
    types = _catalogue(catalog, clock)
    assert list(await types.knowing(["order"])) == ["local"]
    assert catalog.reads == 1

    await TypePublisher(catalog, _worker_registry(), DECODER, "w:1").publish()
    assert "order" not in await types.knowing(["order"])  # looked within the second
    assert catalog.reads == 1
    clock.now += LOOK_AGAIN_AFTER
    assert "order" in await types.knowing(["order"])
    assert catalog.reads == 2
    assert types.version == 1
    # A known type costs no read.
    clock.now += 10
    await types.knowing(["order", "local"])
    assert catalog.reads == 2


async def test_concurrent_misses_share_one_read() -> None:
    catalog = InMemoryJobTypes()
    types = _catalogue(catalog, Seconds())

    await asyncio.gather(*(types.knowing(["nope"]) for _ in range(20)))
    assert catalog.reads == 1


async def test_a_read_that_finds_nothing_new_keeps_the_version() -> None:
    catalog = InMemoryJobTypes()
    clock = Seconds()
    types = _catalogue(catalog, clock)
    publisher = TypePublisher(catalog, _worker_registry(), DECODER, "w:1")
    await publisher.publish()
    await types.refresh()
    assert types.version == 1
    await publisher.publish()  # the same types again, at a later time
    clock.now += 10
    await types.refresh()
    assert types.version == 1
    assert len(types.seen) == 2


async def test_an_outage_during_a_miss_is_an_outage_not_an_unknown_type() -> None:
    catalog = InMemoryJobTypes()
    types = _catalogue(catalog, Seconds())
    catalog.failing = StoreUnavailable("down")

    with pytest.raises(StoreUnavailable):
        await types.knowing(["order"])


async def test_a_catalog_that_cannot_be_read_leaves_the_process_its_own_types(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = InMemoryJobTypes()
    catalog.failing = StoreError("relation job_types does not exist")
    clock = Seconds()
    types = _catalogue(catalog, clock)

    with caplog.at_level(logging.WARNING, "jobqueue"):
        for _ in range(3):
            clock.now += LOOK_AGAIN_AFTER
            assert list(await types.knowing(["order"])) == ["local"]
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith("could not read the published job types")
