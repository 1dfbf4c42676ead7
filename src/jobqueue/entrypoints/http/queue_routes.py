"""The `/queues` resource: what waits in each queue, pausing and resuming one, and its
limits."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, delete, get, post, put
from litestar.di import NamedDependency
from litestar.exceptions import ClientException
from litestar.params import PathParameter
from litestar.status_codes import HTTP_200_OK

from jobqueue.domain.fields import MAX_QUEUE_LENGTH, QUEUE_NAME, check_queue_name
from jobqueue.domain.flow import NO_LIMITS
from jobqueue.entrypoints.http.bodies import LimitsOperation, parse_limits
from jobqueue.entrypoints.http.parameters import STORE_DOWN, error_spec
from jobqueue.entrypoints.http.service import QueueService
from jobqueue.wire.queue_records import QueueList, QueueRecord, QueueStateView

QueueNameParameter = Annotated[
    str,
    PathParameter(
        description="The queue's name.",
        schema_extra={"pattern": f"^{QUEUE_NAME.pattern}$", "maxLength": MAX_QUEUE_LENGTH},
    ),
]
_INVALID_NAME = error_spec("The name is not a valid queue name")


def parse_queue_name(raw: str) -> str:
    try:
        return check_queue_name(raw)
    except ValueError as error:
        raise ClientException(detail=str(error)) from None


class QueuesController(Controller):
    path = "/queues"
    tags = ("queues",)

    @get(
        "/",
        summary="List queues: paused or not, and the live and held jobs in each",
        response_description="Every queue with live or held jobs, or ever paused, by name",
        description="Counts pending (due now and scheduled), processing and dead-lettered "
        "jobs per queue, each from its status's index; finished jobs are history and are "
        "not counted.",
        responses={503: STORE_DOWN},
    )
    async def list_queues(self, queues: NamedDependency[QueueService]) -> QueueList:
        return QueueList([QueueRecord.of(summary) for summary in await queues.summaries()])

    @post(
        "/{name:str}/pause",
        status_code=HTTP_200_OK,
        summary="Pause a queue: no process claims from it until it is resumed",
        response_description="The queue, paused",
        description="Durable: holds across restarts. Claims stop as it commits; running "
        "jobs finish, and jobs claimed ahead are given back. Workers hear of it at once, "
        "and within a second at worst. Pausing a paused queue keeps it as it is.",
        responses={400: _INVALID_NAME, 503: STORE_DOWN},
    )
    async def pause_queue(
        self, name: QueueNameParameter, queues: NamedDependency[QueueService]
    ) -> QueueStateView:
        return QueueStateView.of(await queues.pause(parse_queue_name(name)))

    @post(
        "/{name:str}/resume",
        status_code=HTTP_200_OK,
        summary="Resume a paused queue",
        response_description="The queue, running",
        description="Workers claim from it again at once (within a second at worst). "
        "Resuming a running queue changes nothing.",
        responses={400: _INVALID_NAME, 503: STORE_DOWN},
    )
    async def resume_queue(
        self, name: QueueNameParameter, queues: NamedDependency[QueueService]
    ) -> QueueStateView:
        return QueueStateView.of(await queues.resume(parse_queue_name(name)))

    @put(
        "/{name:str}/limits",
        status_code=HTTP_200_OK,
        summary="Set a queue's limits: concurrency and rate, per queue, per key or per type",
        response_description="The queue, with its limits and their use now",
        description="Replaces every limit the queue had (absent or null: none). Obeyed by "
        "every claim from the moment this answers, in every process; jobs held back stay "
        "pending, their attempts untouched. Held until an operator changes them, whatever "
        "QUEUE_LIMITS says.",
        operation_class=LimitsOperation,
        responses={400: error_spec("A bad name, or limits out of range"), 503: STORE_DOWN},
    )
    async def set_limits(
        self,
        name: QueueNameParameter,
        request: Request[Any, Any, Any],
        queues: NamedDependency[QueueService],
    ) -> QueueStateView:
        queue = parse_queue_name(name)
        return QueueStateView.of(await queues.set_limits(queue, parse_limits(await request.body())))

    @delete(
        "/{name:str}/limits",
        status_code=HTTP_200_OK,
        summary="Lift a queue's limits",
        response_description="The queue, without limits",
        description="As PUT with {}. Limits in QUEUE_LIMITS apply again from the next start "
        "of a process that declares them.",
        responses={400: _INVALID_NAME, 503: STORE_DOWN},
    )
    async def lift_limits(
        self, name: QueueNameParameter, queues: NamedDependency[QueueService]
    ) -> QueueStateView:
        return QueueStateView.of(await queues.set_limits(parse_queue_name(name), NO_LIMITS))
