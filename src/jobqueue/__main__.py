"""`python -m jobqueue`: the same as the `jobqueue` command."""

from jobqueue.entrypoints.cli.main import main

raise SystemExit(main())
