"""Fixtures of the plan tests: each module defines `big_table`, its own seeded database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine


@pytest.fixture
async def plan_engine(big_table: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(big_table, pool_size=1)
    yield engine
    await engine.dispose()
