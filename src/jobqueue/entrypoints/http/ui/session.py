"""Signing in to the dashboard, and the token every form of it carries.

A browser cannot send `Authorization: Bearer`, so with API_TOKENS set a person signs in
once with one of the tokens and gets a session cookie: HttpOnly (no script reads it),
SameSite=Strict (no other site's page or form sends it), path /ui (the API itself still
wants the bearer token). The cookie holds no token: it is an expiry and a nonce, signed
with HMAC-SHA256 keyed by the token signed in with. Any API process with the same
API_TOKENS reads it, no session is stored anywhere, and removing a token from API_TOKENS
ends the sessions made with it.

Every form that changes something carries a CSRF token, which must equal the
`jobqueue_csrf` cookie (SameSite=Strict, so a cross-site form arrives without it, and no
other site can read it). That holds with API_TOKENS unset too, where there is no session
to steal but a local service could still be acted on by any page open in the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

SESSION_COOKIE: Final = "jobqueue_session"
CSRF_COOKIE: Final = "jobqueue_csrf"
CSRF_FIELD: Final = "csrf"
SESSION_LIFETIME: Final = timedelta(hours=12)
_VERSION: Final = "v1"


@dataclass(frozen=True, slots=True)
class Session:
    expires: int  # Unix seconds
    nonce: str


def issue(token: str, now: float, lifetime: timedelta = SESSION_LIFETIME) -> str:
    """A session cookie's value for a person who signed in with `token`."""
    expires = int(now + lifetime.total_seconds())
    payload = f"{_VERSION}.{expires}.{secrets.token_hex(16)}"
    return f"{payload}.{_mac(token.encode(), payload)}"


def read(value: str | None, tokens: Sequence[bytes], now: float) -> Session | None:
    """The session `value` holds when it was signed with one of `tokens` and has not
    expired; None otherwise. Every token is tried every time (constant time)."""
    if not value:
        return None
    payload, _, mac = value.rpartition(".")
    version, _, rest = payload.partition(".")
    expires_text, _, nonce = rest.partition(".")
    if version != _VERSION or not expires_text.isdigit() or not nonce:
        return None
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(_mac(token, payload), mac)
    if not matched or int(expires_text) <= now:
        return None
    return Session(int(expires_text), nonce)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_matches(cookie: str | None, field: str | None) -> bool:
    """Whether a form's CSRF field equals its cookie (both present)."""
    if not cookie or not field:
        return False
    return hmac.compare_digest(cookie.encode(), field.encode())


def token_matches(given: str, tokens: Sequence[bytes]) -> bool:
    """Whether `given` is one of `tokens`, every one compared (constant time)."""
    candidate = given.strip().encode()
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(candidate, token)
    return matched and bool(candidate)


def _mac(key: bytes, payload: str) -> str:
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
