"""Knowing without Alembic that a database is already migrated (`schema_version`), so that
a worker starting against one does not load Alembic at all."""

from __future__ import annotations

import asyncio

from alembic.script import ScriptDirectory

from jobqueue.adapters.postgres.migrations import alembic_config, downgrade, upgrade
from jobqueue.adapters.postgres.schema_version import head_revisions, is_current


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
