"""A process imports only what its command uses (issue 10, "Imports on demand"), read
from `python -X importtime`, which writes one stderr line per module a process imports:

    import time: self [us] | cumulative | imported package

A `jobqueue worker` without a metrics listener that does not migrate runs a job with no
Litestar, uvicorn or Alembic module loaded; `import jobqueue` loads no adapter stack."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import asyncpg
import pytest

from tests.support.postgres import dsn
from tests.support.processes import JOBQUEUE, REPO_ROOT, environment

DEADLINE_SECONDS = 90.0
STOP_SECONDS = 60.0
STATUS = "SELECT status FROM jobs WHERE id = $1"

# The HTTP server stack, migrations, the HTTP client (only webhook jobs need it, loaded by
# the first), the tracing SDK (tracing is off) and Prometheus (no listener serves it):
# none is needed to run a sleep job.
HTTP_AND_MIGRATIONS = (
    "litestar",
    "uvicorn",
    "alembic",
    "httpx",
    "opentelemetry.sdk",
    "prometheus_client",
)
ADAPTER_STACK = (
    "sqlalchemy",
    "asyncpg",
    "litestar",
    "uvicorn",
    "alembic",
    "opentelemetry.sdk",
    "prometheus_client",
)


@dataclass(frozen=True)
class Imported:
    name: str
    depth: int  # 0: imported by the program itself; n + 1: by a module at depth n


def imports(stderr: str) -> list[Imported]:
    """The `-X importtime` lines of `stderr`, in the order printed: a module's line comes
    after those of the modules it imported, indented two spaces deeper than its own."""
    found = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        column = line.rsplit("|", 1)[-1]
        name = column.strip()
        if name != "imported package":  # the header line
            found.append(Imported(name, (len(column) - len(column.lstrip()) - 1) // 2))
    return found


def _inside(name: str, roots: Iterable[str]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


def under(found: list[Imported], roots: Iterable[str]) -> list[str]:
    """The modules that are one of `roots` or inside one (`litestar.app` is in
    `litestar`), sorted, each once."""
    return sorted({each.name for each in found if _inside(each.name, roots)})


def importers(found: list[Imported], roots: Iterable[str]) -> list[str]:
    """The modules outside `roots` that imported one inside them: what to look at first."""
    culprits = set()
    for index, each in enumerate(found):
        if not _inside(each.name, roots):
            continue
        parent = next((later for later in found[index + 1 :] if later.depth < each.depth), None)
        if parent is not None and not _inside(parent.name, roots):
            culprits.add(parent.name)
    return sorted(culprits)


def other_output(stderr: str) -> str:
    """stderr without the import lines: what the process itself had to say."""
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("import time:"))


def test_import_lines_are_read_with_their_nesting_and_filtered_by_package() -> None:
    stderr = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:        80 |         80 |     litestar.app\n"
        "import time:       120 |        200 |   litestar\n"
        "import time:        20 |         20 |   litestar_helpers\n"
        "import time:        30 |         30 |   uvicorn\n"
        "import time:        30 |         30 |   uvicorn\n"
        "import time:        10 |        290 | jobqueue.entrypoints.service.compose\n"
        "a warning\n"
    )

    found = imports(stderr)

    assert [(each.name, each.depth) for each in found][:3] == [
        ("litestar.app", 2),
        ("litestar", 1),
        ("litestar_helpers", 1),
    ]
    assert under(found, ["litestar", "uvicorn"]) == ["litestar", "litestar.app", "uvicorn"]
    assert importers(found, ["litestar", "uvicorn"]) == ["jobqueue.entrypoints.service.compose"]
    assert other_output(stderr) == "a warning"


async def _execute(database_url: str, query: str, *args: object) -> object:
    connection = await asyncpg.connect(dsn(database_url))
    try:
        return await connection.fetchval(query, *args)
    finally:
        await connection.close()


def fetch_value(database_url: str, query: str, *args: object) -> object:
    return asyncio.run(_execute(database_url, query, *args))


def pending_sleep_job(database_url: str) -> UUID:
    """A due job of the built-in `sleep` handler, written straight into the table."""
    job_id = fetch_value(
        database_url,
        "INSERT INTO jobs (type, payload, max_attempts)"
        """ VALUES ('sleep', '{"duration": "1ms"}'::jsonb, 1) RETURNING id""",
    )
    assert isinstance(job_id, UUID)
    return job_id


def wait_until_completed(
    database_url: str, job_id: UUID, process: subprocess.Popen[bytes], stderr: Path
) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (status := fetch_value(database_url, STATUS, job_id)) != "completed":
        if process.poll() is not None:
            raise AssertionError(
                f"the worker exited with {process.returncode} before its job completed "
                f"(status {status}):\n{other_output(stderr.read_text())}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the job was {status} after {DEADLINE_SECONDS:g}s:\n"
                f"{other_output(stderr.read_text())}"
            )
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_SECONDS)


@pytest.mark.slow
def test_a_worker_on_a_migrated_database_runs_a_job_without_http_or_alembic(
    database_url: str, tmp_path: Path
) -> None:
    job_id = pending_sleep_job(database_url)
    stdout, stderr = tmp_path / "worker.stdout.log", tmp_path / "worker.stderr.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        # The `jobqueue` command itself, run by this interpreter under -X importtime.
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", str(JOBQUEUE), "worker"],
            cwd=REPO_ROOT,
            # AUTO_MIGRATE on (the default): the schema is current, so Alembic stays unloaded.
            env=environment(DATABASE_URL=database_url, METRICS_ADDR="off", AUTO_MIGRATE="true"),
            stdout=out,
            stderr=err,
        )
    try:
        wait_until_completed(database_url, job_id, process, stderr)
    finally:
        stop(process)

    found = imports(stderr.read_text())
    # The lines are the worker's own imports, from its entry point on.
    assert "jobqueue.entrypoints.cli.main" in {each.name for each in found}
    loaded = under(found, HTTP_AND_MIGRATIONS)
    assert loaded == [], (
        f"the worker imported {len(loaded)} modules of {', '.join(HTTP_AND_MIGRATIONS)} "
        f"that it does not use, through {importers(found, HTTP_AND_MIGRATIONS)}: {loaded}"
    )
    assert process.returncode == 0, other_output(stderr.read_text())


def test_importing_the_public_package_loads_no_adapter_stack() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import jobqueue"],
        cwd=REPO_ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, other_output(result.stderr)
    found = imports(result.stderr)
    assert "jobqueue" in {each.name for each in found}
    loaded = under(found, ADAPTER_STACK)
    assert loaded == [], (
        f"`import jobqueue` imported {len(loaded)} modules of {', '.join(ADAPTER_STACK)}, "
        f"through {importers(found, ADAPTER_STACK)}: {loaded}"
    )
