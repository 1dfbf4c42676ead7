"""jobqueue: a PostgreSQL-backed asynchronous job service.

What handler authors and in-process clients write code with. Everything else is
internal and may change. (Kept to the pure domain so `import jobqueue` stays cheap.)
"""

from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    JobNotFound,
    JobQueueError,
    Permanent,
    UnknownJobType,
)
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.status import Status

__all__ = [
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidPayload",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobQueueError",
    "NewJob",
    "Permanent",
    "Registry",
    "Status",
    "UnknownJobType",
]
