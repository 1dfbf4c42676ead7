"""The clients' actions on one job (run now, reschedule, delete) against a real `jobqueue
serve`: a scheduled job run now is run by its workers at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.client import AsyncClient, Client, Conflict, NotFound
from tests.support.processes import Service, serving

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving(
        ["serve"],
        tmp_path_factory.mktemp("actions"),
        DATABASE_URL=database_url,
        WORKERS="2",
        QUEUES="actions",
    ) as running:
        yield running


def test_a_job_scheduled_for_tomorrow_runs_now_when_asked(service: Service) -> None:
    with Client(service.base_url) as client:
        job = client.submit("sleep", {"duration": "1ms"}, queue="actions", delay="24h")
        moved = client.reschedule(job.id, delay=timedelta(hours=48))
        assert moved.run_at > job.run_at

        client.run_now(job.id)

        deadline = time.monotonic() + 30
        while (status := client.status(job.id)).status != "completed":
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
        with pytest.raises(Conflict, match="only pending jobs"):
            client.run_now(job.id)
        assert client.delete(job.id).status == "completed"
        with pytest.raises(NotFound):
            client.job(job.id)


def test_the_async_client_reschedules_and_deletes(service: Service) -> None:
    async def scenario() -> None:
        async with AsyncClient(service.base_url) as client:
            job = await client.submit("sleep", {"duration": "1ms"}, queue="idle", delay="1h")
            instant = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
            moved = await client.reschedule(job.id, run_at=instant)
            assert (moved.run_at, moved.status) == (instant, "pending")
            assert (await client.run_now(job.id)).run_at < instant
            deleted = await client.delete(job.id)
            assert deleted.id == job.id
            with pytest.raises(NotFound):
                await client.delete(job.id)

    asyncio.run(scenario())
