"""`python -m jobqueue`: the same as the `jobqueue` command."""

from jobqueue.entrypoints.cli import main

raise SystemExit(main())
