"""Job types as the service knows them without their code: what a worker publishes about
each type it runs, so that an API process that does not import the handlers can still
refuse a job no worker would take and fill in the type's defaults.

A worker publishes its types at start (`JobType`, one per handler: its payload's JSON
Schema, its options, what its docstring says). The last worker to start wins: during a
rolling deploy an API may check against either version's schema. A type stays known
after its workers stop: submissions queue up for it meanwhile, as they should.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from jobqueue.domain.errors import UnknownJobType
from jobqueue.domain.fields import JsonValue
from jobqueue.domain.type_options import NO_OPTIONS, TypeOptions

if TYPE_CHECKING:
    from jobqueue.domain.ports import PayloadDecoder
    from jobqueue.domain.registry import Registry

# A JSON Schema document, as JSON.
JsonSchema = Mapping[str, JsonValue]


@dataclass(frozen=True, slots=True)
class JobType:
    """One job type as its worker declares it."""

    name: str
    # The JSON Schema a payload must satisfy; None: any JSON value (no payload type).
    payload_schema: JsonSchema | None
    options: TypeOptions = NO_OPTIONS
    # The first paragraph of the handler's docstring, shown in the OpenAPI document.
    description: str | None = None


@dataclass(frozen=True, slots=True)
class PublishedType:
    """A type some worker published: when, and which worker."""

    type: JobType
    published_at: datetime
    published_by: str


class PayloadCheck(Protocol):
    """Refuses a payload its schema does not allow (`InvalidPayload`)."""

    def __call__(self, payload: JsonValue) -> None: ...


class SchemaCompiler(Protocol):
    """Makes the check of one type's payload schema (`adapters.payload_schemas`)."""

    def compile(self, job_type: str, schema: JsonSchema) -> PayloadCheck: ...


@dataclass(frozen=True, slots=True)
class KnownType:
    """A type an API accepts, and where it learned of it."""

    type: JobType
    # Its own registry's handler (checked by the payload type) or a worker's publication
    # (checked by the JSON Schema).
    local: bool
    published: PublishedType | None = None


class KnownTypes:
    """The types a process accepts: its own registry's first (checked exactly as its
    workers would check them), then those workers published, checked by their JSON
    Schemas. A Collection of type names, with each type's options, so it is what
    `NewJob.build` takes as `registered`."""

    def __init__(
        self,
        registry: Registry,
        described: Sequence[JobType],
        published: Sequence[PublishedType] = (),
        compiler: SchemaCompiler | None = None,
    ) -> None:
        self._registry = registry
        publications = {each.type.name: each for each in published}
        local = {
            each.name: KnownType(each, local=True, published=publications.get(each.name))
            for each in described
        }
        remote = {
            name: KnownType(each.type, local=False, published=each)
            for name, each in publications.items()
            if name not in local
        }
        self._known = {**remote, **local}
        schemas = {
            name: known.type.payload_schema
            for name, known in remote.items()
            if known.type.payload_schema is not None
        }
        if schemas and compiler is None:
            raise ValueError("published payload schemas need a compiler to check them")
        self._checks = {
            name: compiler.compile(name, schema)
            for name, schema in schemas.items()
            if compiler is not None
        }

    def check(self, job_type: str, payload: JsonValue, decoder: PayloadDecoder) -> None:
        """Refuse a job no worker would take: an unknown type (`UnknownJobType`), or a
        payload its type does not allow (`InvalidPayload`)."""
        known = self._known.get(job_type)
        if known is None:
            raise UnknownJobType(job_type, list(self))
        if known.local:
            self._registry.check(job_type, payload, decoder)
            return
        checked = self._checks.get(job_type)
        if checked is not None:
            checked(payload)

    def options_for(self, name: str) -> TypeOptions:
        known = self._known.get(name)
        return known.type.options if known is not None else NO_OPTIONS

    def described(self) -> list[KnownType]:
        return [self._known[name] for name in sorted(self._known)]

    def __contains__(self, name: object) -> bool:
        return name in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._known))

    def __len__(self) -> int:
        return len(self._known)
