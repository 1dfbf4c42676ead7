"""The handler module of the `jobqueue worker` and `jobqueue api` processes the benchmark
starts (`--handlers jobqueue.bench.worker_handlers`), and the job types it runs.

- `bench.noop` does nothing: drains measure the queue, not a handler.
- `bench.startup` and `bench.pickup` note when they were called (`time.time()`: one
  machine, one clock, the same in every process, unlike `perf_counter`) in the file their
  job names, so the benchmark can tell how long a job waited for a process it does not
  run itself.
- `bench.wait` sleeps the seconds its payload names, then returns `{"token": <its
  payload's token>}`: a job a producer waits for, ended a fixed time after it started,
  whose result names it.
- `bench.step` returns `{"ok": true}` at once: a job of a graph (`graphs.py`), and of the
  independent jobs its rate is compared with, whose ending writes a result as a real
  one would.

It imports only `jobqueue`'s public surface and the standard library, so it adds nothing
measurable to a worker's start-up. The in-process pools register their own `bench.noop`
(`probe.py`), on a registry of their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import jobqueue
from jobqueue import JobContext, Permanent, Registry

NOOP_TYPE = "bench.noop"
STARTUP_TYPE = "bench.startup"
PICKUP_TYPE = "bench.pickup"
WAIT_TYPE = "bench.wait"
STEP_TYPE = "bench.step"
# What a `bench.step` returns, as stored.
STEP_RESULT = {"ok": True}

registry = Registry()


# No payload types: nothing to decode, so no msgspec conversion lies on a measured path.
@registry.handler(NOOP_TYPE)
async def noop(ctx: JobContext, payload: Any) -> None:
    return None


@registry.handler(STARTUP_TYPE)
async def started(ctx: JobContext, payload: Any) -> None:
    called = time.time()  # first: what follows is the handler's work, not the start-up
    record_start(_path_of(payload, STARTUP_TYPE), called)


@registry.handler(PICKUP_TYPE)
async def picked_up(ctx: JobContext, payload: Any) -> None:
    called = time.time()
    record_pickup(_path_of(payload, PICKUP_TYPE), str(ctx.job_id), called)


@registry.handler(WAIT_TYPE)
async def waited_for(ctx: JobContext, payload: Any) -> dict[str, Any]:
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("sleep"), int | float)
        or "token" not in payload
    ):
        raise Permanent(
            f"a {WAIT_TYPE} payload is {{'sleep': <seconds>, 'token': …}}, got {payload!r}"
        )
    await asyncio.sleep(payload["sleep"])
    return {"token": payload["token"]}


@registry.handler(STEP_TYPE)
async def step(ctx: JobContext, payload: Any) -> dict[str, bool]:
    return dict(STEP_RESULT)


def record_start(path: Path, called: float) -> None:
    """Write the call time, and which `jobqueue` package the worker ran, into `path`.

    Written beside it and renamed into place, so the benchmark never reads half a file.
    """
    record = {"called": called, "jobqueue": jobqueue.__file__, "pid": os.getpid()}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    os.replace(partial, path)


def record_pickup(path: Path, job_id: str, called: float) -> None:
    """Append `<job id> <call time>` to `path`: one short write in append mode, so lines of
    concurrent attempts never interleave (the reader keeps only lines already ended)."""
    with path.open("a", encoding="utf-8") as starts:
        starts.write(f"{job_id} {called!r}\n")


def _path_of(payload: Any, job_type: str) -> Path:
    if not isinstance(payload, dict) or not isinstance(payload.get("path"), str):
        raise Permanent(f"a {job_type} payload is {{'path': <file>}}, got {payload!r}")
    return Path(payload["path"])
