"""jobqueue: a PostgreSQL-backed asynchronous job service.

The public API: what handler authors and in-process producers write code with.
Everything else in the package (`jobqueue.domain`, `jobqueue.adapters`,
`jobqueue.entrypoints`) is internal and may change between releases.

`import jobqueue` loads only the pure domain. `enqueue`, `enqueue_many`, `wait`
(SQLAlchemy) and `current_traceparent` (OpenTelemetry) load their modules the first time
they are used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobqueue.domain.backoff import Backoff
from jobqueue.domain.dependencies import (
    Dependency,
    DependencyCycle,
    DependencyEnded,
    DependencyError,
    Step,
    UnknownDependency,
)
from jobqueue.domain.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidPayload,
    InvalidTransition,
    JobNotFound,
    JobQueueError,
    LeaseLost,
    NotEnded,
    Permanent,
    StoreError,
    StoreUnavailable,
    Transient,
    UniqueKeyHeld,
    UnknownJobType,
)
from jobqueue.domain.fields import DEFAULT_MAX_ATTEMPTS
from jobqueue.domain.job import Job, NewJob
from jobqueue.domain.outcome import Snooze
from jobqueue.domain.ports import Submitted
from jobqueue.domain.progress import Progress
from jobqueue.domain.registry import JobContext, Registry, StopReason
from jobqueue.domain.status import Status
from jobqueue.domain.unique import Unique

if TYPE_CHECKING:
    from jobqueue.adapters.telemetry.trace_context import current_traceparent
    from jobqueue.entrypoints.producer import enqueue, enqueue_graph, enqueue_many, wait

# Public names whose modules are heavy: (module, attribute), imported on first access.
_ON_DEMAND = {
    "enqueue": ("jobqueue.entrypoints.producer", "enqueue"),
    "enqueue_many": ("jobqueue.entrypoints.producer", "enqueue_many"),
    "enqueue_graph": ("jobqueue.entrypoints.producer", "enqueue_graph"),
    "wait": ("jobqueue.entrypoints.producer", "wait"),
    "current_traceparent": ("jobqueue.adapters.telemetry.trace_context", "current_traceparent"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _ON_DEMAND[name]
    except KeyError:
        raise AttributeError(f"module 'jobqueue' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "Backoff",
    "Dependency",
    "DependencyCycle",
    "DependencyEnded",
    "DependencyError",
    "IdempotencyConflict",
    "InvalidJob",
    "InvalidPayload",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobQueueError",
    "LeaseLost",
    "NewJob",
    "NotEnded",
    "Permanent",
    "Progress",
    "Registry",
    "Snooze",
    "Status",
    "Step",
    "StopReason",
    "StoreError",
    "StoreUnavailable",
    "Submitted",
    "Transient",
    "Unique",
    "UniqueKeyHeld",
    "UnknownDependency",
    "UnknownJobType",
    "current_traceparent",
    "enqueue",
    "enqueue_graph",
    "enqueue_many",
    "wait",
]
