"""The lifecycle table: every (operation, status) pair is either allowed with the right
targets or refused with InvalidTransition."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from jobqueue.domain.errors import InvalidTransition, JobQueueError
from jobqueue.domain.job import Job, Lease
from jobqueue.domain.status import TRAITS, Phase, Status
from jobqueue.domain.transitions import TRANSITIONS, Operation, sources, targets

# The design's lifecycle diagram, written out independently of the table under test.
EXPECTED: dict[tuple[Operation, Status], frozenset[Status]] = {
    (Operation.CLAIM, Status.PENDING): frozenset({Status.PROCESSING}),
    (Operation.COMPLETE, Status.PROCESSING): frozenset({Status.COMPLETED}),
    (Operation.BACKOFF, Status.PROCESSING): frozenset({Status.PENDING}),
    (Operation.FAIL, Status.PROCESSING): frozenset({Status.FAILED}),
    (Operation.DEAD_LETTER, Status.PROCESSING): frozenset({Status.DEAD_LETTER}),
    (Operation.RELEASE, Status.PROCESSING): frozenset({Status.PENDING}),
    (Operation.RECOVER, Status.PROCESSING): frozenset({Status.PENDING, Status.DEAD_LETTER}),
    (Operation.RETRY, Status.DEAD_LETTER): frozenset({Status.PENDING}),
    (Operation.RETRY, Status.FAILED): frozenset({Status.PENDING}),
    (Operation.RETRY, Status.CANCELLED): frozenset({Status.PENDING}),
    (Operation.SNOOZE, Status.PROCESSING): frozenset({Status.PENDING}),
    (Operation.CANCEL, Status.PENDING): frozenset({Status.CANCELLED}),
    (Operation.CANCEL, Status.PROCESSING): frozenset({Status.CANCELLED}),
    (Operation.RESCHEDULE, Status.PENDING): frozenset({Status.PENDING}),
    (Operation.CANCEL, Status.WAITING): frozenset({Status.CANCELLED}),
    (Operation.DEPENDENCIES_MET, Status.WAITING): frozenset({Status.PENDING}),
    (Operation.DEPENDENCY_FAILED, Status.WAITING): frozenset({Status.CANCELLED}),
    (Operation.RETRY_WORKFLOW, Status.DEAD_LETTER): frozenset({Status.WAITING, Status.PENDING}),
    (Operation.RETRY_WORKFLOW, Status.FAILED): frozenset({Status.WAITING, Status.PENDING}),
    (Operation.RETRY_WORKFLOW, Status.CANCELLED): frozenset({Status.WAITING, Status.PENDING}),
}

ALL_PAIRS = list(itertools.product(Operation, Status))
ALLOWED_PAIRS = [pair for pair in ALL_PAIRS if pair in EXPECTED]
REFUSED_PAIRS = [pair for pair in ALL_PAIRS if pair not in EXPECTED]


def _pair_id(pair: tuple[Operation, Status]) -> str:
    return f"{pair[0]}-from-{pair[1]}"


def test_status_and_operation_values_are_the_stored_strings() -> None:
    assert [s.value for s in Status] == [
        "waiting",
        "pending",
        "processing",
        "completed",
        "failed",
        "dead_letter",
        "cancelled",
    ]
    assert {o.value for o in Operation} == {
        "claim",
        "complete",
        "backoff",
        "fail",
        "dead_letter",
        "release",
        "recover",
        "retry",
        "snooze",
        "cancel",
        "reschedule",
        "dependencies_met",
        "dependency_failed",
        "retry_workflow",
    }


def test_transition_table_is_exactly_the_design_lifecycle() -> None:
    table = {(t.operation, t.source, t.target) for t in TRANSITIONS}
    expected = {(op, src, dst) for (op, src), dsts in EXPECTED.items() for dst in dsts}
    assert table == expected


@pytest.mark.parametrize("pair", ALLOWED_PAIRS, ids=_pair_id)
def test_allowed_operation_leads_to_its_targets(pair: tuple[Operation, Status]) -> None:
    operation, source = pair
    assert targets(operation, source) == EXPECTED[pair]
    assert source in sources(operation)


@pytest.mark.parametrize("pair", REFUSED_PAIRS, ids=_pair_id)
def test_refused_operation_leads_nowhere(pair: tuple[Operation, Status]) -> None:
    operation, source = pair
    assert targets(operation, source) == frozenset()
    assert source not in sources(operation)


@pytest.mark.parametrize("status", [s for s in Status if TRAITS[s].phase is Phase.FINISHED])
def test_a_finished_job_is_left_only_by_an_operator_s_retry(status: Status) -> None:
    # Nothing a worker does writes a finished row again, so its updated_at stays when it
    # ended; only a person may bring one back (alone, or with its workflow).
    leaving = {t.operation for t in TRANSITIONS if t.source is status}
    assert leaving <= {Operation.RETRY, Operation.RETRY_WORKFLOW}
    assert targets(Operation.RETRY, Status.COMPLETED) == frozenset()


def test_only_completed_failed_and_cancelled_are_finished() -> None:
    # dead_letter is held, not finished: an operator's retry brings it back.
    finished = {s for s in Status if TRAITS[s].phase is Phase.FINISHED}
    assert finished == {Status.COMPLETED, Status.FAILED, Status.CANCELLED}


def test_every_status_that_is_not_finished_can_be_left() -> None:
    for status in Status:
        if TRAITS[status].phase is not Phase.FINISHED:
            assert any(t.source is status for t in TRANSITIONS), status


def test_invalid_transition_message_names_operation_job_and_status() -> None:
    job_id = uuid4()
    error = InvalidTransition(job_id, Operation.RETRY, Status.COMPLETED)
    assert (
        str(error) == f"cannot retry job {job_id}: it is completed; "
        "only failed, dead-lettered and cancelled jobs can be retried"
    )
    assert (error.job_id, error.operation, error.status) == (job_id, "retry", "completed")
    assert isinstance(error, JobQueueError)


def _job(status: Status, *, attempts: int = 1, max_attempts: int = 3) -> Job:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    return Job(
        id=uuid4(),
        type="email",
        payload={},
        status=status,
        attempts=attempts,
        max_attempts=max_attempts,
        run_at=now,
        locked_until=None,
        lease_token=7,
        last_error=None,
        idempotency_key=None,
        created_at=now,
        updated_at=now,
    )


def test_job_is_immutable() -> None:
    job = _job(Status.PENDING)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.status = Status.COMPLETED  # type: ignore[misc]


def test_job_lease_carries_id_and_token() -> None:
    job = _job(Status.PROCESSING)
    assert job.lease == Lease(job.id, 7)


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "last"),
    [(1, 3, False), (2, 3, False), (3, 3, True), (4, 3, True), (1, 1, True)],
)
def test_job_is_last_attempt_once_attempts_reach_the_maximum(
    attempts: int, max_attempts: int, last: bool
) -> None:
    job = _job(Status.PROCESSING, attempts=attempts, max_attempts=max_attempts)
    assert job.is_last_attempt is last
