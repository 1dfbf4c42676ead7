"""Knowing without Alembic that a database is already migrated (`schema_version`), so that
a worker starting against one does not load Alembic at all."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading

from alembic.script import ScriptDirectory

from jobqueue.adapters.postgres.migrations import alembic_config, downgrade, upgrade
from jobqueue.adapters.postgres.schema_version import head_revisions, is_current
from tests.support.processes import JOBQUEUE, REPO_ROOT, environment


def test_the_heads_read_from_the_files_are_alembics() -> None:
    script = ScriptDirectory.from_config(alembic_config("postgresql://unused/none"))
    assert head_revisions() == frozenset(script.get_heads())


async def test_a_database_is_current_only_at_the_newest_revision(empty_database_url: str) -> None:
    url = empty_database_url
    assert not await is_current(url)  # no alembic_version table at all

    await asyncio.to_thread(upgrade, url, "0002")
    assert not await is_current(url)

    await asyncio.to_thread(upgrade, url)
    assert await is_current(url)

    await asyncio.to_thread(downgrade, url, "0001")
    assert not await is_current(url)


async def test_an_unreachable_database_is_not_current() -> None:
    # Port 9 (discard) on loopback: refused at once. The migration run then reports why.
    assert not await is_current("postgresql://nobody@127.0.0.1:9/none")


async def test_a_service_that_does_not_migrate_warns_when_the_schema_is_behind(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    await asyncio.to_thread(upgrade, url, "0003")
    warned = "the database schema is not at this version's migrations"

    def worker_log() -> str:
        # Stopped by SIGINT once the warning (or anything else) had its time to appear.
        process = subprocess.Popen(
            [str(JOBQUEUE), "worker", "--handlers", "tests.integration.fault_handlers"],
            cwd=REPO_ROOT,
            env=environment("worker", DATABASE_URL=url, AUTO_MIGRATE="false"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        # Bounded: were neither line ever logged, the read below would wait forever.
        killer = threading.Timer(60, process.kill)
        killer.start()
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "jobqueue worker running" in line or warned in line or "ERROR" in line:
                break
        process.send_signal(signal.SIGINT)
        lines.append(process.communicate(timeout=60)[0])
        killer.cancel()
        return "".join(lines)

    assert warned in await asyncio.to_thread(worker_log)
    await asyncio.to_thread(upgrade, url)
    assert warned not in await asyncio.to_thread(worker_log)
