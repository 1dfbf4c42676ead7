"""`jobqueue.client` (sync and async) and the operator's `jobqueue jobs|queues` commands,
against a real `jobqueue serve` that requires a token."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from jobqueue import Unique
from jobqueue.client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    Unauthorized,
    job_request,
)
from tests.support.operator_service import TOKEN, _cli, _later, client, service
from tests.support.processes import Service, run, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

# Fixtures of tests.support.operator_service, used by name.
__all__ = ["client", "service"]


def test_a_submitted_job_is_run_and_read_back(client: Client) -> None:
    job = client.submit("sleep", {"duration": "1ms"}, priority=2)

    deadline = time.monotonic() + 30
    while (status := client.status(job.id)).status != "completed":
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    record = client.job(job.id)
    assert (record.priority, record.attempts, len(record.history)) == (2, 1, 1)
    assert record.history[0].outcome == "completed"


def test_a_submission_with_a_key_replays_and_a_different_one_conflicts(client: Client) -> None:
    key = f"client-{uuid.uuid4()}"
    first = client.submit("sleep", {"duration": "1ms"}, idempotency_key=key, **_later("k"))
    again = client.submit("sleep", {"duration": "1ms"}, idempotency_key=key, **_later("k"))
    assert again.id == first.id
    assert (first.replayed, again.replayed) == (False, True)
    with pytest.raises(Conflict) as raised:
        client.submit("sleep", {"duration": "2ms"}, idempotency_key=key, **_later("k"))
    assert raised.value.status == 409
    assert key in raised.value.message


def test_refusals_are_their_status_exceptions_with_the_services_message(
    client: Client, service: Service
) -> None:
    with pytest.raises(BadRequest) as bad:
        client.submit("no_such_type")
    assert bad.value.message.startswith("unknown job type 'no_such_type'")
    assert bad.value.request_id
    with pytest.raises(NotFound):
        client.job(uuid.uuid4())
    with Client(service.base_url, token="wrong") as stranger, pytest.raises(Unauthorized):
        stranger.queues()
    # The probes are open: no token needed.
    with Client(service.base_url) as anyone:
        assert anyone.healthy()
        assert anyone.ready()


def test_a_batch_pages_cancel_retry_and_bulk_cancel(client: Client) -> None:
    queue = f"q{uuid.uuid4().hex[:8]}"
    made = client.submit_batch(
        [job_request("sleep", {"duration": f"{n}ms"}, **_later(queue)) for n in range(120)]
    )
    assert [each.payload for each in made] == [{"duration": f"{n}ms"} for n in range(120)]

    listed = list(client.iter_jobs("pending", queue=queue, page_size=50))
    assert {job.id for job in listed} == {job.id for job in made}

    cancelled = client.cancel(made[0].id)
    assert cancelled.status == "cancelled"
    with pytest.raises(Conflict):
        client.cancel(made[0].id)
    assert client.retry(made[0].id).status == "pending"
    assert client.cancel_many("pending", queue=queue, limit=1000) == 120
    assert client.retry_many("cancelled", queue=queue) == 120
    assert client.discard_many("cancelled", queue=queue) == 0


def test_unique_jobs_through_the_client(client: Client) -> None:
    unique = Unique(key=f"report-{uuid.uuid4()}")
    first = client.submit("sleep", {"duration": "1ms"}, unique=unique, **_later("u"))
    second = client.submit("sleep", {"duration": "2ms"}, unique=unique, **_later("u"))
    assert (first.duplicate, second.duplicate, second.id) == (False, True, first.id)


def test_queues_pause_and_resume(client: Client) -> None:
    queue = f"p{uuid.uuid4().hex[:8]}"
    client.submit("sleep", {"duration": "1ms"}, **_later(queue))

    assert client.pause(queue).paused
    [summary] = [each for each in client.queues() if each.name == queue]
    assert summary.paused
    assert summary.scheduled == 1
    assert not client.resume(queue).paused
    assert client.periodic() == []


def test_the_job_types_with_their_payload_schemas(client: Client) -> None:
    types = {each.name: each for each in client.types()}

    assert set(types) == {"sleep", "webhook"}
    sleep = types["sleep"]
    assert (sleep.source, sleep.queue, sleep.priority, sleep.unique) == (
        "local",
        "default",
        0,
        None,
    )
    assert sleep.payload_schema is not None
    assert sleep.payload_schema["$defs"]["SleepPayload"]["required"] == ["duration"]


async def test_the_async_client_against_the_service(service: Service) -> None:
    async with AsyncClient(service.base_url, token=TOKEN) as client:
        queue = f"a{uuid.uuid4().hex[:8]}"
        made = await client.submit_batch(
            [job_request("sleep", {"duration": "1ms"}, **_later(queue)) for _ in range(3)]
        )
        one = await client.submit("sleep", {"duration": "1ms"}, **_later(queue))
        assert (await client.job(one.id)).queue == queue
        listed = [job.id async for job in client.iter_jobs("pending", queue=queue, page_size=2)]
        assert set(listed) == {job.id for job in made} | {one.id}
        with pytest.raises(NotFound):
            await client.status(uuid.uuid4())


# --- the operator's commands -----------------------------------------------------------


def test_jobs_list_show_cancel_and_retry_from_the_command_line(
    service: Service, client: Client
) -> None:
    queue = f"c{uuid.uuid4().hex[:8]}"
    made = client.submit_batch(
        [job_request("sleep", {"duration": f"{n}s"}, **_later(queue)) for n in range(3)]
    )

    code, out, err = _cli(
        service, "jobs", "list", "--status", "pending", "--queue", queue, "--json"
    )
    assert code == 0, err
    assert [job["id"] for job in json.loads(out)] == [str(job.id) for job in made]

    code, out, _ = _cli(service, "jobs", "list", "--status", "pending", "--queue", queue)
    assert code == 0
    header, *rows = out.strip().splitlines()
    assert header.split()[:5] == ["id", "type", "queue", "pri", "status"]
    assert [row.split()[0] for row in rows] == [str(job.id) for job in made]

    code, out, _ = _cli(service, "jobs", "show", str(made[1].id))
    assert code == 0
    assert queue in out
    assert '{"duration":"1s"}' in out.replace(" ", "")

    assert _cli(service, "jobs", "cancel", str(made[1].id))[0] == 0
    code, _, err = _cli(service, "jobs", "cancel", str(made[1].id))
    assert code == 1
    assert "409: cannot cancel job" in err
    code, out, _ = _cli(service, "jobs", "retry", str(made[1].id), "--json")
    assert (code, json.loads(out)["status"]) == (0, "pending")


def test_the_service_options_are_taken_before_between_and_after_the_command(
    service: Service,
) -> None:
    given = ["--url", service.base_url, "--token", TOKEN, "--json"]
    # The environment points elsewhere: each answer came by the options.
    for words in (
        [*given, "queues", "list"],
        ["queues", *given, "list"],
        ["queues", "list", *given],
        ["--url", service.base_url, "queues", "list", "--token", TOKEN, "--json"],
    ):
        done = run(words, JOBQUEUE_URL="http://127.0.0.1:9", JOBQUEUE_TOKEN="wrong")
        assert done.returncode == 0, (words, done.stderr)
        assert isinstance(json.loads(done.stdout), list)
    # Given twice, the one nearest the action wins.
    done = run(
        ["--url", "http://127.0.0.1:9", "queues", "list", "--url", service.base_url],
        JOBQUEUE_TOKEN=TOKEN,
    )
    assert done.returncode == 0, done.stderr


def test_queues_from_the_command_line(service: Service, client: Client) -> None:
    queue = f"cq{uuid.uuid4().hex[:8]}"
    client.submit("sleep", {"duration": "1ms"}, **_later(queue))

    assert _cli(service, "queues", "pause", queue)[0] == 0
    code, out, _ = _cli(service, "queues", "list")
    assert code == 0
    [row] = [line for line in out.splitlines() if line.startswith(queue)]
    assert row.split()[:2] == [queue, "paused"]
    code, out, _ = _cli(service, "queues", "resume", queue, "--json")
    assert (code, json.loads(out)["paused"]) == (0, False)


def test_a_queue_is_limited_per_key_by_the_client_and_the_command_line(
    service: Service, client: Client
) -> None:
    queue = f"cq{uuid.uuid4().hex[:8]}"
    limited = client.set_limits(queue, key_concurrency=2, key_rate="10/1m")
    assert (limited.limits.key_concurrency, limited.limits.key_rate) == (2, "10/m")
    with pytest.raises(BadRequest) as bad:
        client.set_limits(queue, key_rate="0/1m")
    assert bad.value.message.startswith("invalid limits: key_rate: a rate limit must be")

    code, out, err = _cli(service, "queues", "limit", queue, "--key-rate", "3/s")
    assert code == 0, err
    assert "3/s started per key" in out
    code, out, _ = _cli(service, "queues", "list")
    [row] = [line for line in out.splitlines() if line.startswith(queue)]
    # The command replaced every limit: the per-key concurrency is lifted.
    assert row.endswith(" 3/s started per key")
    code, out, _ = _cli(service, "queues", "limit", queue, "--key-rate", "2/1m", "--json")
    assert (code, json.loads(out)["limits"]["key_rate"]) == (0, "2/m")

    code, _, err = _cli(service, "queues", "limit", queue, "--key-rate", "fast")
    assert code == 1
    assert "400: invalid limits: key_rate: a rate is starts per period" in err
    code, _, err = _cli(service, "queues", "limit", queue)
    assert code == 1
    assert "give --concurrency, --rate, --key-concurrency, --key-rate" in err
    assert client.lift_limits(queue).limits.key_rate is None


def test_a_queue_s_types_are_rated_by_the_client_and_the_command_line(
    service: Service, client: Client
) -> None:
    queue = f"cq{uuid.uuid4().hex[:8]}"
    limited = client.set_limits(queue, type_rates={"send_sms": "10/s", "fax": "1/1m"})
    assert limited.limits.type_rates == {"fax": "1/m", "send_sms": "10/s"}
    assert limited.limits.type_started == {"fax": 0, "send_sms": 0}
    with pytest.raises(BadRequest) as bad:
        client.set_limits(queue, key_concurrency=2, type_rates={"send_sms": "10/s"})
    assert bad.value.message.startswith("invalid limits: rates per job type cannot be combined")

    code, out, err = _cli(
        service, "queues", "limit", queue, "--type-rate", "send_sms:5/s", "--type-rate", "fax:2/1m"
    )
    assert code == 0, err
    assert "0 of 2/m fax started, 0 of 5/s send_sms started" in out
    code, out, _ = _cli(service, "queues", "list")
    [row] = [line for line in out.splitlines() if line.startswith(queue)]
    assert row.endswith(" 0 of 2/m fax started, 0 of 5/s send_sms started")
    code, out, _ = _cli(
        service, "queues", "limit", queue, "--concurrency", "3", "--type-rate", "fax:1/s", "--json"
    )
    assert code == 0
    assert json.loads(out)["limits"]["type_rates"] == {"fax": "1/s"}

    # Read on the command line, a bad one is a usage error naming the option and the type.
    for given, says in (
        (["send_sms:fast"], "--type-rate: type 'send_sms': a rate is starts per period"),
        (["10/s"], "--type-rate: a type rate is TYPE:STARTS/PERIOD"),
        (["sms:1/s", "sms:2/s"], "--type-rate: the rate of type 'sms' is given twice"),
    ):
        words = [word for each in given for word in ("--type-rate", each)]
        code, _, err = _cli(service, "queues", "limit", queue, *words)
        assert code == 2, err
        assert f"jobqueue queues limit: error: {says}" in err
    code, _, err = _cli(
        service, "queues", "limit", queue, "--type-rate", "sms:1/s", "--key-concurrency", "2"
    )
    assert code == 1
    assert "400: invalid limits: rates per job type cannot be combined" in err
    code, _, err = _cli(service, "queues", "limit", queue)
    assert code == 1
    assert "give --concurrency, --rate, --key-concurrency, --key-rate, --type-rate" in err
    # Refused, none of those changed the limits last set.
    [listed] = [each for each in client.queues() if each.name == queue]
    assert (listed.limits.concurrency, listed.limits.type_rates) == (3, {"fax": "1/s"})
    assert client.lift_limits(queue).limits.type_rates is None


def test_a_rated_type_s_starts_are_shown_as_its_jobs_start(
    service: Service, client: Client
) -> None:
    # The service's workers consume `default`: its `sleep` jobs start, and count.
    client.set_limits("default", type_rates={"sleep": "5/1m"})
    try:
        jobs = [client.submit("sleep", {"duration": "1ms"}) for _ in range(2)]
        until(
            lambda: all(client.status(job.id).status == "completed" for job in jobs) or None,
            "both sleep jobs completed",
            within=30,
        )
        [default] = [queue for queue in client.queues() if queue.name == "default"]
        assert default.limits.type_started == {"sleep": 2}
        code, out, err = _cli(service, "queues", "list")
        assert code == 0, err
        [row] = [line for line in out.splitlines() if line.startswith("default ")]
        assert row.endswith(" 2 of 5/m sleep started")
    finally:
        client.lift_limits("default")


def test_the_queue_list_says_who_consumes_each_queue(service: Service, client: Client) -> None:
    orphan = f"cq{uuid.uuid4().hex[:8]}"
    client.submit("sleep", {"duration": "1ms"}, queue=orphan)

    code, out, err = _cli(service, "queues", "list")

    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[-2:] == ["consumers", "limits"]
    [row] = [line for line in rows if line.startswith(orphan)]
    assert row.split()[-6:] == ["0", "no", "consumer:", "due", "jobs", "wait"]
    [default] = [line for line in rows if line.startswith("default ")]
    assert default.split()[-1] == "1"
    code, out, _ = _cli(service, "queues", "list", "--json")
    [listed] = [each for each in json.loads(out) if each["name"] == orphan]
    assert (listed["consumers"], listed["unconsumed"]) == (0, True)


def test_the_live_workers_are_listed(service: Service, client: Client) -> None:
    [worker] = client.workers()

    assert (worker.pid, worker.queues, worker.concurrency) == (
        service.process.pid,
        ["default"],
        2,
    )
    assert worker.queue_concurrency == {"default": 2}
    assert {"sleep", "webhook"} <= set(worker.types)
    assert worker.started_at <= worker.last_heartbeat_at
    code, out, err = _cli(service, "workers", "list")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["host", "pid", "version", "queues", "running", "started", "heartbeat"]
    # The queues as QUEUES spells them, each with its share.
    assert row.split()[1:5] == [str(service.process.pid), worker.version, "default=2", "0/2"]


def test_types_from_the_command_line(service: Service) -> None:
    code, out, err = _cli(service, "types", "list")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["type", "source", "queue", "pri"]
    assert all(line == line.rstrip() for line in out.splitlines()), "no padding at the ends"
    assert [row.split()[:4] for row in rows] == [
        ["sleep", "local", "default", "0"],
        ["webhook", "local", "default", "0"],
    ]
    code, out, _ = _cli(service, "types", "list", "--json")
    assert code == 0
    assert [each["payload_schema"]["$ref"] for each in json.loads(out)] == [
        "#/$defs/SleepPayload",
        # WEBHOOK_ALLOW_PRIVATE is off: the payload type that refuses private addresses.
        "#/$defs/PublicWebhookPayload",
    ]


def test_the_command_line_says_why_it_failed(service: Service, tmp_path: Path) -> None:
    code, _, err = _cli(service, "queues", "list", token="wrong")
    assert code == 1
    assert "401: invalid bearer token" in err
    code, _, err = _cli(service, "jobs", "show", "not-a-uuid")
    assert code == 1
    assert "400: job id must be a UUID" in err
    # A path in place of an id reaches the job's route, not another one whose record the
    # command would fail to read with a traceback.
    code, _, err = _cli(service, "jobs", "show", "../queues")
    assert code == 1
    assert err.startswith("jobqueue: 404: ")
    assert "Traceback" not in err
    code, _, err = _cli(service, "queues", "list", token="")  # JOBQUEUE_TOKEN= (empty)
    assert code == 1
    assert "401: missing bearer token" in err
    done = run(["jobs", "list", "--status", "pending", "--url", "http://127.0.0.1:9"])
    assert done.returncode == 1
    assert done.stderr.startswith("jobqueue: cannot reach http://127.0.0.1:9 (")
    assert run(["jobs", "list"]).returncode == 2  # --status is required


def test_version() -> None:
    done = run(["--version"])
    assert done.returncode == 0
    assert done.stdout.startswith("jobqueue 0.")
