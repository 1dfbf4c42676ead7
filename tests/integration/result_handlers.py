"""Handlers for the results and waits process tests (`JOBQUEUE_HANDLERS=
tests.integration.result_handlers`)."""

from __future__ import annotations

import asyncio
import dataclasses

import msgspec

from jobqueue import JobContext, Registry

MODULE = "tests.integration.result_handlers"

registry = Registry()


class Pages(msgspec.Struct, forbid_unknown_fields=True):
    count: int
    # How long each page takes.
    seconds: float = 0.0


@dataclasses.dataclass
class Fetched:
    pages: list[str]
    # Whose attempt produced it: the ids of the jobs it read are the test's business.
    attempt: int


@registry.handler("fetch_pages", payload=Pages)
async def fetch_pages(ctx: JobContext, payload: Pages) -> Fetched:
    """Reports a page at a time, then returns every page's name: a result and progress."""
    pages = []
    for number in range(1, payload.count + 1):
        await asyncio.sleep(payload.seconds)
        pages.append(f"page-{number}")
        ctx.progress(done=number, total=payload.count, message=f"fetched page-{number}")
    return Fetched(pages=pages, attempt=ctx.attempt)
