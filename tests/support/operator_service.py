"""A `jobqueue serve` that requires a token (`serving_with_token`, and as a module's
fixture: `service`), with the Python client (`client`) and the `jobqueue` command (`_cli`)
pointed at it, and the options of a job that stays pending for a test's length
(`_later`). Modules that need the service with handlers of their own, or another number
of workers, build their `service` fixture from `serving_with_token`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TypedDict

import pytest

from jobqueue.client import Client
from tests.support.processes import Service, run, serving

TOKEN = "operator-token"


@contextmanager
def serving_with_token(
    database_url: str, folder: Path, *, handlers: str | None = None, workers: int = 2
) -> Iterator[Service]:
    """`jobqueue serve` on the default queue, requiring `TOKEN`, with the handlers of the
    module `handlers` (none: the service's own) and `workers` workers."""
    command = ["serve"] if handlers is None else ["serve", "--handlers", handlers]
    with serving(
        command,
        folder,
        DATABASE_URL=database_url,
        API_TOKENS=TOKEN,
        WORKERS=str(workers),
        POLL_INTERVAL="200ms",
        QUEUES="default",
    ) as running:
        yield running


@pytest.fixture(scope="module")
def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving_with_token(database_url, tmp_path_factory.mktemp("client")) as running:
        yield running


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    with Client(service.base_url, token=TOKEN) as client:
        yield client


class _Later(TypedDict):
    queue: str
    delay: timedelta


def _later(queue: str) -> _Later:
    """Options of a job that stays pending for the test's length: due in an hour, in a
    queue no worker of this service consumes."""
    return {"queue": queue, "delay": timedelta(hours=1)}


def _cli(service: Service, *args: str, token: str = TOKEN) -> tuple[int, str, str]:
    done = run(list(args), JOBQUEUE_URL=service.base_url, JOBQUEUE_TOKEN=token)
    return done.returncode, done.stdout, done.stderr
