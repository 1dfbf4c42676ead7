"""Reads of the in-memory store: one job, a page of a listing, a job by its key, a ping."""

from __future__ import annotations

from uuid import UUID

from jobqueue.domain.job import Job
from jobqueue.domain.listing import JobPage, JobQuery, KeyKind, KeyLookup, page_of
from tests.fakes.listing import FakeListing
from tests.fakes.rows import _detached, _listed
from tests.fakes.store_state import StoreState


class Reads(StoreState):
    """Reads, each a copy of what the store holds."""

    async def get(self, job_id: UUID) -> Job:
        await self._enter()
        return _detached(self._existing(job_id))

    async def list_jobs(self, query: JobQuery) -> JobPage:
        await self._enter()
        listing = FakeListing(query)
        of_status = [job for job in self._jobs.values() if job.status is query.status]
        in_range = listing.range_of(of_status)
        if query.search is None:
            return page_of(query, [_listed(job) for job in in_range[: query.limit + 1]])
        read, stop = listing.searched(in_range, {job.type for job in of_status})
        matching = [_listed(job) for job in read if query.search.matches(job)]
        return page_of(query, matching[: query.limit + 1], stop, len(read))

    async def find_by_key(self, lookup: KeyLookup) -> Job | None:
        await self._enter()
        if lookup.kind is KeyKind.UNIQUE:
            found = self._unique_holder(lookup.key)
        else:
            held = self._by_key.get(lookup.key)
            found = None if held is None else self._jobs.get(held)
        return None if found is None else _detached(found)

    async def ping(self) -> None:
        await self._enter()
