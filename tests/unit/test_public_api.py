"""The public API: what `jobqueue` exports is importable, and the README and the user guide
use only it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import jobqueue
from jobqueue.adapters.telemetry import trace_context
from jobqueue.entrypoints import producer
from tests.support.documents import README, USER_DOCUMENTS


@pytest.mark.parametrize("name", jobqueue.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(jobqueue, name) is not None


def test_names_loaded_on_demand_are_the_producer_entry_point_s_own() -> None:
    assert jobqueue.enqueue is producer.enqueue
    assert jobqueue.enqueue_many is producer.enqueue_many
    assert jobqueue.current_traceparent is trace_context.current_traceparent


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'enqueue_all'"):
        _ = jobqueue.enqueue_all


def python_blocks(document: Path) -> list[str]:
    """The Python code blocks of a Markdown document, also those indented in a list."""
    text = document.read_text(encoding="utf-8")
    found = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.DOTALL | re.MULTILINE)
    return [re.sub(rf"(?m)^{indent}", "", block) for indent, block in found]


def test_the_readme_and_the_guide_show_python_code() -> None:
    assert python_blocks(README), "the README shows no Python code"
    assert len(USER_DOCUMENTS) > 1, "no page of the guide found in docs/"


@pytest.mark.parametrize("document", USER_DOCUMENTS, ids=lambda path: path.name)
def test_documented_code_imports_only_the_public_api(document: Path) -> None:
    # Internal modules may change between releases; what users copy must not reach them.
    blocks = python_blocks(document)
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
