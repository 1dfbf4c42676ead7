"""Links between the pages of jobs and workflows: a job's to its workflow and to the jobs
it depends on, a workflow's rows to theirs.

A job may depend on a thousand jobs (`dependencies.MAX_DEPENDENCIES`): a page shows the
first few of its links and says how many more there are, never a thousand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from jobqueue.entrypoints.http.ui.frame import UI_PATH

JOB_PAGES: Final = f"{UI_PATH}/jobs"
WORKFLOW_PAGES: Final = f"{UI_PATH}/workflows"
# How many characters of an id a link shows (its title holds the whole): its last ones.
# The ids of a graph's jobs (and of its workflow) are time-ordered and made together, one
# counting up from the other (`postgres/ids.py`): their first characters are the same.
SHORT_ID: Final = 8


@dataclass(frozen=True, slots=True)
class Link:
    href: str
    text: str
    # What a pointer's hover shows: the whole id, and what else the text leaves out.
    title: str


@dataclass(frozen=True, slots=True)
class Links:
    """The first links of a list, and how many more it has that are not shown."""

    shown: tuple[Link, ...]
    more: int = 0


def job_page(job_id: UUID) -> str:
    return f"{JOB_PAGES}/{job_id}"


def workflow_page(workflow_id: UUID) -> str:
    return f"{WORKFLOW_PAGES}/{workflow_id}"


def short(an_id: UUID) -> str:
    """`an_id` as a link shows it: "…b14a8807493f"."""
    return "…" + str(an_id)[-SHORT_ID:]


def workflow_link(workflow_id: UUID) -> Link:
    return Link(workflow_page(workflow_id), short(workflow_id), str(workflow_id))


def job_link(job_id: UUID) -> Link:
    """A job by its short id."""
    return Link(job_page(job_id), short(job_id), str(job_id))


def links_to(ids: Sequence[UUID], most: int, link: Callable[[UUID], Link] = job_link) -> Links:
    """Links to the first `most` of `ids`, each made by `link`; the rest counted only."""
    return Links(tuple(link(each) for each in ids[:most]), max(0, len(ids) - most))
