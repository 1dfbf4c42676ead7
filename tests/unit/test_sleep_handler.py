from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import msgspec
import pytest

from jobqueue.adapters.handlers.sleep import SleepPayload, handle_sleep
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.domain.errors import InvalidPayload, Permanent, is_permanent
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.registry import JobContext


def context() -> JobContext:
    return JobContext(
        job_id=uuid4(),
        job_type="sleep",
        attempt=1,
        max_attempts=3,
        deadline=datetime.now(UTC) + timedelta(minutes=5),
        logger=logging.getLogger("test.sleep"),
    )


def decode(payload: JsonValue) -> SleepPayload:
    decoded: SleepPayload = MsgspecPayloadDecoder().decode("sleep", payload, SleepPayload)
    return decoded


@pytest.mark.parametrize("duration", ["250ms", "2s", "1m30s", "1h", "0"])
def test_accepts_go_style_durations(duration: str) -> None:
    assert decode({"duration": duration}) == SleepPayload(duration=duration)


async def test_returns_after_sleeping_a_tiny_duration() -> None:
    await asyncio.wait_for(handle_sleep(context(), decode({"duration": "5ms"})), timeout=30)


async def test_keeps_sleeping_until_cancelled_and_cancellation_propagates() -> None:
    task = asyncio.create_task(handle_sleep(context(), decode({"duration": "1h"})))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done()

    task.cancel()
    # Generous bound: "promptly" means on the next loop turn, not after the hour.
    done, _ = await asyncio.wait({task}, timeout=30)

    assert done == {task}
    assert task.cancelled()


@pytest.mark.parametrize(
    ("duration", "reason"),
    [
        ("soon", "invalid duration 'soon'"),
        ("10", "invalid duration '10'"),
        ("-1s", "invalid duration '-1s'"),
        ("", "empty duration"),
    ],
)
def test_refuses_an_invalid_duration_when_decoding(duration: str, reason: str) -> None:
    with pytest.raises(InvalidPayload) as raised:
        decode({"duration": duration})

    assert reason in raised.value.reason


def test_refuses_a_duration_that_is_not_a_string_when_decoding() -> None:
    with pytest.raises(InvalidPayload) as raised:
        decode({"duration": 5})

    assert raised.value.reason == "Expected `str`, got `int` - at `$.duration`"


async def test_an_invalid_duration_that_bypassed_validation_fails_permanently() -> None:
    payload = SleepPayload(duration="1s")
    # Simulates a payload built without validation (e.g. by an older deployment).
    msgspec.structs.force_setattr(payload, "duration", "soon")

    with pytest.raises(Permanent) as raised:
        await handle_sleep(context(), payload)

    assert "invalid duration 'soon'" in str(raised.value)
    assert is_permanent(raised.value)
