"""A pool's running attempts at shutdown: given `grace` to finish (SHUTDOWN_TIMEOUT), then
asked to stop and cancelled, each cancelled attempt recording its release (the attempt
given back). One that outlasts a write's time even so is a handler ignoring
cancellation: it is left running, and its job to lease recovery."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import timedelta

from jobqueue.domain.registry import StopReason
from jobqueue.entrypoints.worker.attempt import Attempt

_log = logging.getLogger("jobqueue.worker")


async def stop_attempts(
    attempts: Mapping[asyncio.Task[None], Attempt], grace: float, outcome_timeout: timedelta
) -> None:
    """Wait up to `grace` seconds for `attempts`, then stop those still running."""
    running = set(attempts)
    if running and grace > 0:
        _log.info("stopping: waiting up to %gs for %d running attempts", grace, len(running))
        _, running = await asyncio.wait(running, timeout=grace)
    if not running:
        return
    _log.warning("cancelling %d attempts still running at shutdown", len(running))
    for task in running:
        attempt = attempts[task]
        attempt.given_up = True
        attempt.stop.request(StopReason.SHUTDOWN)
        task.cancel()
    _, stuck = await asyncio.wait(running, timeout=outcome_timeout.total_seconds())
    if stuck:
        _log.error(
            "%d attempts ignored cancellation; their jobs will be recovered when their "
            "leases expire",
            len(stuck),
        )
