"""The client's rules, against a scripted transport: which failures are tried again, how
long it waits, which exception each status is, and what a submission sends."""

from __future__ import annotations

import inspect
import json
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import MappingProxyType

import httpx
import pytest

from jobqueue import Unique
from jobqueue.client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    Retries,
    ServerError,
    ServiceUnreachable,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
    job_request,
    sending,
)
from jobqueue.client import calls as calls_module
from jobqueue.domain.status import Status
from jobqueue.wire.queue_requests import QueueLimitsRequest
from jobqueue.wire.requests import BatchJob, SubmitOptions, UniqueRequest
from tests.support.scripted_client import FAST, RECORD, Script, client, error, ok


def test_a_submission_sends_its_fields_and_a_fresh_idempotency_key() -> None:
    script = Script(
        ok({**RECORD, "duplicate": False}, 201), ok({**RECORD, "duplicate": False}, 201)
    )
    with client(script) as jobs:
        job = jobs.submit(
            "sleep",
            {"duration": "1s"},
            queue="reports",
            priority=3,
            delay=timedelta(minutes=1, seconds=30),
            unique=Unique(key="r-1", period=timedelta(hours=1)),
        )
        jobs.submit("sleep", {"duration": "1s"})

    assert job.type == "sleep"
    assert not job.duplicate
    first = script.requests[0]
    assert (first.method, first.url.path) == ("POST", "/jobs")
    assert json.loads(first.content) == {
        "type": "sleep",
        "payload": {"duration": "1s"},
        "delay": "1m30s",
        "queue": "reports",
        "priority": 3,
        "unique": {"key": "r-1", "states": ["pending", "processing"], "period": "1h"},
    }
    keys = {request.headers["idempotency-key"] for request in script.requests}
    assert len(keys) == 2


def test_a_503_is_tried_again_with_the_same_key_after_its_retry_after() -> None:
    script = Script(error(503, "down", **{"Retry-After": "0"}), error(503), ok(status=201))
    with client(script) as jobs:
        jobs.submit("sleep", {"duration": "1s"})

    assert len(script.requests) == 3
    assert len({request.headers["idempotency-key"] for request in script.requests}) == 1


def test_a_503_that_outlasts_the_retries_is_unavailable() -> None:
    script = Script(*[error(503, "the job store is unavailable")] * 4)
    with client(script) as jobs, pytest.raises(Unavailable) as raised:
        jobs.job(uuid.uuid4())
    assert raised.value.status == 503
    assert raised.value.message == "the job store is unavailable"
    assert raised.value.request_id == "req-1"
    assert len(script.requests) == FAST.attempts


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, BadRequest), (401, Unauthorized), (404, NotFound), (409, Conflict), (500, ServerError)],
)
def test_each_error_status_is_its_exception_and_is_not_tried_again(
    status: int, kind: type[Exception]
) -> None:
    script = Script(error(status, "why"))
    with client(script) as jobs, pytest.raises(kind) as raised:
        jobs.cancel(uuid.uuid4())
    assert str(raised.value) == f"{status}: why"
    assert len(script.requests) == 1


def test_a_connection_never_made_is_tried_again_for_any_call() -> None:
    refused = httpx.ConnectError("connection refused")
    script = Script(refused, refused, ok({"retried": 3}))
    with client(script) as jobs:
        assert jobs.retry_many("dead_letter", queue="emails") == 3
    assert json.loads(script.requests[-1].content) == {"status": "dead_letter", "queue": "emails"}


def test_a_broken_answer_is_tried_again_only_where_repeating_is_harmless() -> None:
    broken = httpx.ReadError("connection reset")
    with client(Script(broken, ok(status=201))) as jobs:
        jobs.submit("sleep")  # its key replays the first, should it have arrived
    with (
        client(Script(broken, ok({"cancelled": 1}))) as jobs,
        pytest.raises(ServiceUnreachable) as raised,
    ):
        jobs.cancel_many("pending")  # a second would cancel more jobs
    assert "POST /jobs/cancel" in str(raised.value)


def test_a_token_is_sent_as_a_bearer() -> None:
    script = Script(ok({"status": "ok"}))
    with client(script, token="s3cret") as jobs:
        assert jobs.healthy()
    assert script.requests[0].headers["authorization"] == "Bearer s3cret"


