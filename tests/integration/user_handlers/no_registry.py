"""A handler module that forgot its `registry`: loading it must fail clearly."""

from __future__ import annotations

handlers = {"greet": print}
