"""The graphs the dependency scenarios submit (`graphs.py`), and the hops of a chain: pure,
so that their shapes and arithmetic are tested without a database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise

from jobqueue.domain.dependencies import Step
from jobqueue.domain.job import NewJob


def chain(jobs: int, new: NewJob) -> list[Step]:
    """`jobs` steps of `new`, each after the one before it (by place)."""
    return [Step(new, after=(place - 1,) if place else ()) for place in range(jobs)]


def fan(layers: int, width: int, waits_for: int, new: NewJob) -> list[Step]:
    """`layers` layers of `width` steps of `new`, layer after layer, then one step after
    the whole last layer. Each step of a layer but the first is after `waits_for` steps
    of the layer before: the one at its own place and those following it, wrapping round
    (`waits_for == width`: all of them). Every step is then an ancestor of the last."""
    if not 1 <= waits_for <= width:
        raise ValueError(
            f"a step waits for 1 to {width} steps of the layer before, not {waits_for}"
        )
    steps = [Step(new) for _ in range(width)]
    for layer in range(1, layers):
        before = (layer - 1) * width
        for place in range(width):
            after = sorted(before + (place + each) % width for each in range(waits_for))
            steps.append(Step(new, after=tuple(after)))
    last = (layers - 1) * width
    steps.append(Step(new, after=tuple(range(last, last + width))))
    return steps


def edges(steps: Sequence[Step]) -> int:
    """The dependencies the steps wait for, added up: the rows the graph's insert writes
    into `job_dependencies`, and its endings read."""
    return sum(len(step.after) for step in steps)


def hops(chained: Sequence[tuple[datetime, datetime]]) -> list[float]:
    """A chain's jobs in its order, each as `(started_at, finished_at)`: the seconds from
    each one's end to the start of the one after it."""
    return [
        (started - finished).total_seconds() for (_, finished), (started, _) in pairwise(chained)
    ]


def too_early(steps: Sequence[Step], times: Sequence[tuple[datetime, datetime]]) -> list[int]:
    """The places of `steps` whose job started before a job it waits for (by place) had
    ended, each job given as `(started_at, finished_at)` in the same order: none, unless
    a dependent was released too soon."""
    return [
        place
        for place, (step, (started, _)) in enumerate(zip(steps, times, strict=True))
        if any(isinstance(each, int) and started < times[each][1] for each in step.after)
    ]
