"""A `jobqueue api` process without a worker's handler code accepts that worker's job
types, checked by the payload schemas the worker published at start, applies their
options, lists them at GET /types and in its OpenAPI document; the worker runs the jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from openapi_spec_validator import validate

from tests.integration.published_handlers import MODULE
from tests.support.api import resolved
from tests.support.processes import Service, free_port, start, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

_INVOICE = {"customer": 7, "amount": 12.5, "ship_to": {"city": "Lyon", "postcode": "69001"}}


def _published(worker: Service) -> bool:
    return any(r["message"] == "jobqueue worker running" for r in worker.log())


def test_an_api_without_the_worker_code_accepts_and_checks_its_published_types(
    database_url: str, tmp_path: Path
) -> None:
    # The API first, knowing only the built-in types: it must learn the new one later.
    api = start(["api"], free_port(), tmp_path / "api", DATABASE_URL=database_url)
    worker = None
    try:
        api.wait_until_healthy()
        with httpx.Client(base_url=api.base_url, timeout=10) as client:
            before = client.post("/jobs", json={"type": "invoice", "payload": _INVOICE})
            assert before.status_code == 400, before.text
            assert "unknown job type 'invoice'" in before.json()["error"]

            worker = start(
                ["worker", "--handlers", MODULE],
                free_port(),
                tmp_path / "worker",
                DATABASE_URL=database_url,
                METRICS_ADDR="off",
                QUEUES="billing=2",
            )
            until(lambda: _published(worker), "the worker runs")
            # At once, not at the API's next periodic read: the unknown type sends it to
            # the table (once the last look is a second old).
            created = until(
                lambda: (
                    response
                    if (
                        response := client.post(
                            "/jobs", json={"type": "invoice", "payload": _INVOICE}
                        )
                    ).status_code
                    == 201
                    else None
                ),
                "the API accepts the published type",
                within=5,
            )
            job = created.json()
            # The handler's options, which only the worker's code declares.
            assert (job["queue"], job["priority"], job["max_attempts"]) == ("billing", 3, 7)
            assert job["unique_key"] is not None

            bad = {**_INVOICE, "ship_to": {"city": "Lyon", "postcode": "6900"}}
            refused = client.post("/jobs", json={"type": "invoice", "payload": bad})
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"].startswith("invalid payload for job type 'invoice': ")
            assert "$.ship_to.postcode" in refused.json()["error"]
            extra = client.post(
                "/jobs", json={"type": "invoice", "payload": {**_INVOICE, "note": "x"}}
            )
            assert extra.status_code == 400, extra.text
            batch = client.post(
                "/jobs/batch",
                json={"jobs": [{"type": "invoice", "payload": {**_INVOICE, "customer": 8}}]},
            )
            assert batch.status_code == 201, batch.text

            listed = {each["name"]: each for each in client.get("/types").json()["types"]}
            invoice = listed["invoice"]
            assert invoice["source"] == "published"
            assert invoice["queue"] == "billing"
            assert invoice["unique"]["by"] == ["customer"]
            assert invoice["description"] == "Send one customer's invoice."
            assert invoice["published_by"].endswith(f":{worker.process.pid}")
            assert invoice["payload_schema"]["$defs"]["Address"]["required"] == [
                "city",
                "postcode",
            ]
            assert listed["sleep"]["source"] == "local"

            document = client.get("/schema/openapi.json").json()
            validate(cast(Any, document))
            body = document["paths"]["/jobs"]["post"]["requestBody"]["content"]
            mapping = body["application/json"]["schema"]["discriminator"]["mapping"]
            assert set(mapping) >= {"invoice", "sleep", "webhook"}
            variant = resolved(document, {"$ref": mapping["invoice"]})
            payload = variant["properties"]["payload"]
            assert payload == {"$ref": "#/components/schemas/invoice.Invoice"}
            schemas = document["components"]["schemas"]
            ship_to = schemas["invoice.Invoice"]["properties"]["ship_to"]
            assert ship_to == {"$ref": "#/components/schemas/invoice.Address"}

            ran = until(
                lambda: client.get(f"/jobs/{job['id']}").json()["status"] == "completed",
                "the worker runs the job",
            )
            assert ran
        assert "Traceback" not in api.errors()
    finally:
        if worker is not None:
            worker.stop()
        api.stop()
