"""A handler for the job page's browser tests (`--handlers
tests.integration.dashboard_job_handlers`): it fails its first attempt, then runs until
the test lets it finish, so that a person on the page sees it dead-lettered, retried,
running and completed, each in turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from jobqueue import JobContext, Registry, Transient

MODULE = "tests.integration.dashboard_job_handlers"

registry = Registry()


class FailsOnce(msgspec.Struct, forbid_unknown_fields=True):
    # Where the handler keeps that it failed once, and where the test lets it finish.
    directory: str
    # Shown in the payload and in the first attempt's error: text a page must escape.
    note: str


@registry.handler("fails_once", payload=FailsOnce)
async def fails_once(ctx: JobContext, payload: FailsOnce) -> None:
    directory = Path(payload.directory)
    failed = directory / "failed"
    if not failed.exists():
        failed.touch()
        raise Transient(f"the first attempt fails: {payload.note}\nand says so on two lines")
    # The test's go-ahead, from another process: a file, looked for until it comes (or
    # the attempt's timeout). No event crosses processes.
    while not (directory / "go").exists():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
