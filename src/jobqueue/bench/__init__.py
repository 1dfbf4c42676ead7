"""`jobqueue bench`: the benchmark of docs/design.md "Performance", a command users run
against their own PostgreSQL (`command.py` is its entry, `runner.py` the order of the runs).

Worker start-up (spawn to first handler call); enqueue throughput in-process (one job per
call, many per transaction, `enqueue_many`) and over HTTP to a `jobqueue api` process;
drain throughput of no-op jobs in in-process pools and in 1, 2, 4 `jobqueue worker`
processes, with their CPU time; pickup latency in-process and into a worker process; and
the in-process drains and pickups again with many jobs scheduled for later, then with many
finished rows, in the table. It runs in a scratch database it creates and drops, so it
never touches anyone's jobs.

Nothing here is imported by the other commands: `jobqueue worker`'s start-up is measured.
"""
