"""Handlers for the job page's browser tests (`--handlers
tests.integration.dashboard_job_handlers`): `fails_once` fails its first attempt, then
runs until the test lets it finish, so that a person on the page sees it dead-lettered,
retried, running and completed, each in turn; `reports` reports its progress a step at a
time, each when the test says, and returns a result, so that a person sees the bar move
and the result come."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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
    # The test's go-ahead.
    await _until_exists(directory / "go")


class Reports(msgspec.Struct, forbid_unknown_fields=True):
    # Where the test lets it go on: a file `step`, then a file `go`.
    directory: str
    # In its progress message and its result: text a page must escape.
    note: str


@registry.handler("reports", payload=Reports)
async def reports(ctx: JobContext, payload: Reports) -> dict[str, Any]:
    directory = Path(payload.directory)
    ctx.progress(done=1, total=4, message=f"reading {payload.note}")
    await _until_exists(directory / "step")
    ctx.progress(done=3, total=4, message="writing")
    await _until_exists(directory / "go")
    return {"note": payload.note, "rows": 4, "pages": [1, 2, 3, 4]}


async def _until_exists(path: Path) -> None:
    # A file the test makes from another process, looked for until it comes (or the
    # attempt's timeout). No event crosses processes; a local stat does not block long.
    while not path.exists():  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(0.05)
