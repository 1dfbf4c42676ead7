"""The problems `Settings` refuses an environment with, for the tests of each variable."""

from __future__ import annotations

import pytest

from jobqueue.entrypoints.config.rules import ConfigError
from jobqueue.entrypoints.config.settings import Settings


def problems_of(environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(environ)
    return caught.value.problems
