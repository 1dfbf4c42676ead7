"""The handler module a `jobqueue worker` subprocess loads for the start-up measurement
(`--handlers bench.startup_handlers`).

Its one handler notes when it was called and writes that down in the file its job names,
so the benchmark can tell how long the worker took from spawn to its first handler call.
It imports only `jobqueue`'s public surface and the standard library, so it adds nothing
measurable to the worker's start-up.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import jobqueue
from jobqueue import JobContext, Permanent, Registry

JOB_TYPE = "bench.startup"

registry = Registry()


# No payload type: nothing to decode, so no msgspec conversion lies on the measured path.
@registry.handler(JOB_TYPE)
async def started(ctx: JobContext, payload: Any) -> None:
    called = time.time()  # first: what follows is the handler's work, not the start-up
    if not isinstance(payload, dict) or not isinstance(payload.get("path"), str):
        raise Permanent(f"a {JOB_TYPE} payload is {{'path': <file>}}, got {payload!r}")
    record_start(Path(payload["path"]), called)


def record_start(path: Path, called: float) -> None:
    """Write the call time, and which `jobqueue` package the worker ran, into `path`.

    Written beside it and renamed into place, so the benchmark never reads half a file.
    """
    record = {"called": called, "jobqueue": jobqueue.__file__, "pid": os.getpid()}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    os.replace(partial, path)
