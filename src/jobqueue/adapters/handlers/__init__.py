"""The example handlers shipped with jobqueue: `sleep` and `webhook`."""

from __future__ import annotations

from datetime import timedelta

from jobqueue.adapters.handlers.sleep import SleepPayload, handle_sleep
from jobqueue.adapters.handlers.webhook_payload import (
    PublicWebhookPayload,
    WebhookHandler,
    WebhookPayload,
)
from jobqueue.domain.registry import JobContext, Registry


def builtin_registry(
    *,
    webhook_allow_private: bool = False,
    webhook_timeout: timedelta = timedelta(seconds=10),
) -> Registry:
    """A fresh registry holding `sleep` and `webhook`, configured from settings. Unless
    private destinations are allowed, a webhook to a literal private address is refused
    at submission already."""
    if webhook_timeout <= timedelta(0):
        raise ValueError("the webhook timeout must be positive")
    registry = Registry()
    registry.handler("sleep", payload=SleepPayload)(handle_sleep)
    payload = WebhookPayload if webhook_allow_private else PublicWebhookPayload
    registry.handler("webhook", payload=payload)(
        _on_first_call(allow_private=webhook_allow_private, timeout=webhook_timeout)
    )
    return registry


def _on_first_call(*, allow_private: bool, timeout: timedelta) -> WebhookHandler:
    # The HTTP client costs a few hundred milliseconds to import, paid at every start of
    # every process; only a process that runs a webhook job needs it, from its first one.
    handler: WebhookHandler | None = None

    async def handle_webhook(ctx: JobContext, payload: WebhookPayload) -> None:
        nonlocal handler
        if handler is None:
            from jobqueue.adapters.handlers.webhook import webhook_handler

            handler = webhook_handler(allow_private=allow_private, timeout=timeout)
        await handler(ctx, payload)

    return handle_webhook
