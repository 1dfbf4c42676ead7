"""The README's links lead somewhere: the files it names exist, and the headings it points
at (in itself or in the guide's pages under docs/) are there, as MkDocs and GitHub name
them. The guide's own links are checked by its strict build (`make docs`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(document: Path) -> set[str]:
    """The anchors of a Markdown document's headings (outside code blocks)."""
    found: set[str] = set()
    fenced = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.add(slugify(line.lstrip("#").strip().replace("`", ""), "-"))
    return found


def local_links() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [
        target
        for target in _LINK.findall(text)
        if not re.match(r"[a-z]+:", target)  # http:, https:, mailto:
    ]


def test_the_readme_links_to_the_guide() -> None:
    assert any(target.startswith("docs/") for target in local_links())


@pytest.mark.parametrize("target", sorted(set(local_links())))
def test_a_readme_link_leads_to_a_file_and_heading_that_exist(target: str) -> None:
    path, _, anchor = target.partition("#")
    document = ROOT / path if path else README
    assert document.exists(), f"{target}: no such file"
    if anchor:
        assert anchor in anchors(document), f"{target}: no such heading in {document.name}"
