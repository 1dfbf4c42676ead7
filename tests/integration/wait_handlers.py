"""Handlers whose jobs end in known ways, for `jobqueue jobs wait` and `jobs show`
(`--handlers tests.integration.wait_handlers`)."""

from __future__ import annotations

from jobqueue import JobContext, Permanent, Registry

MODULE = "tests.integration.wait_handlers"

registry = Registry()


@registry.handler("summarise")
async def summarise(ctx: JobContext, payload: dict[str, int]) -> dict[str, object]:
    """Report each row's progress, then return a summary."""
    rows = payload["rows"]
    for done in range(1, rows + 1):
        ctx.progress(done=done, total=rows, message=f"row {done}")
    return {"rows": rows, "name": "café"}


@registry.handler("refuse")
async def refuse(ctx: JobContext, payload: object) -> None:
    raise Permanent("no such customer")


@registry.handler("long_result")
async def long_result(ctx: JobContext, payload: object) -> list[dict[str, object]]:
    """A result far longer than a card shows: 500 lines once indented, and more."""
    return [{"row": row, "text": "x" * 300} for row in range(100)]
