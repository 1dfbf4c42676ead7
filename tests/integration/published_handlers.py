"""A job type only worker processes import, for the published-types process test
(`--handlers tests.integration.published_handlers`): an API started without this module
learns the type, its payload schema and its options from what the worker published."""

from __future__ import annotations

from typing import Annotated

import msgspec

from jobqueue import JobContext, Registry, Unique

MODULE = "tests.integration.published_handlers"

registry = Registry()


class Address(msgspec.Struct, forbid_unknown_fields=True):
    city: str
    postcode: Annotated[str, msgspec.Meta(pattern=r"^[0-9]{5}$")]


class Invoice(msgspec.Struct, forbid_unknown_fields=True):
    customer: int
    amount: Annotated[float, msgspec.Meta(gt=0)]
    # A nested Struct: its schema is a `$defs` entry, which the OpenAPI document keeps.
    ship_to: Address


@registry.handler(
    "invoice",
    payload=Invoice,
    queue="billing",
    priority=3,
    max_attempts=7,
    unique=Unique(by=("customer",)),
)
async def send_invoice(ctx: JobContext, payload: Invoice) -> None:
    """Send one customer's invoice.

    Only the first paragraph is the type's description.
    """
