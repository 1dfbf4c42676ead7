"""A user's handler module, as `--handlers tests.integration.user_handlers` loads it."""

from __future__ import annotations

import msgspec

from jobqueue import JobContext, Registry

registry = Registry()


class Greeting(msgspec.Struct, forbid_unknown_fields=True):
    name: str


@registry.handler("greet", payload=Greeting)
async def greet(ctx: JobContext, payload: Greeting) -> None:
    ctx.logger.info("hello %s", payload.name)
