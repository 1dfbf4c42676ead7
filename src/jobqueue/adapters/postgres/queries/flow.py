"""The flow-control parts of a claim of a queue with limits of the whole queue
(`claims.LIMITED_CLAIM`, `claims.LIMITED_KEYED_CLAIM` and their `RECORD_AND_` forms): how
many jobs the queue's limits let it take, and what it leaves behind for the next one.

A queue with a limit (`queues.concurrency`, `queues.rate_limit` per `rate_period`) is
claimed one claim at a time: once it has locked the due jobs it may take (SKIP LOCKED,
outside the turn: `claims._due`), the claim takes the queue's turn
(`jobqueue_take_turn`, migration 0020): it locks the queue's row, so claims of that
queue across every process take turns from there to their commit, and none of them
counts while another takes; it then takes as many of its locked jobs as the limits
allow, in order, and the rest go back to pending untouched at its commit. A queue
without limits is not locked, nor is one when nothing is due.

The turn is a PL/pgSQL function rather than CTEs of the statement: its statements are
planned once per connection, not with every claim (the CTEs were a third of a limited
claim's planning), and the row's lock is held for less.

Concurrency: a slot is a running job itself (status `processing`), counted in
ix_jobs_running_by_queue, so a killed process's slots come back with its leases, and
nothing can go stale. A statement sees the table as of its start, though, and a claim
that waited for the lock would not see the jobs the claims before it took meanwhile: the
function counts them with a statement of its own (`jobqueue_running_jobs`), so with a
snapshot taken after the lock. The jobs this same statement ends are still processing in
that snapshot (a statement never sees its own writes): they are left out by id, freeing
their slots for its claim.

Rate: the queue's row keeps the starts within the last period, a time and a count per
claim (`starts`, `start_counts`: a claim's jobs start at one instant), stamped after the
lock, so in the order claims took turns; a claim takes at most what the window has left,
and every window of the period holds at most the limit. Per claim, not per job: the row
holds at most 32 entries, however high the rate (`jobqueue_record_starts`). Written only
when something changed, so that an idle queue's polls write nothing, and a queue with a
concurrency limit alone is never written by its claims.
"""

from __future__ import annotations


def turn(ending: str, due: str, *, record: bool) -> str:
    """`allowance`: the claim's turn of the queue (`jobqueue_take_turn`): `n`, how many
    jobs it may take (`:limit` when the queue has no limits of its own, or nothing is
    due), what each limit had left, and `stamp`, its starts' time (NULL without a turn).
    `ending`: the ids of the jobs this same statement ends (an `uuid[]` expression),
    which free their slots for its claim; `due`: how many jobs it has due, or any
    positive number when it does not know yet; `record`: write the starts of those it
    will take now (else `RECORD` does, once the statement knows)."""
    return f"""
    allowance AS MATERIALIZED (
        SELECT * FROM jobqueue_take_turn(
            :queue, CAST(:limit AS integer), {ending}, CAST({due} AS integer),
            {"true" if record else "false"}
        )
    ),
    """


# When the claimed jobs start: at the turn's stamp, the rate's clock, if the claim took
# a turn.
STARTED = "coalesce((SELECT stamp FROM allowance), now())"


def record(latest: str) -> str:
    """The starts of the jobs claimed, written into the rate's window after the claim,
    for a statement that knew them only then (`turn(record=False)`); joined into its
    answer, as a CTE that is not read is not run. Stamped at the turn's stamp, or
    `latest`, the latest time a job it took started at, if later (a key rate's stamp:
    a window must not let a start out before the job's `started_at` leaves it)."""
    return f"""
    recorded AS MATERIALIZED (
        SELECT jobqueue_record_starts(
            :queue, greatest(allowance.stamp, {latest}),
            CAST((SELECT count(*) FROM claimed) AS integer)
        )
        FROM allowance WHERE allowance.stamp IS NOT NULL
    )
    """
