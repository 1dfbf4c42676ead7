"""Jobs that wait for other jobs: a graph as submitted, checked and placed.

A job may depend on jobs already stored (by id) and on jobs of the same submission (by
the name it gives them: `Step`). `link` turns a submission's steps into jobs that depend
on ids, refusing a name no step has, a step named twice and a cycle, before anything is
stored. `place` then decides each job's starting status from its dependencies' statuses,
read by the store under their locks: waiting for as many as are live, or pending when
none is. A dependency that ended without completing refuses its dependent, unless it
runs anyway: such a job would never run.

Once stored, the database releases dependents (migrations 0024 to 0026): the statement
that ends a job (whoever writes it: a worker, recovery, a cancel, a delete) makes each
waiting dependent pending when it was the last one it waited for, or cancels it when the
job did not complete and the dependent does not run anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from uuid import UUID

from jobqueue.domain.errors import InvalidJob, JobQueueError
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.job import NewJob
from jobqueue.domain.status import LIVE, Status

# Dependencies of one job, at most: a fan-in of a thousand jobs is one row of a thousand
# ids, read whole by its handler's context.
MAX_DEPENDENCIES = 1_000
MAX_NAME_LENGTH = 200
# Jobs of one workflow shown or acted on, at most: ten batches of the largest size.
MAX_WORKFLOW_JOBS = 10_000


class DependencyError(InvalidJob):
    """A graph that cannot be stored as given: nothing of it was."""


class UnknownDependency(DependencyError):
    def __init__(self, reference: str) -> None:
        super().__init__(
            f"depends_on names {reference!r}, which is neither a job of this submission "
            "nor a stored job's id"
        )


class DependencyCycle(DependencyError):
    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        super().__init__(
            "depends_on makes a cycle, so none of these jobs could ever start: "
            + " -> ".join(names)
        )


class DependencyEnded(DependencyError):
    """A dependency that will never complete: its dependent would never run."""

    def __init__(self, job_id: UUID, status: Status) -> None:
        self.job_id = job_id
        self.status = status
        super().__init__(
            f"job {job_id} it depends on is {status}: it will not complete, so this job "
            "would never run (retry that job first, or submit with run_anyway)"
        )


class WorkflowNotFound(JobQueueError):
    def __init__(self, workflow_id: UUID) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"no workflow {workflow_id}: no job of it is stored")


@dataclass(frozen=True, slots=True)
class Dependency:
    """A job its dependent waited for, as the dependent's handler reads it
    (`JobContext.dependencies`): a callback's may have ended in any way."""

    id: UUID
    type: str
    status: Status
    # What its handler returned (completed), and why it did not complete (the others).
    result: JsonValue | None = None
    error: str | None = None

    @property
    def completed(self) -> bool:
        return self.status is Status.COMPLETED


def check_dependencies(depends_on: Sequence[object]) -> None:
    if len(depends_on) > MAX_DEPENDENCIES:
        raise InvalidJob(
            f"depends_on has {len(depends_on)} jobs; at most {MAX_DEPENDENCIES} are allowed"
        )


def check_keyless(new: NewJob) -> None:
    """A graph's job has no Idempotency-Key and no unique key: a key's conflict answers
    with another job, and the graph's edges would then name a job other than theirs."""
    if new.idempotency_key is not None:
        raise DependencyError("a job with dependencies, or depended on, takes no Idempotency-Key")
    if new.unique_key is not None:
        raise DependencyError(
            f"a job with dependencies, or depended on, cannot be unique ({new.type}'s jobs are)"
        )


@dataclass(frozen=True, slots=True)
class Step:
    """A job of a submitted graph: `new`, the `name` other steps know it by, and what it
    waits for, `after`: names of other steps, or their places in the submission, or ids
    of stored jobs (`new.depends_on` holds ids only)."""

    new: NewJob
    name: str | None = None
    after: tuple[str | int, ...] = ()


@dataclass(frozen=True, slots=True)
class Linked:
    """A graph's jobs with their ids, each depending on ids only; `stored` are the ids of
    the jobs it depends on that were stored before it, to be read under their locks."""

    ids: tuple[UUID, ...]
    news: tuple[NewJob, ...]
    stored: tuple[UUID, ...]


@dataclass(frozen=True, slots=True)
class Placed:
    """A graph's job as it is stored: its status, the dependencies it waits for (the
    graph's own, and the stored ones still live), and whether a job waits for it."""

    id: UUID
    new: NewJob
    status: Status
    waits_for: tuple[UUID, ...]
    has_dependents: bool

    @property
    def waiting_for(self) -> int:
        return len(self.waits_for)


