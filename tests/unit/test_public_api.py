"""The public API: what `jobqueue` exports is importable, and the README uses only it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import jobqueue
from jobqueue.adapters.telemetry import trace_context
from jobqueue.entrypoints import producer

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize("name", jobqueue.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(jobqueue, name) is not None


def test_names_loaded_on_demand_are_the_producer_entry_point_s_own() -> None:
    assert jobqueue.enqueue is producer.enqueue
    assert jobqueue.enqueue_many is producer.enqueue_many
    assert jobqueue.current_traceparent is trace_context.current_traceparent


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'enqueue_all'"):
        _ = jobqueue.enqueue_all  # type: ignore[attr-defined]


def test_readme_code_imports_only_the_public_api() -> None:
    # Internal modules may change between releases; what users copy must not reach them.
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README shows no Python code"
    internal = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        # `jobqueue.client` is public too: the client of the HTTP API.
        if re.match(r"\s*(from|import)\s+jobqueue\.", line)
        and not re.match(r"\s*(from|import)\s+jobqueue\.client\b", line)
    ]
    assert internal == []
    mentioned = {
        name.strip()
        for block in blocks
        for found in re.findall(r"from jobqueue import ([^\n]+)", block)
        for name in found.strip("()").split(",")
    }
    assert mentioned <= set(jobqueue.__all__)
