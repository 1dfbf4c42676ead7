"""The handlers a process runs: the built-in ones plus the `registry` of every configured
handler module (JOBQUEUE_HANDLERS, `--handlers`)."""

from __future__ import annotations

import importlib
import os
import sys

from jobqueue.adapters.handlers import builtin_registry
from jobqueue.domain.registry import Registry
from jobqueue.entrypoints.config.settings import Settings
from jobqueue.entrypoints.service.runtime import StartupError


def build_registry(settings: Settings) -> Registry:
    """The built-in handlers (unless BUILTIN_HANDLERS=false) plus the `registry` of every
    configured handler module."""
    registry = (
        builtin_registry(webhook_allow_private=settings.webhook_allow_private)
        if settings.builtin_handlers
        else Registry()
    )
    for module_name in settings.handler_modules:
        try:
            registry.include(load_handlers(module_name))
        except ValueError as error:
            raise StartupError(f"handler module {module_name!r}: {error}") from None
    return registry


def load_handlers(module_name: str) -> Registry:
    """The module-level `registry` of `module_name`, importable from the working directory
    like the application's own code."""
    _make_working_directory_importable()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        # Only the module itself (or a package on its path) missing means "not found";
        # a dependency it imports being absent is a failure inside the module.
        if module_name == missing or module_name.startswith(missing + "."):
            raise StartupError(
                f"handler module {module_name!r} was not found (is its package installed, "
                "or on PYTHONPATH?)"
            ) from None
        raise StartupError(f"handler module {module_name!r} failed to import: {error}") from error
    except Exception as error:
        raise StartupError(
            f"handler module {module_name!r} failed to import: {type(error).__name__}: {error}"
        ) from error
    registry = getattr(module, "registry", None)
    if isinstance(registry, Registry) and (len(registry) or registry.periodic_jobs()):
        return registry
    # Where the module was found: `--handlers json` finds the standard library's.
    where = f"{module_name!r} ({getattr(module, '__file__', None) or 'a namespace package'})"
    if registry is None:
        found = "defines no `registry`"
    elif isinstance(registry, Registry):
        found = "registers no handler on its `registry`"
    else:
        found = f"defines `registry` as a {type(registry).__name__}, not a jobqueue.Registry"
    raise StartupError(
        f"handler module {where} {found}. A handler module defines, at module level, "
        "`registry = jobqueue.Registry()` and registers each job type's handler on it "
        '(`@registry.handler("send_email")` on an `async def send_email(ctx, payload)`)'
    )


def _make_working_directory_importable() -> None:
    # A console script's sys.path starts with its bin/ directory, not the working
    # directory; uvicorn resolves `module:app` from the working directory too. Kept for
    # the process's life: a handler module may import its siblings lazily.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
