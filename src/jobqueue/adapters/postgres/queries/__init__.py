"""Every SQL statement of the store, one module per table, each statement named for what it
does and written as SQL (`statement.Statement`). Where a statement's shape depends on the
request (which status a listing reads, which filters it has), a function builds its text
from fixed pieces, once per shape: nothing a client sent is ever part of the SQL, only of
its parameters."""
