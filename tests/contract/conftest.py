"""The `store` fixture: every contract test runs once per `JobStore` implementation.

The PostgreSQL fixtures come from `tests/conftest.py`, shared with the integration
suite (a migrated copy of the template per module, `jobs` truncated before each test).
"""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.store import PostgresJobStore
from jobqueue.domain.ports import JobStore
from tests.fakes import InMemoryJobStore, wall_clock


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> JobStore:
    if request.param == "memory":
        # The wall clock, not the manual one: the contract waits for leases and delays
        # to run out, as it must with a database.
        return InMemoryJobStore(wall_clock)
    # Looked up only here, so the memory runs never start a PostgreSQL server.
    connected: AsyncEngine = request.getfixturevalue("engine")
    return PostgresJobStore(connected)
