"""The `/periodic` resource: the periodic jobs this process knows, with their next slot."""

from __future__ import annotations

from collections.abc import Sequence

from litestar import Controller, get
from litestar.di import NamedDependency

from jobqueue.domain.periodic import PeriodicJob, Schedule
from jobqueue.entrypoints.http.dto import PeriodicList, PeriodicView
from jobqueue.entrypoints.worker.cron import next_slots


class Schedules:
    """The periodic jobs this process knows, each with its schedule: a class of its own
    so that the route's dependency is passed through, not inspected."""

    def __init__(self, entries: Sequence[tuple[PeriodicJob, Schedule]]) -> None:
        self.entries = list(entries)


class PeriodicController(Controller):
    path = "/periodic"
    tags = ("periodic",)

    @get(
        "/",
        summary="List periodic jobs and when each runs next",
        response_description="The periodic jobs of the handlers this process loaded, by name",
        description="Declared with @registry.periodic (or Registry.schedule) in the handler "
        "modules; every worker process schedules them, one job per slot.",
    )
    async def list_periodic(self, periodic: NamedDependency[Schedules]) -> PeriodicList:
        return PeriodicList(
            [
                PeriodicView(job.name, job.job_type, job.cron, job.timezone, slot, job.catch_up)
                for job, slot in next_slots(periodic.entries)
            ]
        )
