"""Two job types for the ways-in test (`--handlers tests.integration.ways_in_handlers`):
one whose handler declares every option, one that declares none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobqueue import JobContext, Registry, Unique

MODULE = "tests.integration.ways_in_handlers"

registry = Registry()


@registry.handler(
    "send_invoice",
    queue="billing",
    priority=3,
    max_attempts=7,
    timeout=timedelta(seconds=45),
    unique=Unique(by=("customer",)),
)
async def send_invoice(ctx: JobContext, payload: Any) -> None:
    """Bill one customer."""


@registry.handler("plain")
async def plain(ctx: JobContext, payload: Any) -> None:
    """Declares nothing: the defaults and MAX_ATTEMPTS decide."""
