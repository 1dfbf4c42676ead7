"""The pool's settings refuse values it cannot work with, and warn about risky ones."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.pool_harness import config


@pytest.mark.parametrize(
    "changes",
    [
        {"workers": 0},
        {"job_timeout": timedelta(0)},
        {"lease_duration": timedelta(seconds=-1)},
        {"poll_interval": timedelta(0)},
        {"outcome_timeout": timedelta(0)},
        {"shutdown_timeout": timedelta(seconds=-1)},
    ],
)
def test_nonsense_settings_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"must|cannot"):
        config(**changes)
