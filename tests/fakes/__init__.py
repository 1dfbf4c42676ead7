"""In-memory implementations of the ports, for unit tests.

`InMemoryJobStore` behaves like the PostgreSQL store (docs/design.md, `domain/ports.py`):
each operation is one compare-and-swap checked against the domain's transition table,
outcome writes are fenced by the lease token, and times come from an injectable clock
so that tests can move time instead of waiting for it.

One module each: the clocks (`clocks`), the store (`store`, made of its state in
`store_state` and of its operations in the `store_*` modules beside it, with the rows it
hands out in `rows` and what it refuses in `refusals`), the payload decoder (`decoder`),
the pool observer (`observer`) and the job types (`job_types`). Tests import them from
here.
"""

from tests.fakes.clocks import Clock, ManualClock, wall_clock
from tests.fakes.decoder import DataclassDecoder
from tests.fakes.job_types import TEST_TYPES, InMemoryJobTypes
from tests.fakes.observer import RecordingObserver
from tests.fakes.store import InMemoryJobStore

__all__ = [
    "TEST_TYPES",
    "Clock",
    "DataclassDecoder",
    "InMemoryJobStore",
    "InMemoryJobTypes",
    "ManualClock",
    "RecordingObserver",
    "wall_clock",
]
