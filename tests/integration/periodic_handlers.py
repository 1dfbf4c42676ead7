"""A periodic job every second, for the cron process test (`--handlers
tests.integration.periodic_handlers`)."""

from __future__ import annotations

from jobqueue import JobContext, Registry

MODULE = "tests.integration.periodic_handlers"

registry = Registry()


@registry.periodic("* * * * * *", name="tick", payload={"beat": True})
async def tick(ctx: JobContext, payload: dict[str, object]) -> None:
    pass
