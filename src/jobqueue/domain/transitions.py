"""The transitions between a job's statuses, written once as data, and the operations
that cause them. The store enforces them (every transition is one guarded statement); a
test runs every store operation against a job in every status and checks that the store
accepts exactly these."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jobqueue.domain.status import Status


class Operation(StrEnum):
    """What causes a transition; each one is a single guarded store statement.

    The attempt's endings (complete .. release) are written by `JobStore.record_many`; the
    others are store methods of the same name.
    """

    CLAIM = "claim"
    COMPLETE = "complete"
    # A retryable failure: back to pending, due again after a backoff delay.
    BACKOFF = "backoff"
    FAIL = "fail"
    DEAD_LETTER = "dead_letter"
    RELEASE = "release"
    RECOVER = "recover"
    # A handler's "not yet" (`Snooze`): back to pending later, the attempt given back.
    SNOOZE = "snooze"
    # An operator's request: a job that ended without success back to pending with a
    # fresh budget.
    RETRY = "retry"
    # An operator's request: a job that has not finished stops for good, running or not.
    CANCEL = "cancel"
    # An operator's request: a pending job due at another time (now, for "run now").
    RESCHEDULE = "reschedule"
    # The ending of a waiting job's last dependency (`dependencies.py`), written by that
    # ending's own statement: every one completed, or it runs anyway.
    DEPENDENCIES_MET = "dependencies_met"
    # The ending of a dependency that did not complete (failed, dead-lettered, cancelled,
    # deleted): its waiting dependents are cancelled, unless they run anyway.
    DEPENDENCY_FAILED = "dependency_failed"
    # An operator's retry of a workflow's failed steps: each back to waiting for those of
    # its dependencies that are live again, or pending.
    RETRY_WORKFLOW = "retry_workflow"


@dataclass(frozen=True, slots=True)
class Transition:
    operation: Operation
    source: Status
    target: Status


TRANSITIONS: frozenset[Transition] = frozenset(
    {
        Transition(Operation.CLAIM, Status.PENDING, Status.PROCESSING),
        Transition(Operation.COMPLETE, Status.PROCESSING, Status.COMPLETED),
        Transition(Operation.BACKOFF, Status.PROCESSING, Status.PENDING),
        Transition(Operation.FAIL, Status.PROCESSING, Status.FAILED),
        Transition(Operation.DEAD_LETTER, Status.PROCESSING, Status.DEAD_LETTER),
        # Shutdown gives the attempt back; the job simply waits for the next claim.
        Transition(Operation.RELEASE, Status.PROCESSING, Status.PENDING),
        Transition(Operation.SNOOZE, Status.PROCESSING, Status.PENDING),
        # A lease that ran out means the attempt was lost with its process: it counts.
        Transition(Operation.RECOVER, Status.PROCESSING, Status.PENDING),
        Transition(Operation.RECOVER, Status.PROCESSING, Status.DEAD_LETTER),
        # An operator's retry, of a job that ended without success.
        Transition(Operation.RETRY, Status.DEAD_LETTER, Status.PENDING),
        Transition(Operation.RETRY, Status.FAILED, Status.PENDING),
        Transition(Operation.RETRY, Status.CANCELLED, Status.PENDING),
        # A running job's attempt is stopped by the same write: its lease ends with it,
        # so nothing the handler does later can be written over the cancellation.
        Transition(Operation.CANCEL, Status.PENDING, Status.CANCELLED),
        Transition(Operation.CANCEL, Status.WAITING, Status.CANCELLED),
        Transition(Operation.CANCEL, Status.PROCESSING, Status.CANCELLED),
        # Only a job waiting for its claim: a running one's `run_at` means nothing more.
        Transition(Operation.RESCHEDULE, Status.PENDING, Status.PENDING),
        Transition(Operation.DEPENDENCIES_MET, Status.WAITING, Status.PENDING),
        Transition(Operation.DEPENDENCY_FAILED, Status.WAITING, Status.CANCELLED),
        *(
            Transition(Operation.RETRY_WORKFLOW, source, target)
            for source in (Status.DEAD_LETTER, Status.FAILED, Status.CANCELLED)
            for target in (Status.WAITING, Status.PENDING)
        ),
    }
)

# What an operator may delete. Deleting is no transition (the row goes), so it is not in
# the table: any job but a running one, whose worker holds a lease and would run on
# unseen. Cancel it first.
DELETABLE: frozenset[Status] = frozenset(Status) - {Status.PROCESSING}
DELETE = "delete"


def sources(operation: Operation) -> frozenset[Status]:
    """The statuses from which `operation` may start."""
    return frozenset(t.source for t in TRANSITIONS if t.operation is operation)


def targets(operation: Operation, source: Status) -> frozenset[Status]:
    """The statuses `operation` may lead to from `source` (empty when refused)."""
    return frozenset(
        t.target for t in TRANSITIONS if t.operation is operation and t.source is source
    )
