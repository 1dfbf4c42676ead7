"""The built-in registry's webhook: its payload types, and private destinations refused
unless WEBHOOK_ALLOW_PRIVATE allows them."""

from __future__ import annotations

from typing import cast

import pytest

from jobqueue.adapters.handlers import builtin_registry
from jobqueue.adapters.handlers.sleep import SleepPayload
from jobqueue.adapters.handlers.ssrf import DestinationRefused
from jobqueue.adapters.handlers.webhook import WebhookPayload
from jobqueue.adapters.handlers.webhook_payload import PublicWebhookPayload, WebhookHandler
from jobqueue.adapters.payloads import MsgspecPayloadDecoder
from jobqueue.domain.errors import InvalidPayload
from jobqueue.domain.registry import Registry
from tests.support.webhook_calls import deliver
from tests.support.webhook_endpoints import Receiver, receiver

# Fixtures of tests.support.webhook_endpoints, used by name.
__all__ = ["receiver"]


def test_builtin_registry_holds_sleep_and_webhook_with_their_payload_types() -> None:
    registry = builtin_registry()

    assert list(registry) == ["sleep", "webhook"]
    assert registry.get("sleep").payload_type is SleepPayload
    # Unless private destinations are allowed, one named literally is refused at once.
    assert registry.get("webhook").payload_type is PublicWebhookPayload
    assert issubclass(PublicWebhookPayload, WebhookPayload)
    assert registry.get("webhook").is_async


async def test_builtin_webhook_refuses_private_destinations_by_default(
    receiver: Receiver,
) -> None:
    handle = registry_webhook(builtin_registry())

    with pytest.raises(DestinationRefused):
        await deliver(handle, receiver.url("/hook"))

    assert receiver.received() == []


async def test_builtin_webhook_reaches_private_destinations_when_allowed(
    receiver: Receiver,
) -> None:
    handle = registry_webhook(builtin_registry(webhook_allow_private=True))

    await deliver(handle, receiver.url("/hook"))

    assert len(receiver.received()) == 1


def registry_webhook(registry: Registry) -> WebhookHandler:
    return cast(WebhookHandler, registry.get("webhook").func)


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://127.0.0.1:9000/hook", "url's host 127.0.0.1 is a loopback address"),
        ("https://192.168.1.20/", "url's host 192.168.1.20 is a private address"),
        ("http://[fe80::1]/", "url's host fe80::1 is a link-local address"),
        ("http://[::ffff:10.1.2.3]/", "url's host ::ffff:10.1.2.3 is a private address"),
        ("https://93.184.215.14/hook", None),
        # A name is judged by the worker when it resolves it, not at submission.
        ("http://localhost:9000/", None),
    ],
)
def test_a_literal_private_address_is_refused_at_submission_unless_allowed(
    url: str, refused: str | None
) -> None:
    decoder = MsgspecPayloadDecoder()
    public = builtin_registry().get("webhook").payload_type
    allowed = builtin_registry(webhook_allow_private=True).get("webhook").payload_type
    assert public is not None
    assert allowed is not None
    assert decoder.decode("webhook", {"url": url}, allowed).url == url
    if refused is None:
        assert decoder.decode("webhook", {"url": url}, public).url == url
        return
    with pytest.raises(InvalidPayload) as raised:
        decoder.decode("webhook", {"url": url}, public)
    assert refused in str(raised.value)
