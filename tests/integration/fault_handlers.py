"""Handlers for the fault tests' worker processes, and the record they leave.

Loaded with `--handlers tests.integration.fault_handlers`. Every handler appends one
line when it starts and one when it ends to the file named by `FAULTS_EXECUTIONS`:

    <job_id> <attempt> <pid> start|end <unix time>

Each line is one `write` on a descriptor opened with O_APPEND, so the lines of
concurrent processes never interleave, and a process killed mid-attempt leaves its
`start` without an `end`. The tests read the file back with `read_executions`: the
`start` lines of a job are its executions.

- `work`: sleeps `ms` milliseconds (async), the chaos and load tests' job.
- `work_sync`: the same in a plain function (the pool's threads).
- `long`: sleeps `seconds` (async), for leases that must renew.
- `step`: a graph's job: sleeps `ms`, returns its `n` and the count and sum of the `n`s
  its dependencies returned (`await ctx.dependencies()`).

The tests' side, which no worker imports (so a worker's start-up pays nothing for it),
is in tests/support: reading the executions and the processes' JSON logs back
(fault_records.py), the processes a test starts and the `work` jobs it gives them
(fault_fleet.py), and an HTTP load with probes of `/healthz` and `/readyz`
(http_load.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Annotated

import msgspec

from jobqueue import JobContext, Registry

EXECUTIONS_VARIABLE = "FAULTS_EXECUTIONS"
MODULE = "tests.integration.fault_handlers"

registry = Registry()


class Work(msgspec.Struct, forbid_unknown_fields=True):
    ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)]


class Long(msgspec.Struct, forbid_unknown_fields=True):
    seconds: Annotated[float, msgspec.Meta(ge=0)]


def _record(ctx: JobContext, event: str) -> None:
    path = os.environ.get(EXECUTIONS_VARIABLE)
    if not path:
        return
    line = f"{ctx.job_id} {ctx.attempt} {os.getpid()} {event} {time.time():.6f}\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


@registry.handler("work", payload=Work)
async def work(ctx: JobContext, payload: Work) -> None:
    _record(ctx, "start")
    await asyncio.sleep(payload.ms / 1000)
    _record(ctx, "end")


@registry.handler("work_sync", payload=Work)
def work_sync(ctx: JobContext, payload: Work) -> None:
    _record(ctx, "start")
    time.sleep(payload.ms / 1000)
    _record(ctx, "end")


@registry.handler("stuck_sync", payload=Long)
def stuck_sync(ctx: JobContext, payload: Long) -> None:
    # A blocking call that ignores `ctx.stop`, as a stuck driver or socket would.
    _record(ctx, "start")
    time.sleep(payload.seconds)
    _record(ctx, "end")


class Layer(msgspec.Struct, forbid_unknown_fields=True):
    ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)]
    n: int


@registry.handler("step", payload=Layer)
async def step(ctx: JobContext, payload: Layer) -> dict[str, int]:
    # A graph's job: its result is its number, and what it saw of its dependencies'.
    _record(ctx, "start")
    await asyncio.sleep(payload.ms / 1000)
    seen = [each.result for each in await ctx.dependencies() if each.completed]
    _record(ctx, "end")
    numbers = [n for each in seen if isinstance(each, dict) and isinstance(n := each["n"], int)]
    return {"n": payload.n, "seen": len(numbers), "sum": sum(numbers)}


@registry.handler("long", payload=Long)
async def long(ctx: JobContext, payload: Long) -> None:
    _record(ctx, "start")
    await asyncio.sleep(payload.seconds)
    _record(ctx, "end")
