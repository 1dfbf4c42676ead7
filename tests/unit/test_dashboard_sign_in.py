"""Signing in to the dashboard with an API token: a session cookie that holds no token,
opens the pages and not the API, and ends with the token; every form's CSRF token."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from litestar.testing import TestClient

from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.ui.session import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    csrf_matches,
    issue,
    read,
    token_matches,
)
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

TOKENS = [b"first-token", b"second-token"]


def test_a_session_is_read_back_with_the_token_it_was_signed_with_until_it_expires() -> None:
    value = issue("second-token", now=1000.0, lifetime=timedelta(hours=1))

    assert "second-token" not in value
    assert read(value, TOKENS, now=1000.0 + 3599) is not None
    assert read(value, TOKENS, now=1000.0 + 3600) is None  # expired
    assert read(value, [b"first-token"], now=1000.0) is None  # its token was removed


@pytest.mark.parametrize(
    "tampered",
    [
        "",
        "v1.99999999999.abc.0000",
        "v2.99999999999.abc.0000",
        "garbage",
        "v1.x.abc.0000",
    ],
)
def test_a_session_not_signed_by_a_token_is_no_session(tampered: str) -> None:
    assert read(tampered, TOKENS, now=0.0) is None


def test_a_longer_expiry_breaks_the_signature() -> None:
    value = issue("first-token", now=1000.0, lifetime=timedelta(hours=1))
    version, expires, nonce, mac = value.split(".")
    forged = ".".join([version, str(int(expires) + 86400), nonce, mac])

    assert read(forged, TOKENS, now=1000.0) is None


def test_tokens_and_csrf_fields_compare_whole() -> None:
    assert token_matches(" first-token ", TOKENS)
    assert not token_matches("first-toke", TOKENS)
    assert not token_matches("", [b""])
    assert csrf_matches("abc", "abc")
    assert not csrf_matches("abc", "abd")
    assert not csrf_matches(None, "abc")
    assert not csrf_matches("abc", "")


def _client() -> TestClient:  # type: ignore[type-arg]
    settings = Settings.from_env({"API_TOKENS": "first-token,second-token"})
    return TestClient(build_api(store=InMemoryJobStore(), settings=settings).app)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def test_signing_in_opens_the_pages_but_not_the_api() -> None:
    with _client() as client:
        form = client.get("/ui/sign-in?next=/ui")
        assert form.status_code == 200
        csrf = _csrf(form.text)
        assert client.cookies.get(CSRF_COOKIE) == csrf

        signed = client.post(
            "/ui/sign-in",
            data={"csrf": csrf, "next": "/ui", "token": "second-token"},
            follow_redirects=False,
        )

        assert (signed.status_code, signed.headers["location"]) == (303, "/ui")
        cookie = signed.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=")
        for attribute in ("HttpOnly", "Path=/ui", "SameSite=Strict", "Max-Age=43200"):
            assert attribute.lower() in cookie.lower(), cookie
        assert "second-token" not in cookie
        assert client.get("/ui").status_code == 200
        assert 'action="/ui/sign-out"' in client.get("/ui").text
        # The session is the dashboard's: the API still wants its bearer token.
        assert client.get("/queues").status_code == 401


def test_a_wrong_token_or_a_missing_csrf_token_signs_nobody_in() -> None:
    with _client() as client:
        csrf = _csrf(client.get("/ui/sign-in").text)
        wrong = client.post("/ui/sign-in", data={"csrf": csrf, "token": "guess"})
        forged = client.post("/ui/sign-in", data={"token": "first-token"})
        other_site = client.post(
            "/ui/sign-in", data={"csrf": "not-the-cookie", "token": "first-token"}
        )

        assert wrong.status_code == 401
        assert "not one of the service&#39;s API_TOKENS" in wrong.text
        assert (forged.status_code, other_site.status_code) == (403, 403)
        assert SESSION_COOKIE not in client.cookies
        assert client.get("/ui", follow_redirects=False).status_code == 303


def test_signing_out_needs_the_csrf_token_and_ends_the_session() -> None:
    with _client() as client:
        csrf = _csrf(client.get("/ui/sign-in").text)
        client.post("/ui/sign-in", data={"csrf": csrf, "token": "first-token"})
        assert client.get("/ui").status_code == 200

        refused = client.post("/ui/sign-out", data={})
        assert refused.status_code == 403
        assert client.get("/ui").status_code == 200

        out = client.post("/ui/sign-out", data={"csrf": csrf}, follow_redirects=False)
        assert (out.status_code, out.headers["location"]) == (303, "/ui/sign-in")
        assert client.get("/ui", follow_redirects=False).status_code == 303


def test_after_signing_in_it_goes_back_to_a_dashboard_page_only() -> None:
    with _client() as client:
        csrf = _csrf(client.get("/ui/sign-in").text)
        for wanted, landed in (
            ("/ui/fragments/queues", "/ui/fragments/queues"),
            ("https://evil.example/", "/ui"),
            ("//evil.example", "/ui"),
        ):
            answer = client.post(
                "/ui/sign-in",
                data={"csrf": csrf, "token": "first-token", "next": wanted},
                follow_redirects=False,
            )
            assert answer.headers["location"] == landed


def test_without_api_tokens_the_sign_in_page_sends_to_the_dashboard() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get("/ui/sign-in?next=/ui", follow_redirects=False)

    assert (answer.status_code, answer.headers["location"]) == (303, "/ui")
