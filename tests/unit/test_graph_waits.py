"""How a graph's waiting jobs are grouped onto counts (`dependencies.waits_of`): jobs that
depend on exactly the same jobs share one, whatever order they name them in; a job that
depends on something more, even a job that already completed, waits apart; jobs that
wait for nothing have none."""

from __future__ import annotations

import uuid

from jobqueue.domain.dependencies import Step, link, place, waits_of
from jobqueue.domain.job import NewJob
from jobqueue.domain.status import Status


def _new(kind: str = "step") -> NewJob:
    return NewJob.build(type=kind, max_attempts=1)


def test_jobs_depending_on_the_same_jobs_share_a_wait_in_any_order() -> None:
    done, live = uuid.uuid4(), uuid.uuid4()
    steps = [
        Step(_new(), name="a"),
        Step(_new(), name="b"),
        Step(_new(), after=("a", "b")),
        Step(_new(), after=("b", "a")),
        Step(_new(), after=("a",)),
        Step(_new(), after=("a", "b", str(done))),
        Step(_new(), after=("a", str(live))),
        Step(_new(), after=("a", str(live))),
    ]
    ids = [uuid.uuid4() for _ in steps]
    statuses = {done: Status.COMPLETED, live: Status.PROCESSING}
    placed = place(link(steps, ids), statuses)
    a, b, ab, ba, only_a, with_done, with_live, with_live_too = ids

    waits = {wait.jobs: wait.dependencies for wait in waits_of(placed)}

    assert waits == {
        (ab, ba): (a, b),
        (only_a,): (a,),
        # The completed job is no edge, but a set of dependencies apart.
        (with_done,): (a, b),
        (with_live, with_live_too): (a, live),
    }
    # Each job's count starts at as many dependencies as its wait has.
    counts = {each.id: each.waiting_for for each in placed}
    for jobs, dependencies in waits.items():
        assert {counts[job] for job in jobs} == {len(dependencies)}
    assert counts[a] == counts[b] == 0
