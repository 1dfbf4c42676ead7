"""Which release of jobqueue this is: shown by `--version`, in the OpenAPI document and
on every trace's resource."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("jobqueue")
    except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        return "0+unknown"
