"""Waiting for a job's end across processes: a client waits on `jobqueue api` while a
separate `jobqueue worker` runs the job. The API rechecks a wait only every POLL_INTERVAL
(30s): a wait answered within seconds was woken by the database's notification of the
end (a functional bound, not a speed measurement). The result and the last progress
report arrive with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobqueue import NotEnded
from jobqueue.client import Client
from tests.integration.result_handlers import MODULE
from tests.support.processes import Service, free_port, start

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("engine"),
    pytest.mark.direct_database(
        "LISTEN holds a session, which PgBouncer's transaction mode cannot keep"
    ),
]

POLL_INTERVAL = "30s"
# Far below POLL_INTERVAL, far above a notification's real latency on a busy machine.
WOKEN_WITHIN = 12.0
STARTUP_DEADLINE = 90.0


@pytest.fixture
def api(database_url: str, tmp_path: Path) -> Iterator[Service]:
    settings = {
        "DATABASE_URL": database_url,
        "POLL_INTERVAL": POLL_INTERVAL,
        "JOBQUEUE_HANDLERS": MODULE,
    }
    api = start(["api"], free_port(), tmp_path, **settings)
    worker = start(["worker"], free_port(), tmp_path, **settings)
    try:
        api.wait_until_healthy(within=STARTUP_DEADLINE)
        yield api
    finally:
        api.stop()
        worker.stop()
    assert api.process.returncode == 0, api.errors()
    assert worker.process.returncode == 0, worker.errors()


def test_a_client_waits_for_the_end_and_reads_the_result(api: Service) -> None:
    with Client(api.base_url) as client:
        # The first job also waits out the worker's start-up.
        first = client.submit("fetch_pages", {"count": 1})
        assert client.wait(first.id, timeout=STARTUP_DEADLINE).status == "completed"
        job = client.submit("fetch_pages", {"count": 3, "seconds": 0.2})

        ended = client.wait(job.id, timeout=WOKEN_WITHIN)

    assert ended.status == "completed"
    assert ended.result == {"pages": ["page-1", "page-2", "page-3"], "attempt": 1}
    assert ended.progress is not None
    assert (ended.progress.done, ended.progress.total, ended.progress.fraction) == (3, 3, 1.0)
    assert ended.progress.message == "fetched page-3"


def test_a_wait_shorter_than_the_job_raises_not_ended(api: Service) -> None:
    with Client(api.base_url) as client:
        job = client.submit("fetch_pages", {"count": 10, "seconds": 0.5})

        with pytest.raises(NotEnded) as raised:
            client.wait(job.id, timeout=0.5)
        # Waiting again is how a client waits longer.
        ended = client.wait(job.id, timeout=STARTUP_DEADLINE)

    assert raised.value.status in ("pending", "processing")
    assert ended.result is not None
    assert ended.result["pages"][-1] == "page-10"
