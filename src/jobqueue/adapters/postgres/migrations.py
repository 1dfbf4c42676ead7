"""Run Alembic from code: `jobqueue migrate`, `jobqueue serve` and the tests.

The revisions live in the project's top-level `migrations/`; a built wheel carries a copy
as `jobqueue/_migrations`, so an installed package can migrate without the source tree.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from jobqueue.adapters.postgres.schema_version import migrations_dir


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("path_separator", "os")
    config.attributes["url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to `revision`. Blocking (Alembic runs its own event loop):
    call it from a thread when inside one."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)
