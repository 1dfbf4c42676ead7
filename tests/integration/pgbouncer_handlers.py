"""Handlers for the services the PgBouncer tests start (`--handlers
tests.integration.pgbouncer_handlers`): one ending each, so that every kind of outcome
write goes through the pooler."""

from __future__ import annotations

import asyncio

import msgspec

from jobqueue import JobContext, Registry

MODULE = "tests.integration.pgbouncer_handlers"

registry = Registry()


class Flaky(msgspec.Struct, forbid_unknown_fields=True):
    failures: int


class Long(msgspec.Struct, forbid_unknown_fields=True):
    seconds: float


@registry.handler("flaky", payload=Flaky)
async def flaky(ctx: JobContext, payload: Flaky) -> None:
    """Fails (retryably) its first `failures` attempts, then succeeds."""
    if ctx.attempt <= payload.failures:
        raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")


@registry.handler("doomed")
async def doomed(ctx: JobContext, payload: object) -> None:
    raise RuntimeError("this job always fails")


@registry.handler("long", payload=Long)
async def long(ctx: JobContext, payload: Long) -> None:
    await asyncio.sleep(payload.seconds)
