"""The `/workers` resource: the worker processes alive now, as their heartbeats describe
them (`domain/processes.py`)."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency

from jobqueue.domain.ports import ProcessRegistry
from jobqueue.entrypoints.http.parameters import STORE_DOWN
from jobqueue.wire.records import WorkerList, WorkerView


class Workers:
    """Where the live processes are read: a class of its own so that the route's
    dependency is passed through, not inspected (Litestar cannot check a Protocol)."""

    def __init__(self, registry: ProcessRegistry) -> None:
        self.registry = registry


class WorkersController(Controller):
    path = "/workers"
    tags = ("workers",)

    @get(
        "/",
        summary="List the worker processes alive now",
        response_description="Every live worker process, by host and pid",
        description="Each worker process (`serve` or `worker`) writes a heartbeat every "
        "third of its LEASE_DURATION; one that stopped cleanly leaves at once, one that "
        "was killed disappears a lease after its last heartbeat.",
        responses={503: STORE_DOWN},
    )
    async def list_workers(self, workers: NamedDependency[Workers]) -> WorkerList:
        return WorkerList([WorkerView.of(each) for each in await workers.registry.live()])
