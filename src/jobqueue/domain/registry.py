"""Handlers by job type: what users write, and how the worker finds it."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from jobqueue.domain.errors import UnknownJobType


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a handler knows about the attempt it runs in."""

    job_id: UUID
    job_type: str
    attempt: int
    max_attempts: int
    deadline: datetime
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]


Handler = Callable[[JobContext, Any], Awaitable[None] | None]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    name: str
    func: Handler
    # When set, payloads are converted into this type before the handler sees them, and a
    # payload that does not fit is refused at submission (400), not discovered at run time.
    payload_type: type[Any] | None
    is_async: bool


class Registry:
    """`@registry.handler("type")` on a function `(ctx, payload)`; async or plain.

    A registry is a collection of job type names, so it can be passed where
    `NewJob.build` asks which types are registered.
    """

    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}

    def handler(self, name: str, *, payload: type[Any] | None = None) -> Callable[[H], H]:
        if not name or not name.strip():
            raise ValueError("a handler needs a non-empty job type name")

        def register(func: H) -> H:
            if name in self._specs:
                raise ValueError(f"job type {name!r} already has a handler")
            self._specs[name] = HandlerSpec(
                name=name,
                func=func,
                payload_type=payload,
                is_async=_is_async(func),
            )
            return func

        return register

    def include(self, other: Registry) -> None:
        """Add every handler of `other` (e.g. a user's module next to the examples)."""
        for spec in other.specs():
            if spec.name in self._specs:
                raise ValueError(f"job type {spec.name!r} already has a handler")
            self._specs[spec.name] = spec

    def get(self, name: str) -> HandlerSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownJobType(name, list(self._specs)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def specs(self) -> list[HandlerSpec]:
        return [self._specs[name] for name in sorted(self._specs)]


def _is_async(func: Handler) -> bool:
    # A callable object with `async def __call__` is a coroutine function to the worker
    # too; run in a thread it would only create a coroutine that is never awaited.
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
