"""The user documents: the README and the guide's pages (docs/), less the design notes,
which are for contributors and name internal modules by design."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DESIGN = ROOT / "docs" / "design.md"
USER_DOCUMENTS = [README, *sorted(set((ROOT / "docs").glob("*.md")) - {DESIGN})]

# What starts a passage of its own: a blank line, a heading, a list item, a table row.
_BREAK = re.compile(r"\s*$|#{1,6} |\s*(?:[-*+]|\d+\.) |\s*\|")
_FENCE = re.compile(r"\s*```")


def passages(text: str) -> list[str]:
    """`text` cut into its paragraphs, list items and table rows, and a code block's
    lines each alone, so that what a test finds in one passage was said together."""
    found: list[list[str]] = []
    fenced = False
    for line in text.splitlines():
        fence = _FENCE.match(line) is not None
        if fenced or fence or not found or _BREAK.match(line):
            found.append([])
        found[-1].append(line)
        fenced ^= fence
    return ["\n".join(lines) for lines in found if "".join(lines).strip()]
