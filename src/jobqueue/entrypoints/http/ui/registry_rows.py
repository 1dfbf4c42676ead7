"""What the workers, periodic and job-type pages show, as plain values: each live
process, schedule and type as the rows and cards the templates lay out.

Built here rather than in the templates so that which clock an age is read on, when a
process's types fold away, and where a slot's job links to are plain code a unit test
reads. Moments read as on a job's page (`job_page.moment`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobqueue.domain.job_types import KnownType
from jobqueue.domain.periodic import LastSlot, PeriodicJob
from jobqueue.domain.processes import LiveProcess
from jobqueue.domain.type_options import OptionsSource
from jobqueue.entrypoints.http.ui.job_page import Moment, moment
from jobqueue.entrypoints.http.ui.job_routes import job_href
from jobqueue.entrypoints.http.ui.overview import age
from jobqueue.wire.records import JobTypeView

# A process running more types than this shows how many, and lists them on request.
TYPES_SHOWN = 4
# A payload schema longer than this many lines starts folded.
SCHEMA_LINES_SHOWN = 30


@dataclass(frozen=True, slots=True)
class WorkerRow:
    # The process's id: a stable key for the page (its folded types stay open across
    # refreshes).
    key: str
    host: str
    pid: int
    version: str
    # Each queue with how many of its attempts run at once (None: a process of an earlier
    # version, which says only its total).
    queues: tuple[tuple[str, int | None], ...]
    types: tuple[str, ...]
    # Many types: folded away behind their number.
    folded: bool
    concurrency: int
    running: int
    started: Moment | None
    # How long ago it last beat, on the store's clock.
    heartbeat_age: str


def worker_rows(processes: Sequence[LiveProcess]) -> list[WorkerRow]:
    """The live processes, in the registry's order (host, then pid)."""
    return [
        WorkerRow(
            key=str(process.info.id),
            host=process.info.host,
            pid=process.info.pid,
            version=process.info.version,
            queues=process.info.concurrency_of(),
            types=process.info.types,
            folded=len(process.info.types) > TYPES_SHOWN,
            concurrency=process.info.concurrency,
            running=process.info.running,
            started=moment(process.started_at),
            heartbeat_age=age(process.read_at - process.heartbeat_at),
        )
        for process in processes
    ]


@dataclass(frozen=True, slots=True)
class PeriodicRow:
    name: str
    job_type: str
    cron: str
    timezone: str
    # Where its jobs go: its type's queue, as the scheduler resolves it.
    queue: str
    catch_up: bool
    next_slot: Moment | None
    # How long until the next slot.
    next_in: str
    last_slot: Moment | None
    # The last slot's job page, while that job exists.
    last_job_href: str | None


def periodic_rows(
    next_slots: Sequence[tuple[PeriodicJob, datetime]],
    last: Mapping[str, LastSlot],
    options: OptionsSource,
    now: datetime,
) -> list[PeriodicRow]:
    """Each schedule with its next slot after `now` and its last slot, by name."""
    rows = []
    for periodic, slot in sorted(next_slots, key=lambda each: each[0].name):
        ran = last.get(periodic.name)
        rows.append(
            PeriodicRow(
                name=periodic.name,
                job_type=periodic.job_type,
                cron=periodic.cron,
                timezone=periodic.timezone,
                queue=options.options_for(periodic.job_type).queue,
                catch_up=periodic.catch_up,
                next_slot=moment(slot),
                next_in=age(slot - now),
                last_slot=None if ran is None else moment(ran.slot),
                last_job_href=None if ran is None or ran.job_id is None else job_href(ran.job_id),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class RanRow:
    """A schedule some worker ran that this process does not load (an API without the
    workers' code), known by its last slot alone."""

    name: str
    last_slot: Moment | None
    last_job_href: str | None


def ran_elsewhere(last: Mapping[str, LastSlot], declared: Collection[str]) -> list[RanRow]:
    return [
        RanRow(name, moment(ran.slot), None if ran.job_id is None else job_href(ran.job_id))
        for name, ran in sorted(last.items())
        if name not in declared
    ]


@dataclass(frozen=True, slots=True)
class TypeCard:
    """A job type as the API describes it (`GET /types`), and its payload's JSON Schema
    laid out to be read."""

    view: JobTypeView
    # None: the type takes any JSON value.
    schema: str | None
    # A long schema: folded until asked for.
    schema_folded: bool
    published_at: Moment | None


def type_cards(known: Sequence[KnownType]) -> list[TypeCard]:
    cards = []
    for each in known:
        view = JobTypeView.of(each)
        schema = (
            None
            if view.payload_schema is None
            else json.dumps(view.payload_schema, indent=2, ensure_ascii=False)
        )
        cards.append(
            TypeCard(
                view=view,
                schema=schema,
                schema_folded=schema is not None and schema.count("\n") >= SCHEMA_LINES_SHOWN,
                published_at=moment(view.published_at),
            )
        )
    return cards
