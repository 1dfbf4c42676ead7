"""A dependent's handler runs once its dependencies completed and reads their results from
its context, in the order it named them; a callback (run anyway) runs after a failure
and reads how each ended; a dependent of a job that did not complete never runs."""

from __future__ import annotations

from typing import Any

from jobqueue.domain.dependencies import Dependency, Step
from jobqueue.domain.job import NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status
from tests.fakes import InMemoryJobStore, wall_clock
from tests.unit.pool_harness import config, make_pool, running, settled


def _n(result: Any) -> int:
    assert isinstance(result, dict)
    return int(result["n"])


def _new(kind: str, payload: Any = None, **options: Any) -> NewJob:
    return NewJob.build(type=kind, payload=payload, max_attempts=1, **options)


async def test_a_fan_in_reads_its_dependencies_results_in_order() -> None:
    store = InMemoryJobStore(wall_clock)
    registry = Registry()
    seen: list[tuple[Dependency, ...]] = []

    @registry.handler("part")
    async def part(ctx: JobContext, payload: Any) -> Any:
        if payload["n"] == 2:
            raise ValueError("part two is broken")
        return {"n": payload["n"]}

    @registry.handler("merge")
    async def merge(ctx: JobContext, payload: Any) -> int:
        dependencies = await ctx.dependencies()
        seen.append(dependencies)
        # Read once per attempt: a second call answers the first's.
        assert await ctx.dependencies() is dependencies
        return sum(_n(each.result) for each in dependencies if each.completed)

    @registry.handler("alone")
    async def alone(ctx: JobContext, payload: Any) -> int:
        return len(await ctx.dependencies())

    @registry.handler("never")
    async def never(ctx: JobContext, payload: Any) -> None:
        raise AssertionError("a dependent of a failed job ran")

    steps = [
        *(Step(_new("part", {"n": n}), name=f"p{n}") for n in range(4)),
        Step(_new("merge"), name="good", after=("p3", "p0", "p1")),
        Step(_new("never"), name="bad", after=("p1", "p2")),
        Step(_new("merge", run_anyway=True), name="callback", after=("p2", "p3")),
    ]
    submitted = [each.job for each in await store.submit_graph(steps)]
    lone = (await store.submit(_new("alone"))).job
    parts, good, bad, callback = submitted[:4], submitted[4], submitted[5], submitted[6]

    pool = make_pool(store, registry, config(workers=2))
    async with running(pool):
        good_done = await settled(store, good, Status.COMPLETED)
        callback_done = await settled(store, callback, Status.COMPLETED)
        lone_done = await settled(store, lone, Status.COMPLETED)

    assert good_done.result == 4
    assert callback_done.result == 3
    assert lone_done.result == 0
    first, second = seen if seen[0][0].id == parts[3].id else seen[::-1]
    assert [each.id for each in first] == [parts[3].id, parts[0].id, parts[1].id]
    assert all(each.status is Status.COMPLETED for each in first)
    assert [(each.id, each.status) for each in second] == [
        (parts[2].id, Status.DEAD_LETTER),
        (parts[3].id, Status.COMPLETED),
    ]
    assert second[0].error == "ValueError: part two is broken"
    assert second[0].result is None
    refused = await store.get(bad.id)
    assert refused.status is Status.CANCELLED
    assert refused.last_error == f"job {parts[2].id} it depends on ended dead_letter"