def test_an_empty_token_is_no_token() -> None:
    # `JOBQUEUE_TOKEN=` in a shell: the service says a token is missing, rather than
    # httpx refusing the header "Bearer " and the call failing as if unreachable.
    script = Script(ok({"status": "ok"}))
    with client(script, token="") as jobs:
        assert jobs.healthy()
    assert "authorization" not in script.requests[0].headers


def test_an_id_or_a_name_is_one_segment_of_the_path() -> None:
    script = Script(*[error(400)] * 5, ok({"name": "emails.eu", "paused": True, "paused_at": None}))
    with client(script) as jobs:
        for call in (
            lambda: jobs.job("../queues"),
            lambda: jobs.job(".."),
            lambda: jobs.cancel("a?b#c"),
            lambda: jobs.pause("a/b"),
            lambda: jobs.resume("."),
        ):
            with pytest.raises(BadRequest):
                call()
        jobs.pause("emails.eu")
    assert [request.url.raw_path for request in script.requests] == [
        b"/jobs/..%2Fqueues",
        b"/jobs/%2E%2E",
        b"/jobs/a%3Fb%23c/cancel",
        b"/queues/a%2Fb/pause",
        b"/queues/%2E/resume",
        b"/queues/emails.eu/pause",
    ]


def test_a_success_that_is_not_the_apis_answer_is_an_unexpected_answer() -> None:
    # Another server at the URL (a page for every path), or another route's record.
    page = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>hello</html>"))
    with (
        Client("http://jobs.test", transport=page, retries=FAST) as jobs,
        pytest.raises(UnexpectedAnswer) as raised,
    ):
        jobs.queues()
    assert str(raised.value).startswith("GET /queues: 200, but not an answer of the jobqueue API")
    with client(Script(ok({"queues": []}))) as jobs, pytest.raises(UnexpectedAnswer):
        jobs.job(uuid.uuid4())


def test_not_ready_is_an_answer_not_retried() -> None:
    script = Script(error(503, "not ready: draining"))
    with client(script) as jobs:
        assert jobs.ready() is False
    assert len(script.requests) == 1


def test_a_batch_gives_every_job_a_key_and_keeps_those_given() -> None:
    item = {**RECORD, "duplicate": False, "replayed": False}
    script = Script(ok({"jobs": [item, item]}, 201))
    with client(script) as jobs:
        jobs.submit_batch(
            [job_request("sleep", {"duration": "1s"}, idempotency_key="mine"), job_request("sleep")]
        )
    sent = json.loads(script.requests[0].content)["jobs"]
    assert sent[0]["idempotency_key"] == "mine"
    assert len(sent[1]["idempotency_key"]) == 32


def test_pages_are_followed_to_the_last() -> None:
    script = Script(
        ok({"jobs": [RECORD], "next_cursor": "c1"}), ok({"jobs": [RECORD], "next_cursor": None})
    )
    with client(script) as jobs:
        assert len(list(jobs.iter_jobs("pending", job_type="sleep", page_size=1))) == 2
    assert [dict(request.url.params) for request in script.requests] == [
        {"status": "pending", "type": "sleep", "limit": "1"},
        {"status": "pending", "type": "sleep", "limit": "1", "cursor": "c1"},
    ]


async def test_the_async_client_follows_the_same_rules() -> None:
    script = Script(httpx.ConnectError("refused"), error(503), ok(status=201), error(404))
    async with AsyncClient(
        "http://jobs.test", transport=httpx.MockTransport(script), retries=FAST
    ) as jobs:
        created = await jobs.submit("sleep")
        with pytest.raises(NotFound):
            await jobs.job(created.id)
    assert len({r.headers.get("idempotency-key") for r in script.requests[:3]}) == 1


def test_retry_after_is_a_floor_of_the_wait_in_seconds_or_as_a_date() -> None:
    retries = Retries(attempts=2, base=timedelta(milliseconds=1), cap=timedelta(milliseconds=1))
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    for header, at_least, at_most in (("3", 3.0, 3.0), (later, 25.0, 30.0), ("soon", 0.0, 0.001)):
        response = httpx.Response(503, json={"error": "down"}, headers={"Retry-After": header})
        delay = sending.judged(calls_module.health(), response, 0, retries)
        assert isinstance(delay, float)
        assert at_least <= delay <= at_most, header


