"""A handler module whose `registry` has no handler on it (they were meant to be
registered in a module it never imports): loading it must fail clearly."""

from __future__ import annotations

from jobqueue import Registry

registry = Registry()
