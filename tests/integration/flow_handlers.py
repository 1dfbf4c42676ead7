"""A handler module for the flow-control tests: `held` jobs take a while (a slot each, on
the `limited` queue), `paced` ones nothing (a start each, on the `paced` queue), `tenant`
jobs a while, each in the partition of its payload's tenant (on the `tenants` queue),
`paced_tenant` ones nothing, in their tenant's partition (on the `paced_keys` queue);
`paced_sms` and `paced_mail` nothing, side by side on the `paced_types` queue, where
only the first is rated."""

from __future__ import annotations

import asyncio

from jobqueue import JobContext, Registry

MODULE = "tests.integration.flow_handlers"
# Long enough that a process holds its slots for a while, short enough for many starts.
HELD_SECONDS = 0.2

registry = Registry()


@registry.handler("held", queue="limited")
async def held(ctx: JobContext, payload: object) -> None:
    await asyncio.sleep(HELD_SECONDS)


@registry.handler("paced", queue="paced")
async def paced(ctx: JobContext, payload: object) -> None:
    return None


@registry.handler("tenant", queue="tenants", partition_by=("tenant",))
async def tenant(ctx: JobContext, payload: object) -> None:
    await asyncio.sleep(HELD_SECONDS)


@registry.handler("paced_tenant", queue="paced_keys", partition_by=("tenant",))
async def paced_tenant(ctx: JobContext, payload: object) -> None:
    return None


@registry.handler("paced_sms", queue="paced_types")
async def paced_sms(ctx: JobContext, payload: object) -> None:
    return None


@registry.handler("paced_mail", queue="paced_types")
async def paced_mail(ctx: JobContext, payload: object) -> None:
    return None