def test_the_client_s_keywords_are_the_request_s_options() -> None:
    # A field added to the request is a keyword of `submit` too (or this fails); but a
    # batch job's name, a keyword of `job_request` alone: a job submitted alone has none.
    fields = set(BatchJob.__struct_fields__) - {"type", "payload", "name"}
    assert set(SubmitOptions.__annotations__) == fields
    assert "name" in inspect.signature(job_request).parameters


@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_set_limits_takes_every_limit_the_request_has(
    client_class: type[Client] | type[AsyncClient],
) -> None:
    # A limit added to the request is a keyword of `set_limits` too (or this fails).
    keywords = set(inspect.signature(client_class.set_limits).parameters) - {"self", "queue"}
    assert keywords == set(QueueLimitsRequest.__struct_fields__)


async def test_set_limits_sends_each_limit_and_reads_the_queue_back() -> None:
    state = {"name": "reports", "paused": False, "paused_at": None}
    limits = {"key_concurrency": 2, "key_rate": "10/m", "set_by": "operator"}
    # An older service's answer, without a key rate, still reads.
    older = {**state, "limits": {"concurrency": 3, "set_by": "operator"}}
    script = Script(ok({**state, "limits": limits}), ok(older))
    with client(script) as jobs:
        answer = jobs.set_limits("reports", key_concurrency=2, key_rate="10/1m")
        assert jobs.set_limits("reports", concurrency=3).limits.key_rate is None
    assert (answer.limits.key_concurrency, answer.limits.key_rate) == (2, "10/m")
    sent = script.requests[0]
    assert (sent.method, sent.url.path) == ("PUT", "/queues/reports/limits")
    assert json.loads(sent.content) == {
        "concurrency": None,
        "rate": None,
        "key_concurrency": 2,
        "key_rate": "10/1m",
        "type_rates": None,
    }

    script = Script(ok({**state, "limits": limits}))
    async with AsyncClient(
        "http://jobs.test", transport=httpx.MockTransport(script), retries=FAST
    ) as async_jobs:
        await async_jobs.set_limits("reports", key_rate="10/1m")
    assert json.loads(script.requests[0].content)["key_rate"] == "10/1m"


async def test_set_limits_sends_type_rates_by_type_and_reads_their_starts_back() -> None:
    state = {"name": "texts", "paused": False, "paused_at": None}
    limits = {
        "type_rates": {"fax": "1/m", "send_sms": "10/s"},
        "type_started": {"fax": 0, "send_sms": 4},
        "set_by": "operator",
    }
    # An older service's answer, without type rates, still reads.
    older = {**state, "limits": {"concurrency": 3, "set_by": "operator"}}
    script = Script(ok({**state, "limits": limits}), ok(older))
    with client(script) as jobs:
        # Any mapping: sent as the object the API takes.
        rates = MappingProxyType({"send_sms": "10/s", "fax": "1/m"})
        answer = jobs.set_limits("texts", type_rates=rates)
        lifted = jobs.set_limits("texts", concurrency=3).limits
    assert answer.limits.type_rates == {"fax": "1/m", "send_sms": "10/s"}
    assert answer.limits.type_started == {"fax": 0, "send_sms": 4}
    assert (lifted.type_rates, lifted.type_started) == (None, None)
    assert json.loads(script.requests[0].content)["type_rates"] == {
        "send_sms": "10/s",
        "fax": "1/m",
    }
    assert json.loads(script.requests[1].content)["type_rates"] is None

    script = Script(ok({**state, "limits": limits}))
    async with AsyncClient(
        "http://jobs.test", transport=httpx.MockTransport(script), retries=FAST
    ) as async_jobs:
        await async_jobs.set_limits("texts", type_rates={"send_sms": "10/s"})
    assert json.loads(script.requests[0].content)["type_rates"] == {"send_sms": "10/s"}


def test_a_job_request_sends_durations_as_text_and_uniqueness_as_its_request() -> None:
    job = job_request(
        "report",
        {"n": 1},
        delay=timedelta(minutes=1, seconds=30),
        timeout="45s",
        unique=Unique(by=("n",), period=timedelta(hours=1)),
        priority=2,
    )
    assert (job.delay, job.timeout, job.priority) == ("1m30s", "45s", 2)
    states = [Status.PENDING, Status.PROCESSING]
    assert job.unique == UniqueRequest(by=["n"], states=states, period="1h")
    assert job.options()["unique"] == Unique(by=("n",), period=timedelta(hours=1))
