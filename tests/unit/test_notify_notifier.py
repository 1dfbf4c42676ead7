"""The Notifier: many "a job is available" calls become few sends, and none can fail a
request. The interval is a fake sleep the test ends by hand, so nothing depends on speed."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from jobqueue.adapters.postgres.notify import Notifier
from tests.unit.pool_harness import eventually

INTERVAL = timedelta(milliseconds=40)


class ManualInterval:
    """A fake `sleep`: each interval lasts until the test calls `end()`."""

    def __init__(self) -> None:
        self.requested: list[float] = []
        self._ends = asyncio.Semaphore(0)

    async def __call__(self, seconds: float) -> None:
        self.requested.append(seconds)
        await self._ends.acquire()

    def end(self) -> None:
        self._ends.release()


class RecordingSend:
    def __init__(self) -> None:
        self.sent = 0
        self.failures: list[BaseException] = []

    async def __call__(self) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.sent += 1


async def let_everything_run() -> None:
    # Yields enough for any ready task to reach its next real wait; used only to show
    # that something did NOT happen, after the notifier is known to be waiting.
    for _ in range(20):
        await asyncio.sleep(0)


async def started(send: RecordingSend, interval: ManualInterval) -> Notifier:
    notifier = Notifier(send, interval=INTERVAL, sleep=interval)
    notifier.start()
    return notifier


async def test_a_burst_of_job_available_calls_is_sent_once() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = await started(send, interval)
    try:
        for _ in range(1000):
            notifier.job_available()

        await eventually(lambda: interval.requested == [INTERVAL.total_seconds()], "pacing")
        await let_everything_run()

        assert send.sent == 1
    finally:
        await notifier.aclose()


async def test_calls_during_the_interval_become_one_send_when_it_ends() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = await started(send, interval)
    try:
        notifier.job_available()
        await eventually(lambda: len(interval.requested) == 1, "the first interval began")
        for _ in range(500):
            notifier.job_available()
        await let_everything_run()
        assert send.sent == 1

        interval.end()

        await eventually(lambda: send.sent == 2, "the coalesced send")
        await eventually(lambda: len(interval.requested) == 2, "the second interval began")
        await let_everything_run()
        assert send.sent == 2
    finally:
        await notifier.aclose()


async def test_nothing_is_sent_without_a_call_and_the_next_call_is_sent_at_once() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = await started(send, interval)
    try:
        await let_everything_run()
        assert send.sent == 0

        notifier.job_available()
        await eventually(lambda: len(interval.requested) == 1, "the first interval began")
        interval.end()
        await let_everything_run()
        assert send.sent == 1  # the interval ended with nothing owed: no send

        # A quiet spell is over: this one goes out without waiting for any interval.
        notifier.job_available()
        await eventually(lambda: send.sent == 2, "the next send")
        assert len(interval.requested) == 2
    finally:
        await notifier.aclose()


async def test_a_quiet_notifier_lets_the_caller_carry_the_wake_up_then_coalesces() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = await started(send, interval)
    try:
        assert notifier.carry()
        # The carried wake-up was this interval's send: nobody may carry another, and
        # the calls made meanwhile wait for the interval's end.
        await eventually(lambda: len(interval.requested) == 1, "the interval began")
        assert not notifier.carry()
        for _ in range(100):
            notifier.job_available()
        await let_everything_run()
        assert send.sent == 0

        interval.end()
        await eventually(lambda: send.sent == 1, "the coalesced send")
        assert not notifier.carry()  # in its own interval again
        interval.end()
        await eventually(lambda: notifier.carry(), "quiet again: the next may carry")
        assert send.sent == 1
    finally:
        await notifier.aclose(flush=False)


async def test_nothing_is_carried_while_a_send_is_owed_or_after_close() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = Notifier(send, interval=INTERVAL, sleep=interval)
    notifier.job_available()
    assert not notifier.carry()  # not started: owed until it is
    notifier.start()
    await eventually(lambda: send.sent == 1, "the owed send")
    assert not notifier.carry()  # during the interval after it
    await notifier.aclose()
    assert not notifier.carry()


async def test_a_failed_send_is_logged_once_never_raised_and_later_sends_still_go_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobqueue.notify")
    send, interval = RecordingSend(), ManualInterval()
    send.failures = [OSError("connection refused"), OSError("connection refused")]
    notifier = await started(send, interval)
    try:
        notifier.job_available()
        await eventually(lambda: len(interval.requested) == 1, "the first interval began")
        notifier.job_available()
        interval.end()
        await eventually(lambda: len(interval.requested) == 2, "the second failure")
        notifier.job_available()
        interval.end()

        await eventually(lambda: send.sent == 1, "a send after the failures")
    finally:
        await notifier.aclose()

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "OSError: connection refused" in getattr(warnings[0], "error", "")
    assert any(r.getMessage() == "wake-up notifications are sent again" for r in caplog.records)


async def test_a_send_that_hangs_is_abandoned_after_the_send_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.notify")
    hung = asyncio.Event()

    async def never_answers() -> None:
        hung.set()
        await asyncio.Event().wait()

    interval = ManualInterval()
    notifier = Notifier(
        never_answers, interval=INTERVAL, send_timeout=timedelta(milliseconds=10), sleep=interval
    )
    notifier.start()
    try:
        notifier.job_available()

        await eventually(lambda: len(interval.requested) == 1, "the send gave up")
    finally:
        await notifier.aclose()

    assert hung.is_set()
    assert "TimeoutError" in getattr(caplog.records[0], "error", "")


class WaitingSend:
    """A send waiting for a connection until the test gives it one (`answer`)."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.sent = 0
        self.dropped = 0
        self._answer = asyncio.Event()

    async def __call__(self) -> None:
        self.waiting.set()
        try:
            await self._answer.wait()
        except asyncio.CancelledError:
            self.dropped += 1
            raise
        self._answer.clear()
        self.waiting.clear()
        self.sent += 1

    def answer(self) -> None:
        self._answer.set()


