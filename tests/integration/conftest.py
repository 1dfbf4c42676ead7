"""Fixtures shared by integration modules: the plan tests' engine on their seeded database
(each plan module defines `big_table`), and the fault tests' fleet of processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from jobqueue.adapters.postgres.database import create_engine
from tests.support.fault_fleet import Fleet


@pytest.fixture
async def plan_engine(big_table: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(big_table, pool_size=1)
    yield engine
    await engine.dispose()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """The `jobqueue` processes a fault test starts; every one still running is killed
    at the end, whatever the test's outcome."""
    processes = Fleet(tmp_path / "logs", tmp_path / "executions.txt")
    try:
        yield processes
    finally:
        processes.close()
