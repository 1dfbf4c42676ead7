"""A pipeline of three steps and a report on it, for the workflow tests (`--handlers
tests.integration.workflow_handlers`): each step reads what the one before returned from
`ctx.dependencies`; the report, a callback, says how each of its dependencies ended."""

from __future__ import annotations

from typing import Any

from jobqueue import JobContext, Permanent, Registry

MODULE = "tests.integration.workflow_handlers"

registry = Registry()


@registry.handler("fetch")
async def fetch(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"rows": payload["rows"]}


@registry.handler("transform")
async def transform(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    rows = 0
    for dependency in await ctx.dependencies():
        assert isinstance(dependency.result, dict)
        rows += int(dependency.result["rows"])  # type: ignore[arg-type]
    most = int(payload.get("most", 1000))
    if rows > most:
        raise Permanent(f"{rows} rows, more than {most}")
    return {"rows": rows * 2}


@registry.handler("report")
async def report(ctx: JobContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": dependency.type,
            "status": dependency.status,
            "completed": dependency.completed,
            "result": dependency.result,
            "error": dependency.error,
        }
        for dependency in await ctx.dependencies()
    ]
