"""`InMemoryJobStore`: the in-memory `JobStore`, made of its parts, one module each."""

from __future__ import annotations

from tests.fakes.store_claims import ClaimsAndEndings
from tests.fakes.store_queues import Queues
from tests.fakes.store_reads import Reads
from tests.fakes.store_submissions import Submissions
from tests.fakes.store_workflows import Workflows


class InMemoryJobStore(Submissions, ClaimsAndEndings, Workflows, Queues, Reads):
    """`JobStore` over a dict. Set `available = False` to make every call fail as an
    unreachable database does."""