def link(steps: Sequence[Step], ids: Sequence[UUID]) -> Linked:
    """`steps` with ids `ids` (in order), each depending on ids: names resolved, checked."""
    by_name: dict[str, int] = {}
    for index, step in enumerate(steps):
        if step.name is None:
            continue
        if step.name in by_name:
            raise DependencyError(f"two jobs of this submission are named {step.name!r}")
        by_name[step.name] = index
    edges: list[tuple[int, ...]] = []
    stored: dict[UUID, None] = {}
    news = []
    for step in steps:
        inside: list[int] = []
        outside: list[UUID] = list(step.new.depends_on or ())
        for reference in step.after:
            if isinstance(reference, int):
                if not 0 <= reference < len(steps):
                    raise UnknownDependency(f"jobs[{reference}]")
                inside.append(reference)
            elif reference in by_name:
                inside.append(by_name[reference])
            else:
                outside.append(_stored_id(reference))
        edges.append(tuple(dict.fromkeys(inside)))
        stored.update(dict.fromkeys(outside))
        depends_on = (*(ids[i] for i in edges[-1]), *dict.fromkeys(outside))
        check_dependencies(depends_on)
        news.append(replace(step.new, depends_on=tuple(dict.fromkeys(depends_on)) or None))
    _refuse_cycles(steps, edges)
    return Linked(tuple(ids), tuple(news), tuple(stored))


def place(linked: Linked, statuses: Mapping[UUID, Status]) -> list[Placed]:
    """Each job of `linked` as stored, given the statuses of the stored jobs it depends on
    (read under their locks, so none can end before the graph's commit unseen). Raises
    `UnknownDependency` for an id with no job, `DependencyEnded` for one that ended
    without completing, unless the job runs anyway."""
    own = set(linked.ids)
    depended = {each for new in linked.news for each in new.depends_on or () if each in own}
    placed = []
    for job_id, new in zip(linked.ids, linked.news, strict=True):
        waiting: list[UUID] = []
        for dependency in new.depends_on or ():
            status = Status.PENDING if dependency in own else statuses.get(dependency)
            if status is None:
                raise UnknownDependency(str(dependency))
            if status in LIVE:
                waiting.append(dependency)
            elif status is not Status.COMPLETED and not new.run_anyway:
                raise DependencyEnded(dependency, status)
        placed.append(
            Placed(
                job_id,
                new,
                Status.WAITING if waiting else Status.PENDING,
                tuple(waiting),
                job_id in depended,
            )
        )
    return placed


@dataclass(frozen=True, slots=True)
class Wait:
    """Jobs of a graph that wait for the same dependencies still to be met: the store
    counts each of those endings once for them all (a fan-in's layer, waiting for the
    whole layer before, shares one count) rather than once per job."""

    jobs: tuple[UUID, ...]
    dependencies: tuple[UUID, ...]

    @property
    def shared(self) -> bool:
        return len(self.jobs) > 1


def waits_of(placed: Sequence[Placed]) -> list[Wait]:
    """The waiting jobs of `placed`, grouped by their dependencies, each group with those
    still to be met (`Placed.waits_for`)."""
    groups: dict[frozenset[UUID], tuple[tuple[UUID, ...], list[UUID]]] = {}
    for each in placed:
        # By all they depend on, not the live ones only: a workflow's retry makes its
        # jobs wait for an ended one again, and must find only those that depend on it.
        if each.waits_for:
            key = frozenset(each.new.depends_on or ())
            groups.setdefault(key, (each.waits_for, []))[1].append(each.id)
    return [Wait(tuple(jobs), live) for live, jobs in groups.values()]


def _stored_id(reference: str) -> UUID:
    try:
        return UUID(reference)
    except ValueError:
        raise UnknownDependency(reference) from None


def _refuse_cycles(steps: Sequence[Step], edges: Sequence[tuple[int, ...]]) -> None:
    """Raise `DependencyCycle` naming one cycle, if the steps' own edges make any: a depth-
    first walk, iterative, so that a chain of thousands does not exhaust the stack."""
    state = [0] * len(steps)  # 0: unseen, 1: on the walk's path, 2: done
    for root in range(len(steps)):
        if state[root]:
            continue
        path = [(root, iter(edges[root]))]
        state[root] = 1
        while path:
            node, following = path[-1]
            step = next(following, None)
            if step is None:
                state[node] = 2
                path.pop()
            elif state[step] == 1:
                cycle = [each for each, _ in path]
                cycle = [*cycle[cycle.index(step) :], step]
                raise DependencyCycle([_label(steps, i) for i in cycle])
            elif state[step] == 0:
                state[step] = 1
                path.append((step, iter(edges[step])))


def _label(steps: Sequence[Step], index: int) -> str:
    name = steps[index].name
    return name if name is not None else f"jobs[{index}]"
