"""Handlers for the dashboard's workers, periodic and job-type pages (`--handlers
tests.integration.registry_handlers`): a schedule every second, one that has not run yet
under a name that is markup, and a type with every option, whose description and
payload schema hold markup too."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import msgspec

from jobqueue import JobContext, Registry, Unique

MODULE = "tests.integration.registry_handlers"
HOSTILE = "<script>alert(1)</script>"
NIGHTLY = f"nightly {HOSTILE}"

registry = Registry()


@registry.periodic("* * * * * *", name="every-second", queue="ticks")
async def every_second(ctx: JobContext, payload: dict[str, object]) -> None:
    pass


@registry.periodic("0 3 * * *", name=NIGHTLY, timezone="Europe/Paris", catch_up=True)
async def nightly(ctx: JobContext, payload: dict[str, object]) -> None:
    pass


class Refund(msgspec.Struct, forbid_unknown_fields=True):
    order: Annotated[int, msgspec.Meta(description=f"The order {HOSTILE}")]
    cents: Annotated[int, msgspec.Meta(gt=0)]


@registry.handler(
    "refund",
    payload=Refund,
    queue="billing",
    priority=2,
    max_attempts=5,
    timeout=timedelta(seconds=30),
    unique=Unique(by=("order",), period=timedelta(hours=1)),
)
async def refund(ctx: JobContext, payload: Refund) -> None:
    """Refund one order <script>alert(1)</script>."""
