"""The handler registry: what users decorate, and how the worker looks handlers up."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest

from jobqueue.domain.errors import UnknownJobType
from jobqueue.domain.job import NewJob
from jobqueue.domain.registry import JobContext, Registry


@dataclass(frozen=True)
class Email:
    to: str


def test_async_function_is_recorded_as_async() -> None:
    registry = Registry()

    @registry.handler("email")
    async def send(ctx: JobContext, payload: object) -> None:
        return None

    spec = registry.get("email")
    assert spec.is_async
    assert spec.func is send
    assert spec.name == "email"


def test_plain_function_is_recorded_as_sync() -> None:
    registry = Registry()

    @registry.handler("resize")
    def resize(ctx: JobContext, payload: object) -> None:
        return None

    assert not registry.get("resize").is_async


def test_partial_of_an_async_function_is_async() -> None:
    async def send(ctx: JobContext, payload: object, *, retries: int) -> None:
        return None

    registry = Registry()
    registry.handler("email")(functools.partial(send, retries=2))
    assert registry.get("email").is_async


def test_callable_object_with_async_call_is_async() -> None:
    # Run in a thread, it would only create a coroutine that is never awaited.
    class Sender:
        async def __call__(self, ctx: JobContext, payload: object) -> None:
            return None

    class Resizer:
        def __call__(self, ctx: JobContext, payload: object) -> None:
            return None

    registry = Registry()
    registry.handler("email")(Sender())
    registry.handler("resize")(Resizer())
    assert registry.get("email").is_async
    assert not registry.get("resize").is_async


def test_decorator_returns_the_function_unchanged() -> None:
    registry = Registry()

    def resize(ctx: JobContext, payload: object) -> None:
        return None

    assert registry.handler("resize")(resize) is resize


def test_declared_payload_type_is_recorded() -> None:
    registry = Registry()

    @registry.handler("email", payload=Email)
    async def send(ctx: JobContext, payload: Email) -> None:
        return None

    assert registry.get("email").payload_type is Email


def test_payload_type_defaults_to_none() -> None:
    registry = Registry()

    @registry.handler("raw")
    async def raw(ctx: JobContext, payload: object) -> None:
        return None

    assert registry.get("raw").payload_type is None


def test_duplicate_name_is_refused_and_first_handler_kept() -> None:
    registry = Registry()

    @registry.handler("email")
    async def first(ctx: JobContext, payload: object) -> None:
        return None

    async def second(ctx: JobContext, payload: object) -> None:
        return None

    with pytest.raises(ValueError, match="job type 'email' already has a handler"):
        registry.handler("email")(second)
    assert registry.get("email").func is first


@pytest.mark.parametrize("name", ["", "   "])
def test_blank_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="non-empty job type name"):
        Registry().handler(name)


def test_unknown_type_raises_unknown_job_type_listing_known_types() -> None:
    registry = Registry()
    registry.handler("sms")(lambda ctx, payload: None)
    registry.handler("email")(lambda ctx, payload: None)
    with pytest.raises(UnknownJobType) as raised:
        registry.get("fax")
    assert raised.value.job_type == "fax"
    assert str(raised.value) == "unknown job type 'fax' (known types: 'email', 'sms')"
    # The lookup failure is the domain's, not a KeyError leaking out of a dict.
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__


def test_registry_is_a_sorted_collection_of_type_names() -> None:
    registry = Registry()
    for name in ("sms", "email", "resize"):
        registry.handler(name)(lambda ctx, payload: None)
    assert list(registry) == ["email", "resize", "sms"]
    assert len(registry) == 3
    assert "email" in registry
    assert "fax" not in registry
    assert 42 not in registry
    assert [spec.name for spec in registry.specs()] == ["email", "resize", "sms"]


def test_include_merges_the_other_registry() -> None:
    examples, user = Registry(), Registry()

    @examples.handler("sleep")
    async def sleep(ctx: JobContext, payload: object) -> None:
        return None

    @user.handler("email", payload=Email)
    def send(ctx: JobContext, payload: Email) -> None:
        return None

    examples.include(user)
    assert list(examples) == ["email", "sleep"]
    assert examples.get("email") == user.get("email")
    assert list(user) == ["email"]


def test_include_refuses_a_duplicate_and_keeps_the_existing_handler() -> None:
    examples, user = Registry(), Registry()

    @examples.handler("email")
    async def builtin(ctx: JobContext, payload: object) -> None:
        return None

    @user.handler("email")
    async def custom(ctx: JobContext, payload: object) -> None:
        return None

    with pytest.raises(ValueError, match="job type 'email' already has a handler"):
        examples.include(user)
    assert examples.get("email").func is builtin


def test_new_job_build_checks_the_type_against_a_registry() -> None:
    registry = Registry()
    registry.handler("email")(lambda ctx, payload: None)
    job = NewJob.build(type="email", default_max_attempts=3, registered=registry)
    assert job.type == "email"
    with pytest.raises(UnknownJobType, match="known types: 'email'"):
        NewJob.build(type="fax", default_max_attempts=3, registered=registry)


def test_registries_do_not_share_handlers() -> None:
    # No module-level registry: each composition root builds its own.
    first, second = Registry(), Registry()
    first.handler("email")(lambda ctx, payload: None)
    assert "email" not in second
