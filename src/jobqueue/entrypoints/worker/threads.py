"""Threads for synchronous handlers: one per running call, never shared, never joined.

A thread cannot be cancelled. So a sync attempt keeps its worker slot, and its job's
lease, until its function returns, whatever the timeout or shutdown say: the pool never
claims more work than it has free slots for, and never hands a job whose function still
runs to another attempt. The threads are daemons so that a function stuck for good does
not keep the process from exiting; its job then comes back through lease recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any


def run_in_thread(func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Call `func(*args)` in a new daemon thread, with the caller's context variables (the
    attempt's log fields and trace span), as `asyncio.to_thread` would; the future
    resolves when the call returns or raises. Cancelling the future stops waiting, not
    the thread."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def report(outcome: Callable[[], None]) -> None:
        # A closed loop: the process is exiting and nobody waits any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome)

    def call() -> None:
        try:
            result = context.run(func, *args)
        except BaseException as error:  # the handler's, reported by the attempt
            report(functools.partial(done.set_exception, error))
        else:
            report(functools.partial(done.set_result, result))

    threading.Thread(target=call, name="jobqueue-job", daemon=True).start()
    return done
