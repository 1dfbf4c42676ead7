"""The `/periodic` resource: the periodic jobs this process knows, with their next slot and
the last one that ran."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from litestar import Controller, get
from litestar.di import NamedDependency

from jobqueue.domain.periodic import PeriodicJob, Schedule, next_slots
from jobqueue.domain.ports import PeriodicSlots
from jobqueue.domain.type_options import OptionsSource
from jobqueue.wire.records import PeriodicList, PeriodicView


class Schedules:
    """The periodic jobs this process knows, each with its schedule, where their last
    slots are kept, and whose options their jobs get (the registry's, as the scheduler
    resolves them): a class of its own so that the route's dependency is passed through,
    not inspected."""

    def __init__(
        self,
        entries: Sequence[tuple[PeriodicJob, Schedule]],
        slots: PeriodicSlots,
        options: OptionsSource,
    ) -> None:
        self.entries = list(entries)
        self.slots = slots
        self.options = options


class PeriodicController(Controller):
    path = "/periodic"
    tags = ("periodic",)

    @get(
        "/",
        summary="List periodic jobs, when each runs next and when it last ran",
        response_description="The periodic jobs of the handlers this process loaded, by name",
        description="Declared with @registry.periodic (or Registry.schedule) in the handler "
        "modules; every worker process schedules them, and each slot runs at most once.",
    )
    async def list_periodic(self, periodic: NamedDependency[Schedules]) -> PeriodicList:
        now = datetime.fromtimestamp(time.time(), UTC)
        ran = await periodic.slots.last_slots() if periodic.entries else {}
        last = {name: each.slot for name, each in ran.items()}
        return PeriodicList(
            [
                PeriodicView(
                    job.name,
                    job.job_type,
                    job.cron,
                    job.timezone,
                    slot,
                    job.catch_up,
                    last.get(job.name),
                )
                for job, slot in next_slots(periodic.entries, now)
            ]
        )
