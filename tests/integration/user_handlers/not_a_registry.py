"""A handler module whose `registry` is not a jobqueue.Registry: loading it must fail
clearly."""

from __future__ import annotations

registry = {"greet": print}
