"""The reproducible benchmark of docs/design.md "Performance": `python -m bench`.

Worker start-up (spawn to first handler call), enqueue throughput (one job per call, and
many per transaction), drain throughput of no-op jobs, pickup latency with and without
`WorkerPool.wake()`, and the drain and pickup runs again with many finished rows in the
table. It runs against a scratch database it creates and drops, so it never touches
anyone's jobs.
"""
