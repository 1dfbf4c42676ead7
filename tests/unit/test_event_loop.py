"""The service's event loop: uvloop's where it is installed (a dependency off Windows)."""

from __future__ import annotations

import sys

import pytest

from jobqueue.entrypoints.cli.main import _event_loop_factory


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not a dependency on Windows")
def test_the_service_runs_on_uvloop() -> None:
    factory = _event_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