async def sending(send: WaitingSend, interval: ManualInterval) -> Notifier:
    """A started notifier whose first send waits for a connection."""
    notifier = Notifier(send, interval=INTERVAL, sleep=interval)
    notifier.start()
    notifier.job_available()
    await asyncio.wait_for(send.waiting.wait(), 5)
    return notifier


async def test_a_send_waiting_for_a_connection_is_carried_by_the_next_caller_instead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.notify")
    send, interval = WaitingSend(), ManualInterval()
    notifier = await sending(send, interval)
    try:
        # Callers' statements hold the connections it waits for: the first to come takes
        # the wake-up over, the others notify as before, through the notifier.
        assert notifier.carry()
        assert not notifier.carry()
        await let_everything_run()
        assert send.dropped == 0  # not before the carrying statement committed

        notifier.carried()
        await eventually(lambda: len(interval.requested) == 1, "the interval after it")
        assert (send.sent, send.dropped) == (0, 1)
        # The carried wake-up was this interval's send, as the notifier's own would be.
        notifier.job_available()
        assert not notifier.carry()
        interval.end()
        await eventually(lambda: send.waiting.is_set(), "the coalesced send")
        send.answer()
        await eventually(lambda: send.sent == 1, "the coalesced send went out")
    finally:
        await notifier.aclose(flush=False)
    assert caplog.records == []


async def test_a_taken_over_send_whose_caller_never_committed_still_goes_out() -> None:
    send, interval = WaitingSend(), ManualInterval()
    notifier = await sending(send, interval)
    try:
        assert notifier.carry()  # and then its statement fails: `carried` never comes
        send.answer()

        await eventually(lambda: send.sent == 1, "the notifier's own send")
        assert send.dropped == 0
        # A late word from that caller drops nothing of the next send.
        notifier.carried()
        interval.end()
        notifier.job_available()
        await eventually(lambda: send.waiting.is_set(), "the next send")
        await let_everything_run()
        assert send.dropped == 0
        send.answer()
        await eventually(lambda: send.sent == 2, "the next send went out")
    finally:
        await notifier.aclose(flush=False)


async def test_aclose_sends_a_wake_up_still_owed_then_ignores_further_calls() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = await started(send, interval)
    notifier.job_available()
    await eventually(lambda: len(interval.requested) == 1, "the first interval began")
    notifier.job_available()

    await notifier.aclose()

    assert send.sent == 2
    notifier.job_available()
    await let_everything_run()
    assert send.sent == 2


async def test_aclose_with_nothing_owed_sends_nothing() -> None:
    send, interval = RecordingSend(), ManualInterval()
    notifier = await started(send, interval)
    notifier.job_available()
    await eventually(lambda: len(interval.requested) == 1, "the first interval began")

    await notifier.aclose()

    assert send.sent == 1


async def test_a_send_cut_short_by_aclose_is_sent_again_by_it() -> None:
    attempts: list[str] = []
    first_began = asyncio.Event()

    async def slow_then_quick() -> None:
        attempts.append("begun")
        if len(attempts) == 1:
            first_began.set()
            await asyncio.Event().wait()

    notifier = Notifier(slow_then_quick, interval=INTERVAL, sleep=ManualInterval())
    notifier.start()
    notifier.job_available()
    await asyncio.wait_for(first_began.wait(), 20)

    await notifier.aclose()

    assert attempts == ["begun", "begun"]


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval must be positive"):
        Notifier(RecordingSend(), interval=timedelta(0))


async def test_a_notifier_starts_once() -> None:
    notifier = Notifier(RecordingSend(), interval=INTERVAL, sleep=ManualInterval())
    async with notifier:
        with pytest.raises(RuntimeError):
            notifier.start()
