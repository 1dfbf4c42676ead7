"""Partition keys: given with a submission, or made of the payload fields a type's
handler names; a submission's own key wins; a bad one is refused saying why."""

from __future__ import annotations

import pytest

from jobqueue.domain.errors import InvalidJob
from jobqueue.domain.job import NewJob, resolve
from jobqueue.domain.partition import partition_key_of
from jobqueue.domain.registry import JobContext, Registry
from jobqueue.domain.type_options import TypeOptions


def _registry() -> Registry:
    registry = Registry()

    @registry.handler("report", partition_by=("tenant",))
    def report(ctx: JobContext, payload: object) -> None: ...

    @registry.handler("sync", partition_by=("tenant", "region"))
    def sync(ctx: JobContext, payload: object) -> None: ...

    @registry.handler("plain")
    def plain(ctx: JobContext, payload: object) -> None: ...

    return registry


def test_a_key_is_made_of_the_fields_the_type_names() -> None:
    registry = _registry()
    report = NewJob.build(type="report", payload={"tenant": "acme", "n": 1}, registered=registry)
    assert report.partition_key == "acme"
    sync = NewJob.build(type="sync", payload={"region": "eu", "tenant": 7}, registered=registry)
    assert sync.partition_key == '[7,"eu"]'
    assert NewJob.build(type="plain", registered=registry).partition_key is None


def test_a_submission_s_own_key_wins_over_the_type_s() -> None:
    registry = _registry()
    given = NewJob.build(
        type="report", payload={"tenant": "acme"}, partition_key="vip", registered=registry
    )
    assert given.partition_key == "vip"


def test_a_key_is_made_when_a_submission_is_resolved_later() -> None:
    new = NewJob.build(type="report", payload={"tenant": "acme"})
    assert new.partition_key is None
    resolved = resolve(new, TypeOptions(partition_by=("tenant",)), 5)
    assert resolved.partition_key == "acme"


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"other": 1}, "the payload has no field tenant"),
        ([1, 2], "the payload is not an object"),
        ({"tenant": ""}, "must be 1 to 255 characters"),
        ({"tenant": "x" * 256}, "must be 1 to 255 characters"),
    ],
)
def test_a_key_that_cannot_be_made_is_refused(payload: object, says: str) -> None:
    with pytest.raises(InvalidJob, match=says):
        partition_key_of(payload, ("tenant",))


@pytest.mark.parametrize("key", ["", "x" * 256, 5])
def test_a_bad_given_key_is_refused(key: object) -> None:
    with pytest.raises(InvalidJob, match="partition_key must be a string of 1 to 255"):
        NewJob.build(type="plain", partition_key=key)  # type: ignore[arg-type]


def test_a_type_must_name_at_least_one_field() -> None:
    with pytest.raises(ValueError, match="partition_by must name one or more payload fields"):
        Registry().handler("x", partition_by=())
