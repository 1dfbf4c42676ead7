"""Each status's traits: consistent with the transition table and with the schema's indexes.

The traits are what pruning, the queue depth, metrics and listing read; these tests hold
them to the lifecycle and to the indexes that have to serve them.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Index

from jobqueue.adapters.postgres.schema import jobs
from jobqueue.domain.outcome import Decision
from jobqueue.domain.status import (
    BY_QUEUE,
    COUNTED,
    FAILURES,
    PRUNABLE,
    TRAITS,
    Phase,
    Status,
)
from jobqueue.domain.transitions import TRANSITIONS, Operation, targets

INDEXES: dict[str, Index] = {str(index.name): index for index in jobs.indexes}


def test_every_status_has_traits() -> None:
    assert set(TRAITS) == set(Status)


@pytest.mark.parametrize("status", list(Status))
def test_a_status_is_live_exactly_when_the_workers_lead_out_of_it(status: Status) -> None:
    # Only an operator's retry (of the job, or of its workflow) leads out of a finished or
    # held job: nothing a worker does writes such a row again, so its updated_at is when
    # it ended.
    by_workers = any(
        transition.source is status
        and transition.operation not in (Operation.RETRY, Operation.RETRY_WORKFLOW)
        for transition in TRANSITIONS
    )
    assert (TRAITS[status].phase is Phase.LIVE) is by_workers


def test_only_finished_jobs_are_pruned_and_only_others_counted() -> None:
    assert PRUNABLE == (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
    assert COUNTED == (Status.WAITING, Status.PENDING, Status.PROCESSING, Status.DEAD_LETTER)
    assert not set(PRUNABLE) & set(COUNTED)
    assert Status.COMPLETED not in BY_QUEUE


def test_the_failures_are_where_failed_attempts_end_a_job() -> None:
    # Each logs the WARNING to alert on; a cancel, an operator's doing, is no failure.
    ended_by_failure = {Decision.fail("").status, Decision.dead_letter("").status}
    assert set(FAILURES) == ended_by_failure
    assert set(FAILURES) >= set(targets(Operation.RECOVER, Status.PROCESSING)) - {Status.PENDING}


@pytest.mark.parametrize("status", list(Status))
def test_the_index_a_status_names_holds_its_rows_in_its_order(status: Status) -> None:
    traits = TRAITS[status]
    index = INDEXES.get(traits.index)
    assert index is not None, f"{status}: no index {traits.index} in the schema"
    predicate = str(index.dialect_options["postgresql"]["where"])
    assert f"'{status.value}'" in predicate, predicate
    # The sort column is the index's last column, or last but the id that breaks its ties
    # (as listing does); before it come the order's groups, in order, or the status (and
    # the type, for an index that says it holds them by type). An index of one status
    # does not lead with it: PostgreSQL drops the status from a scan's conditions (the
    # predicate implies it), and the type behind it would have nothing to descend by.
    columns = [column.name for column in index.columns]
    if columns[-1] == "id":
        columns.pop()
    assert columns[-1] == traits.order.column.value
    groups = list(traits.order.groups)
    if groups:
        assert columns[:-1] == groups
    elif traits.typed_index:
        held = [each for each in Status if f"'{each.value}'" in predicate]
        assert columns[:-1] == (["type"] if held == [status] else ["status", "type"])
    else:
        assert set(columns[:-1]) <= {"status"}
