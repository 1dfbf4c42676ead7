"""The dashboard's pages without a browser: user data escaped, ages as read at a glance,
errors on its paths as HTML pages with the API's statuses, its assets open and cached,
and every file it serves shipped with the package; a queue's limits set from its page."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from litestar.testing import TestClient

from jobqueue.domain.flow import LimitsSource, QueueLimits, Rate, type_rates
from jobqueue.domain.queues import QueueState, QueueSummary
from jobqueue.domain.status import COUNTED, Status
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.http.ui.frame import SECURITY_POLICY
from jobqueue.entrypoints.http.ui.overview import Count, QueueRow, age, listing_href, queue_rows
from jobqueue.entrypoints.http.ui.pages import STATIC_DIRECTORY, template_config, trace_href
from jobqueue.entrypoints.http.ui.session import CSRF_COOKIE
from tests.fakes import InMemoryJobStore
from tests.support.api import build_api

HOSTILE = "<script>alert(1)</script>\"'&"


def _row(name: str) -> QueueRow:
    return QueueRow(
        name=name,
        counts=tuple(Count(status, 1, listing_href(status, name)) for status in COUNTED),
        due=1,
        scheduled=0,
        oldest_due_age="1 s",
        paused=True,
        consumers=0,
        unconsumed=True,
    )


def test_the_queues_table_escapes_what_it_shows() -> None:
    engine = template_config("1.0").engine_instance
    html = engine.get_template("fragments/queues.html").render(
        rows=[_row(HOSTILE)], statuses=COUNTED, refresh_seconds=5, csrf="token"
    )

    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;" in html
    # In the links too, where the name is a query parameter.
    assert "queue=%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%26" in html


def test_a_count_links_to_the_listing_of_its_queues_jobs_of_its_status() -> None:
    assert listing_href(Status.DEAD_LETTER, "mail") == "/ui/jobs?status=dead_letter&queue=mail"


@pytest.mark.parametrize(
    ("elapsed", "shown"),
    [
        (timedelta(0), "0 s"),
        (timedelta(seconds=59.9), "59 s"),
        (timedelta(seconds=61), "1 min 1 s"),
        (timedelta(hours=2), "2 h 0 min"),
        (timedelta(days=3, hours=5, minutes=7), "3 d 5 h"),
        (timedelta(seconds=-1), "0 s"),
    ],
)
def test_an_age_shows_its_two_largest_units(elapsed: timedelta, shown: str) -> None:
    assert age(elapsed) == shown


def test_the_overview_lists_queues_under_its_security_policy() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get("/ui")

    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"] == SECURITY_POLICY
    assert answer.headers["cache-control"] == "no-store"
    assert 'hx-get="/ui/fragments/queues"' in answer.text


def test_an_unknown_dashboard_path_is_a_page_and_an_unknown_api_path_is_json() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        page = client.get("/ui/nowhere")
        api = client.get("/nowhere")

    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "no route for GET /ui/nowhere" in page.text
    assert "Traceback" not in page.text
    assert (api.status_code, api.json()) == (404, {"error": "no route for GET /nowhere"})


def test_a_store_that_is_down_is_a_503_page_with_retry_after() -> None:
    store = InMemoryJobStore()
    store.available = False
    with TestClient(build_api(store=store).app) as client:
        for path in ("/ui", "/ui/fragments/queues"):
            answer = client.get(path)

            assert answer.status_code == 503
            assert answer.headers["retry-after"] == "1"
            assert answer.headers["content-type"].startswith("text/html")
            assert "the job store is unavailable" in answer.text


def test_with_api_tokens_the_pages_send_to_sign_in_and_the_assets_are_open() -> None:
    settings = Settings.from_env({"API_TOKENS": "secret"})
    with TestClient(build_api(store=InMemoryJobStore(), settings=settings).app) as client:
        refused = client.get("/ui", follow_redirects=False)
        refreshed = client.get("/ui/fragments/queues", headers={"HX-Request": "true"})
        allowed = client.get("/ui", headers={"Authorization": "Bearer secret"})
        asset = client.get("/ui/static/htmx.min.js")

    assert (refused.status_code, refused.headers["location"]) == (303, "/ui/sign-in?next=%2Fui")
    assert (refreshed.status_code, refreshed.headers["hx-redirect"]) == (
        401,
        "/ui/sign-in?next=%2Fui%2Ffragments%2Fqueues",
    )
    assert allowed.status_code == 200
    assert asset.status_code == 200


@pytest.mark.parametrize("name", ["htmx.min.js", "htmx.LICENSE", "ui.css", "favicon.svg"])
def test_every_asset_is_served_for_a_year(name: str) -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        answer = client.get(f"/ui/static/{name}")

    assert answer.status_code == 200
    assert answer.content == (STATIC_DIRECTORY / name).read_bytes()
    assert answer.headers["cache-control"] == "max-age=31536000, public"


def test_the_pages_load_every_asset_from_the_service() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        html = client.get("/ui").text
        for name in ("htmx.min.js", "ui.css", "favicon.svg"):
            assert f'"/ui/static/{name}?v=' in html


def test_a_read_only_dashboard_says_so_on_every_page() -> None:
    read_only = build_api(store=InMemoryJobStore(), settings=Settings(dashboard_read_only=True))
    with TestClient(read_only.app) as client:
        assert "Read-only" in client.get("/ui").text
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        assert "Read-only" not in client.get("/ui").text


@pytest.mark.parametrize(
    ("template", "trace_id", "href"),
    [
        ("https://t.example/trace/{trace_id}", "4bf92f35", "https://t.example/trace/4bf92f35"),
        # A trace id is data: whatever it holds stays inside the URL's path.
        ("https://t.example/{trace_id}?x=1", "a/b?c", "https://t.example/a%2Fb%3Fc?x=1"),
        ("https://t.example/{trace_id}", None, None),
        (None, "4bf92f35", None),
    ],
)
def test_a_trace_links_under_the_configured_template(
    template: str | None, trace_id: str | None, href: str | None
) -> None:
    assert trace_href(template, trace_id) == href


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("key_rate", "fast", "invalid limits: starts per key: a rate is starts per period"),
        ("key_rate", "0/1m", "invalid limits: starts per key: a rate limit must be between 1"),
        ("rate", "0/1m", "invalid limits: rate: a rate limit must be between 1"),
        ("key_concurrency", "0", "invalid limits: running per key: a key concurrency limit"),
    ],
)
def test_the_queue_page_sets_per_key_limits_and_refuses_a_bad_one_saying_which(
    field: str, value: str, says: str
) -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        client.get("/ui/queues/mail")
        csrf = client.cookies.get(CSRF_COOKIE)
        form = {"csrf": csrf, "concurrency": "", "key_concurrency": "2", "key_rate": " 10/1m "}
        set_limits = client.post("/ui/queues/mail/limits", data=form, follow_redirects=False)
        page = client.get("/ui/queues/mail").text
        refused = client.post(
            "/ui/queues/mail/limits", data={**form, field: value}, follow_redirects=False
        )
        listed = client.get("/queues").json()["queues"]

    assert (set_limits.status_code, set_limits.headers["location"]) == (303, "/ui/queues/mail")
    assert '<p id="limits">2 running per key, 10/m started per key</p>' in page
    assert 'name="key_rate" value="10/m"' in page
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("text/html")
    assert says in html.unescape(refused.text)
    # Refused, it changed nothing.
    [limits] = [queue["limits"] for queue in listed if queue["name"] == "mail"]
    assert (limits["key_concurrency"], limits["key_rate"]) == (2, "10/m")


def test_a_queue_row_shows_each_type_s_rate_with_its_starts_and_as_the_form_takes_it() -> None:
    rated = type_rates({"send_sms": Rate.parse("10/s"), "fax": Rate.parse("1/1m")})
    state = QueueState(
        "texts",
        None,
        QueueLimits(concurrency=4, type_rates=rated),
        LimitsSource.OPERATOR,
        running=1,
        type_started=(("fax", 0), ("send_sms", 3)),
    )
    [row] = queue_rows([QueueSummary(state, dict.fromkeys(COUNTED, 0), 0, None)])

    assert row.limits_in_use == "1 of 4 running, 0 of 1/m fax started, 3 of 10/s send_sms started"
    assert row.type_rates == "fax:1/m, send_sms:10/s"
    assert _row("plain").type_rates is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"type_rates": "sms"},
            "invalid limits: starts per type: a type rate is TYPE:STARTS/PERIOD, such as "
            "send_sms:10/s; got 'sms'",
        ),
        ({"type_rates": "sms:fast"}, "starts per type: type 'sms': a rate is starts per period"),
        ({"type_rates": "fax:1/s, sms:0/1m"}, "type 'sms': a rate limit must be between 1"),
        (
            {"type_rates": "sms:1/s,sms:2/s"},
            "starts per type: the rate of type 'sms' is given twice",
        ),
        ({"type_rates": " :1/s"}, "starts per type: a type rate is TYPE:STARTS/PERIOD"),
        ({"type_rates": f"{'x' * 201}:1/s"}, "a type rate names a job type (1 to 200"),
        ({"type_rates": "a\x00b:1/s"}, "starts per type: a type rate names a job type"),
        (
            {"type_rates": ", ".join(f"t{n}:1/s" for n in range(51))},
            "starts per type: at most 50 types of a queue have rates, got 51",
        ),
        # Counted before any is parsed: the field may hold any number of them.
        ({"type_rates": ",".join(["t:fast"] * 5000)}, "have rates, got 5000"),
        # Each right alone, but not together.
        (
            {"key_concurrency": "2"},
            "invalid limits: rates per job type cannot be combined with limits per partition key",
        ),
    ],
)
def test_the_queue_page_sets_type_rates_and_refuses_a_bad_one_saying_why(
    given: dict[str, str], says: str
) -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        client.get("/ui/queues/texts")
        csrf = client.cookies.get(CSRF_COOKIE)
        form = {"csrf": csrf, "concurrency": "4", "type_rates": " send_sms : 10/s ,fax:1/1m, "}
        set_limits = client.post("/ui/queues/texts/limits", data=form, follow_redirects=False)
        page = client.get("/ui/queues/texts").text
        refused = client.post(
            "/ui/queues/texts/limits", data={**form, **given}, follow_redirects=False
        )
        listed = client.get("/queues").json()["queues"]

    assert (set_limits.status_code, set_limits.headers["location"]) == (303, "/ui/queues/texts")
    shown = "0 of 4 running, 0 of 1/m fax started, 0 of 10/s send_sms started"
    assert f'<p id="limits">{shown}</p>' in page
    assert 'name="type_rates" class="wide" value="fax:1/m, send_sms:10/s"' in page
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("text/html")
    assert says in html.unescape(refused.text)
    # Refused, it changed nothing.
    [limits] = [queue["limits"] for queue in listed if queue["name"] == "texts"]
    assert (limits["concurrency"], limits["type_rates"]) == (4, {"fax": "1/m", "send_sms": "10/s"})


def test_the_queue_page_escapes_a_rated_type_s_name_and_an_empty_field_lifts_the_rates() -> None:
    with TestClient(build_api(store=InMemoryJobStore()).app) as client:
        client.get("/ui/queues/texts")
        csrf = client.cookies.get(CSRF_COOKIE)
        form = {"csrf": csrf, "type_rates": f"{HOSTILE}:1/s"}
        assert client.post("/ui/queues/texts/limits", data=form).status_code == 200
        page = client.get("/ui/queues/texts").text
        refused = client.post("/ui/queues/texts/limits", data={**form, "type_rates": HOSTILE})
        client.post("/ui/queues/texts/limits", data={**form, "type_rates": " , "})
        lifted = client.get("/ui/queues/texts").text

    assert "<script>alert(1)" not in page + refused.text
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;"
    assert f'<p id="limits">0 of 1/s {escaped} started</p>' in page
    assert f'value="{escaped}:1/s"' in page
    assert refused.status_code == 400
    assert '<p id="limits">None: ' in lifted
    assert 'name="type_rates" class="wide" value=""' in lifted
