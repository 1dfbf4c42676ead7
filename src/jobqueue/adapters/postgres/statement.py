"""A SQL statement as the queries modules declare it: its name, and its text with `:name`
parameters, readable as SQL.

The same statement is sent two ways. On a caller's SQLAlchemy connection (in-process
enqueue, inside the caller's transaction) it is a `text()` clause, which SQLAlchemy binds.
Everywhere else it goes straight to asyncpg on a pooled connection (`driver.fetch`), with
its parameters numbered `$1, $2, …` here, once: the statements the worker sends many
times a second cost less client CPU that way than the round trip they make, and the rest
lose nothing by it.

Parameters are found as SQLAlchemy's `text()` finds them (a colon, then a name, not part
of a `::` cast), so both ways see the same ones. A parameter whose type PostgreSQL cannot
infer from where it stands (an argument of `unnest`, of `+`) is written `CAST(:name AS
type)`: the statements never rely on a driver's guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from textwrap import dedent
from typing import Any

from sqlalchemy import TextClause, text

# As `sqlalchemy.sql.elements.TextClause` reads bind parameters.
_PARAMETER = re.compile(r"(?<![:\w\x5c]):(\w+)(?!:)")


class Statement:
    """One named SQL statement with `:name` parameters."""

    __slots__ = ("clause", "name", "numbered", "parameters", "sql")

    def __init__(self, name: str, sql: str) -> None:
        self.name = name
        self.sql = dedent(sql).strip()
        order: dict[str, int] = {}

        def numbered(match: re.Match[str]) -> str:
            return f"${order.setdefault(match.group(1), len(order) + 1)}"

        # For asyncpg: `$n`, one number per name however often it appears.
        self.numbered = _PARAMETER.sub(numbered, self.sql)
        self.parameters = tuple(order)
        # For a SQLAlchemy connection.
        self.clause: TextClause = text(self.sql)

    def arguments(self, values: Mapping[str, Any]) -> list[Any]:
        """The positional arguments of `numbered` for `values`, keyed by parameter name."""
        try:
            return [values[name] for name in self.parameters]
        except KeyError as error:
            raise TypeError(f"statement {self.name}: no value for :{error.args[0]}") from None

    def __repr__(self) -> str:
        return f"Statement({self.name!r})"
