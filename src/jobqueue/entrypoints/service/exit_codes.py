"""What the `jobqueue` command's exit status means (also listed in `jobqueue --help`)."""

from __future__ import annotations

OK = 0
FAILED = 1  # could not start: the database, the port, a handler module
USAGE = 2  # invalid configuration or command line
FORCED = 130  # 128 + SIGINT, what shells report for an interrupted command
