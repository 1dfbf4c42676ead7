"""Cancels, as the worker pools of a process hear them.

An operator's cancel ends the job in the database and notifies the job's id
(`adapters.postgres.cancels`). Every worker process listens; the pool holding the job
stops its attempt. A process that missed the notification (not listening at the time, or
NOTIFY=false) learns at its next lease renewal, which no longer finds the job's lease,
and stops the attempt then.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol
from uuid import UUID

_log = logging.getLogger("jobqueue.worker")


class Cancellable(Protocol):
    def cancelled(self, job_id: UUID) -> bool:
        """Stop the attempt running `job_id`, if this holds it; return whether it did."""
        ...


class CancelRouter:
    """Tells the pool running a cancelled job (`heard` is a notification callback)."""

    def __init__(self, pools: Sequence[Cancellable]) -> None:
        self._pools = list(pools)

    def heard(self, payload: str) -> None:
        if not payload:
            # Deaf for a while (`notify.MISSED`): a cancel missed meanwhile is found by
            # the next lease renewal.
            return
        try:
            job_id = UUID(payload)
        except ValueError:
            _log.warning(
                "ignored a cancel notification that names no job", extra={"payload": payload[:100]}
            )
            return
        for pool in self._pools:
            if pool.cancelled(job_id):
                return
