"""A handler module that claims a built-in job type."""

from __future__ import annotations

from typing import Any

from jobqueue import JobContext, Registry

registry = Registry()


@registry.handler("sleep")
async def my_sleep(ctx: JobContext, payload: Any) -> None:
    pass
