"""The pool's settings refuse values it cannot work with, and warn about risky ones."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.config import Settings
from tests.fakes import InMemoryJobStore
from tests.unit.pool_harness import DEADLINE_SECONDS, config, make_pool


@pytest.mark.parametrize(
    "changes",
    [
        {"workers": 0},
        {"job_timeout": timedelta(0)},
        {"lease_duration": timedelta(seconds=-1)},
        {"poll_interval": timedelta(0)},
        {"outcome_timeout": timedelta(0)},
        {"shutdown_timeout": timedelta(seconds=-1)},
    ],
)
def test_nonsense_settings_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"must|cannot"):
        config(**changes)


def test_defaults_leave_the_lease_longer_than_an_attempt_and_its_write() -> None:
    defaults = Settings().pool_config()
    assert defaults.lease_duration > defaults.job_timeout + defaults.outcome_timeout


async def test_lease_shorter_than_an_attempt_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jobqueue.worker")
    risky = config(job_timeout=timedelta(minutes=2), lease_duration=timedelta(minutes=1))
    pool = make_pool(InMemoryJobStore(), Registry(), risky)

    pool.stop()
    await asyncio.wait_for(pool.run(), DEADLINE_SECONDS)

    assert any("can lose its lease" in r.getMessage() for r in caplog.records)
