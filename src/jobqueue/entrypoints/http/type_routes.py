"""The `/types` resource: the job types this API accepts, with their payload schemas."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency

from jobqueue.entrypoints.http.parameters import STORE_DOWN
from jobqueue.entrypoints.service.published_types import TypeCatalogue
from jobqueue.wire.records import JobTypeList, JobTypeView


class TypesController(Controller):
    path = "/types"
    tags = ("types",)

    @get(
        "/",
        summary="List the job types a submission may name",
        response_description="Every job type this API accepts, by name",
        description="This process's own handlers (the built-in examples, --handlers), and "
        "the types worker processes published at start, each with the JSON Schema its "
        "payload must satisfy and the defaults a submission that leaves them out gets. "
        "Read from the database first unless read within the last second.",
        responses={503: STORE_DOWN},
    )
    async def list_types(self, types: NamedDependency[TypeCatalogue]) -> JobTypeList:
        known = await types.fresh()
        return JobTypeList([JobTypeView.of(each) for each in known.described()])
