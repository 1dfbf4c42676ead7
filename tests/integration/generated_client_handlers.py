"""Job types only a worker imports, for the generated-client test (`--handlers
tests.integration.generated_client_handlers`): payloads of the shapes a client generator
has to take from the published schemas (nested and listed Structs, a literal, an
optional field, a tagged union, two types' Structs of one name, a type with no payload
type)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from jobqueue import JobContext, Registry

MODULE = "tests.integration.generated_client_handlers"

registry = Registry()


class Address(msgspec.Struct, forbid_unknown_fields=True):
    city: str
    postcode: Annotated[str, msgspec.Meta(pattern=r"^[0-9]{5}$")]


class Line(msgspec.Struct, forbid_unknown_fields=True):
    sku: str
    quantity: Annotated[int, msgspec.Meta(ge=1)]


class Parcel(msgspec.Struct, forbid_unknown_fields=True):
    ship_to: Address
    lines: list[Line]
    carrier: Literal["post", "courier"] = "post"
    note: str | None = None


class Payload(msgspec.Struct, forbid_unknown_fields=True):
    order: int
    amount: Annotated[float, msgspec.Meta(gt=0)]


class Audit:
    """A namespace only: its `Payload` shares the name of the refund's."""

    class Opened(msgspec.Struct, tag="opened", forbid_unknown_fields=True):
        by: str

    class Closed(msgspec.Struct, tag="closed", forbid_unknown_fields=True):
        reason: str

    class Payload(msgspec.Struct, forbid_unknown_fields=True):
        event: Audit.Opened | Audit.Closed


@registry.handler("shipment", payload=Parcel, queue="generated")
async def ship(ctx: JobContext, payload: Parcel) -> None:
    """Ship one parcel."""


@registry.handler("refund", payload=Payload, queue="generated")
async def refund(ctx: JobContext, payload: Payload) -> None:
    """Refund one order."""


@registry.handler("audit/event", payload=Audit.Payload, queue="generated")
async def audit(ctx: JobContext, payload: Audit.Payload) -> None:
    """Record one audit event."""


@registry.handler("note", queue="generated")
async def note(ctx: JobContext, payload: Any) -> None:
    """Takes any JSON."""
