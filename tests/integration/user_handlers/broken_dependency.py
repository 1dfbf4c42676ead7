"""A handler module whose own import fails: the error must not read as "not found"."""

from __future__ import annotations

import jobqueue_test_dependency_that_does_not_exist  # type: ignore[import-not-found]  # noqa: F401

from jobqueue import Registry

registry = Registry()
