"""How a revision takes its locks on the tables every worker reads or writes (`jobs`,
`queues`): loaded by path by the revisions that use it (`runpy`, as the revisions are
not a package). Only how the locks are taken lives here, never what a revision changes,
so that no edit here can change what a revision means.

A lock request that waits holds every later statement on its table back while it waits:
behind a long transaction, for as long as that lasts; behind autovacuum, for
`deadlock_timeout` (1 s by default) before autovacuum gives way. So a revision's locks
are tried 50 ms at a time, with a pause between, up to 200 times; then the migration
fails, to be run again once whatever held the table is gone.
"""

from __future__ import annotations


def briefly(*statements: str) -> str:
    """`statements` as one transaction (one DO block), each lock they take tried for 50 ms
    at a time; the session's lock_timeout is put back after. Within a migration's own
    transaction, the locks are then held until it commits, as any statement's would."""
    body = ";\n".join(statements)
    return f"""
DO $briefly$
DECLARE
    previous text := current_setting('lock_timeout');
BEGIN
    FOR attempt IN 1..200 LOOP
        BEGIN
            SET LOCAL lock_timeout = '50ms';
            {body};
            PERFORM set_config('lock_timeout', previous, true);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.02 + 0.08 * random());
        END;
    END LOOP;
    RAISE EXCEPTION 'a table stayed locked by others for 200 tries: migrate again later';
END
$briefly$
"""
