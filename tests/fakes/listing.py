"""How the fake store reads a listing, as PostgreSQL does (`queries/listing.py`): the
query's index range in reading order, and a search's budget, shared between types as the
merged statement shares it."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from jobqueue.domain.job import Job
from jobqueue.domain.listing import JobQuery, position_of
from jobqueue.domain.status import TRAITS


class FakeListing:
    def __init__(self, query: JobQuery) -> None:
        self.query = query
        # A page backward reads its index the other way.
        self.descending = query.order.descending != (query.before is not None)

    def in_reading_order(self, jobs: Sequence[Job]) -> list[Job]:
        # PostgreSQL's uuid order is its bytes', which is the order of UUID.int.
        return sorted(jobs, key=lambda job: position_of(job).ordered, reverse=self.descending)

    def range_of(self, of_status: Sequence[Job]) -> list[Job]:
        """The jobs of the query's index range (all it asks but its search), in reading
        order, from its position on."""
        query = self.query
        ordered = self.in_reading_order([job for job in of_status if query.in_range(job)])
        position = query.after if query.after is not None else query.before
        if position is None:
            return ordered
        if self.descending:
            return [job for job in ordered if position_of(job).ordered < position.ordered]
        return [job for job in ordered if position_of(job).ordered > position.ordered]

    def searched(self, in_range: list[Job], types: Collection[str]) -> tuple[list[Job], Job | None]:
        """The jobs a search reads of `in_range` within its budget, and the last it read
        when the budget ran out. Every type of a status indexed by type: each type's range
        for an equal share of the budget, counted as read only as far as every type's was
        read in full."""
        query = self.query
        assert query.search is not None
        budget = query.search.budget
        if not (TRAITS[query.status].typed_index and query.type is None):
            read = in_range[:budget]
            return read, read[-1] if len(read) >= budget else None
        share = max(budget // max(len(types), 1), 1)
        per_type = [[job for job in in_range if job.type == each][:share] for each in sorted(types)]
        ends = [rows[-1] for rows in per_type if len(rows) >= share]
        if not ends:
            return self.in_reading_order([job for rows in per_type for job in rows]), None
        cut = self.in_reading_order(ends)[0]
        read = self.in_reading_order(
            [job for rows in per_type for job in rows if not self._beyond(job, cut)]
        )
        return read, cut

    def _beyond(self, job: Job, cut: Job) -> bool:
        mine, theirs = position_of(job).ordered, position_of(cut).ordered
        return mine < theirs if self.descending else mine > theirs
