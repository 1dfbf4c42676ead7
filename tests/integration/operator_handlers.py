"""A nightly periodic job, for `jobqueue periodic list` (`--handlers
tests.integration.operator_handlers`)."""

from __future__ import annotations

from jobqueue import JobContext, Registry

MODULE = "tests.integration.operator_handlers"

registry = Registry()


@registry.periodic("0 3 * * *", name="nightly_report", timezone="Europe/Paris")
async def nightly_report(ctx: JobContext, payload: dict[str, object]) -> None:
    pass
