"""`jobqueue bench` runs of their own, beside the --quick run test_bench_smoke.py's tests
share: --only runs just the scenarios it names, and a role that may not create the
scratch database is refused clearly."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.support.bench_runs import fetch, run_bench, tables
from tests.support.postgres import Server


@pytest.mark.slow
def test_only_runs_the_scenarios_it_names(postgres_server: Server, tmp_path: Path) -> None:
    output = tmp_path / "chain.json"

    result = run_bench(postgres_server.url, "--only", "chain", "--json", str(output))

    assert result.returncode == 0, result.stderr
    report = json.loads(output.read_text())
    assert set(report["metrics"]) == {"graph.chain", "graph.chain.hop"}
    assert report["settings"]["scenarios"] == ["chain"]
    assert "Start-up" not in result.stdout
    assert "Dependencies, a job's end → its dependent's start" in result.stdout


@pytest.fixture
def role_without_createdb(postgres_server: Server) -> Iterator[str]:
    """A URL for a login role that may connect but not create databases."""
    name = f"jq_bench_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    try:
        fetch(postgres_server.url, f"CREATE ROLE {name} LOGIN NOCREATEDB PASSWORD '{password}'")
    except asyncpg.InsufficientPrivilegeError:
        # Only a TEST_DATABASE_URL can lack it; a skip would pass this test untested.
        pytest.fail(
            "the test server's role may not create roles: TEST_DATABASE_URL needs CREATEROLE",
            pytrace=False,
        )
    url = make_url(postgres_server.url).set(username=name, password=password)
    yield url.render_as_string(hide_password=False)
    fetch(postgres_server.url, f"DROP ROLE {name}")


@pytest.mark.slow
def test_refuses_clearly_when_it_cannot_create_a_scratch_database(
    postgres_server: Server, role_without_createdb: str
) -> None:
    before = tables(postgres_server.url)

    result = run_bench(role_without_createdb)

    assert result.returncode == 1
    assert "cannot create a scratch database" in result.stderr
    assert "permission denied" in result.stderr
    assert tables(postgres_server.url) == before
