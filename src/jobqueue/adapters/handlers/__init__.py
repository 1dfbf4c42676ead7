"""The example handlers shipped with jobqueue: `sleep` and `webhook`."""

from __future__ import annotations

from datetime import timedelta

from jobqueue.adapters.handlers.sleep import SleepPayload, handle_sleep
from jobqueue.adapters.handlers.webhook import WebhookPayload, webhook_handler
from jobqueue.domain.registry import Registry


def builtin_registry(
    *,
    webhook_allow_private: bool = False,
    webhook_timeout: timedelta = timedelta(seconds=10),
) -> Registry:
    """A fresh registry holding `sleep` and `webhook`, configured from settings."""
    registry = Registry()
    registry.handler("sleep", payload=SleepPayload)(handle_sleep)
    registry.handler("webhook", payload=WebhookPayload)(
        webhook_handler(allow_private=webhook_allow_private, timeout=webhook_timeout)
    )
    return registry
