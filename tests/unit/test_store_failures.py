"""Driver failures are split into transient (`StoreUnavailable`) and bugs (`StoreError`).

The driver exceptions are asyncpg's own, per SQLSTATE, wrapped by the very functions
SQLAlchemy's asyncpg dialect and engine wrap them with (`_handle_exception_no_connection`
translates, `DBAPIError.instance` wraps), so what is classified here has the shape a real
engine raises; tests/integration/test_store_failures.py raises them through one.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from uuid import uuid4

import asyncpg
import pytest
from sqlalchemy.dialects.postgresql.asyncpg import (
    AsyncAdapt_asyncpg_connection,
    PGDialect_asyncpg,
)
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InvalidRequestError,
    NoResultFound,
    ResourceClosedError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

import jobqueue
from jobqueue.adapters.postgres.failures import (
    classified,
    is_transient,
    reason,
    refused_values,
    sqlstate,
    store_failures,
)
from jobqueue.domain.errors import (
    InvalidJob,
    JobNotFound,
    JobQueueError,
    LeaseLost,
    StoreError,
    StoreUnavailable,
)

_DBAPI = PGDialect_asyncpg.import_dbapi()  # type: ignore[no-untyped-call]
STATEMENT = "INSERT INTO jobs (payload) VALUES ($1::JSONB)"
PARAMETERS = {"payload": '{"token": "hunter2"}'}
E = asyncpg.exceptions


def wrapped(error: Exception, *, invalidated: bool = False) -> DBAPIError:
    """`error` as SQLAlchemy's engine raises it from a statement: the dialect's exception
    (raised from asyncpg's) inside a `DBAPIError` that carries statement and parameters."""
    try:
        AsyncAdapt_asyncpg_connection._handle_exception_no_connection(_DBAPI, error)
    except Exception as translated:
        outer = DBAPIError.instance(
            STATEMENT, PARAMETERS, translated, _DBAPI.Error, connection_invalidated=invalidated
        )
        assert isinstance(outer, DBAPIError)
        outer.__cause__ = translated
        return outer
    raise AssertionError(f"the dialect did not translate {error!r}")


def raised_through_store_failures(error: BaseException) -> BaseException:
    try:
        with store_failures():
            raise error
    except BaseException as raised:
        return raised
    raise AssertionError("store_failures swallowed the error")


# (asyncpg exception, its SQLSTATE) for each transient condition.
TRANSIENT_POSTGRES = [
    (E.ConnectionDoesNotExistError("connection was closed in the middle of operation"), "08003"),
    (E.ConnectionFailureError("connection failure"), "08006"),
    (E.ClientCannotConnectError("cannot connect"), "08001"),
    (E.ProtocolViolationError("unexpected message"), "08P01"),
    (E.AdminShutdownError("terminating connection due to administrator command"), "57P01"),
    (E.CrashShutdownError("terminating connection because of crash of another"), "57P02"),
    (E.CannotConnectNowError("the database system is starting up"), "57P03"),
    (E.QueryCanceledError("canceling statement due to statement timeout"), "57014"),
    (E.IdleSessionTimeoutError("terminating connection due to idle-session timeout"), "57P05"),
    (E.SerializationError("could not serialize access due to concurrent update"), "40001"),
    (E.DeadlockDetectedError("deadlock detected"), "40P01"),
    (E.TooManyConnectionsError("sorry, too many clients already"), "53300"),
    (E.OutOfMemoryError("out of memory"), "53200"),
    (E.DiskFullError("could not extend file: No space left on device"), "53100"),
    (E.LockNotAvailableError("canceling statement due to lock timeout"), "55P03"),
    (E.ReadOnlySQLTransactionError("cannot execute UPDATE in a read-only transaction"), "25006"),
    (E.IdleInTransactionSessionTimeoutError("terminating connection due to idle-in-tx"), "25P03"),
    (E.TransactionTimeoutError("terminating connection due to transaction timeout"), "25P04"),
    (E.InvalidCatalogNameError('database "jobs" does not exist'), "3D000"),
    (E.InvalidPasswordError('password authentication failed for user "jq"'), "28P01"),
]

# Bugs: retrying the same statement is refused the same way.
NOT_TRANSIENT_POSTGRES = [
    (E.PostgresSyntaxError('syntax error at or near "SELEC"'), "42601"),
    (E.UndefinedTableError('relation "jobz" does not exist'), "42P01"),
    (E.UndefinedColumnError('column "queue" does not exist'), "42703"),
    (E.UndefinedFunctionError("function nope() does not exist"), "42883"),
    (E.InsufficientPrivilegeError("permission denied for table jobs"), "42501"),
    (E.InvalidSchemaNameError('schema "jq" does not exist'), "3F000"),
    (E.UniqueViolationError('duplicate key value violates unique constraint "jobs_pkey"'), "23505"),
    (E.NotNullViolationError('null value in column "type" violates not-null'), "23502"),
    (E.ForeignKeyViolationError("insert or update violates foreign key constraint"), "23503"),
    (E.CheckViolationError('new row violates check constraint "ck_jobs_attempts"'), "23514"),
    (E.DivisionByZeroError("division by zero"), "22012"),
    (E.InvalidTextRepresentationError('invalid input syntax for type uuid: "x"'), "22P02"),
    (E.NumericValueOutOfRangeError("integer out of range"), "22003"),
    (E.UntranslatableCharacterError("unsupported Unicode escape sequence"), "22P05"),
    (E.TransactionIntegrityConstraintViolationError("deferred constraint"), "40002"),
    (E.FeatureNotSupportedError("FOR UPDATE is not allowed with aggregate functions"), "0A000"),
    (E.InternalServerError("could not open relation with OID 16384"), "XX000"),
    (E.DataCorruptedError("invalid page in block 0"), "XX001"),
    (E.RaiseError("raised by a trigger"), "P0001"),
]


def _ids(cases: list[tuple[Exception, str]]) -> list[str]:
    return [f"{code}-{type(error).__name__}" for error, code in cases]


@pytest.mark.parametrize(("error", "code"), TRANSIENT_POSTGRES, ids=_ids(TRANSIENT_POSTGRES))
def test_transient_conditions_are_store_unavailable(error: Exception, code: str) -> None:
    assert error.sqlstate == code  # type: ignore[attr-defined]
    for driver_error in (wrapped(error), error):
        assert is_transient(driver_error)
        assert sqlstate(driver_error) == code
        raised = raised_through_store_failures(driver_error)
        assert isinstance(raised, StoreUnavailable)
        assert raised.__cause__ is driver_error
        assert str(raised) == f"the job store failed: {code} {type(error).__name__}: {error}"
        assert is_transient(raised)


@pytest.mark.parametrize(
    ("error", "code"), NOT_TRANSIENT_POSTGRES, ids=_ids(NOT_TRANSIENT_POSTGRES)
)
def test_refused_statements_are_store_errors(error: Exception, code: str) -> None:
    assert error.sqlstate == code  # type: ignore[attr-defined]
    for driver_error in (wrapped(error), error):
        assert not is_transient(driver_error)
        raised = raised_through_store_failures(driver_error)
        assert isinstance(raised, StoreError)
        assert not isinstance(raised, StoreUnavailable)
        assert raised.sqlstate == code
        assert raised.__cause__ is driver_error
        assert str(raised) == (
            f"the job store refused the statement: {code} {type(error).__name__}: {error}"
        )
        assert not is_transient(raised)


# Failures that carry no SQLSTATE: the exception's type (and SQLAlchemy's verdict) decide.
TRANSIENT_WITHOUT_SQLSTATE: list[Callable[[], BaseException]] = [
    # asyncpg refuses to use a connection it knows is closed.
    lambda: asyncpg.InterfaceError("cannot call Connection.fetch(): connection is closed"),
    lambda: wrapped(asyncpg.InterfaceError("cannot call Connection.fetch(): connection is closed")),
    # SQLAlchemy found the connection gone while running the statement: whatever asyncpg said.
    lambda: wrapped(asyncpg.InterfaceError("cannot perform operation"), invalidated=True),
    lambda: wrapped(E.PostgresSyntaxError("while the connection died"), invalidated=True),
    # What a statement right after pg_terminate_backend raises (asyncpg had not yet read
    # the server's goodbye): only SQLAlchemy's verdict says it is a disconnect.
    lambda: wrapped(
        E.InternalClientError("cannot switch to state 11; another operation (2) is in progress"),
        invalidated=True,
    ),
    # The same, from a statement sent on the driver itself (`adapters.postgres.driver`),
    # which invalidates the connection on any failure.
    lambda: E.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    ),
    # A prepared statement or type made stale by a migration: the adapter re-prepares.
    lambda: wrapped(E.InvalidCachedStatementError("cached statement plan is invalid")),
    lambda: E.OutdatedSchemaCacheError("type 'jobs_status' was changed"),
    # asyncpg's client-side command and connect timeouts (asyncio.TimeoutError is this).
    lambda: TimeoutError(),
    # The way to the server.
    lambda: ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
    lambda: ConnectionResetError(104, "Connection reset by peer"),
    lambda: OSError(101, "Network is unreachable"),
    # SQLAlchemy's pool.
    lambda: DisconnectionError("connection invalidated"),
    lambda: PoolTimeout("QueuePool limit of size 5 overflow 5 reached"),
]

NOT_TRANSIENT_WITHOUT_SQLSTATE: list[Callable[[], BaseException]] = [
    # Misuse of a live connection: a bug in how jobqueue drives asyncpg.
    lambda: wrapped(asyncpg.InterfaceError("cannot perform operation: another operation")),
    lambda: asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    lambda: E.InternalClientError("unexpected error while processing"),
    # SQLAlchemy refusing how it was used.
    lambda: InvalidRequestError("This Connection is closed"),
    lambda: ResourceClosedError("This result object does not return rows."),
    lambda: NoResultFound("No row was found when one was required"),
]


@pytest.mark.parametrize("make", TRANSIENT_WITHOUT_SQLSTATE)
def test_transient_failures_without_sqlstate(make: Callable[[], BaseException]) -> None:
    error = make()
    assert is_transient(error)
    raised = raised_through_store_failures(error)
    assert isinstance(raised, StoreUnavailable)
    assert raised.__cause__ is error
    assert str(raised).startswith("the job store failed: ")


@pytest.mark.parametrize("make", NOT_TRANSIENT_WITHOUT_SQLSTATE)
def test_other_driver_failures_without_sqlstate_are_store_errors(
    make: Callable[[], BaseException],
) -> None:
    error = make()
    assert not is_transient(error)
    raised = raised_through_store_failures(error)
    assert isinstance(raised, StoreError)
    assert raised.sqlstate == ""
    assert str(raised).startswith(f"the job store refused the statement: {type(error).__name__}")


@pytest.mark.parametrize(
    "error",
    [
        wrapped(E.UniqueViolationError("duplicate key value violates unique constraint")),
        wrapped(E.AdminShutdownError("terminating connection due to administrator command")),
    ],
    ids=["store-error", "store-unavailable"],
)
def test_neither_the_message_nor_the_logged_traceback_shows_the_parameters(
    error: DBAPIError,
) -> None:
    raised = raised_through_store_failures(error)
    assert "hunter2" not in str(raised)
    assert "INSERT" not in str(raised)
    # The traceback a log line prints has the whole chain: the statement, to find the
    # bug, but not its parameters, which may be a client's payload.
    logged = "".join(traceback.format_exception(raised))
    assert STATEMENT in logged
    assert "hunter2" not in logged
    assert "[SQL parameters hidden" in logged


def test_a_multi_line_driver_message_is_reduced_to_its_first_line() -> None:
    error = E.PostgresSyntaxError('syntax error at or near "SELEC"\nLINE 1: SELEC 1\n        ^')
    raised = raised_through_store_failures(wrapped(error))
    assert str(raised) == (
        "the job store refused the statement: 42601 PostgresSyntaxError: "
        'syntax error at or near "SELEC"'
    )


@pytest.mark.parametrize(
    "error",
    [
        InvalidJob("bad"),
        JobNotFound(uuid4()),
        StoreUnavailable("down"),
        StoreError("refused", "42601"),
        ValueError("not the driver's"),
        KeyError("row"),
        asyncio.CancelledError(),
        KeyboardInterrupt(),
    ],
    ids=lambda error: type(error).__name__,
)
def test_what_is_not_the_drivers_passes_through_unchanged(error: BaseException) -> None:
    assert raised_through_store_failures(error) is error


def test_nested_store_failures_classify_once() -> None:
    driver_error = wrapped(E.SerializationError("could not serialize access"))
    with pytest.raises(StoreUnavailable) as raised, store_failures(), store_failures():
        raise driver_error
    assert raised.value.__cause__ is driver_error


@pytest.mark.parametrize(
    "error",
    [
        E.UntranslatableCharacterError("unsupported Unicode escape sequence"),
        E.CharacterNotInRepertoireError("invalid byte sequence for encoding UTF8: 0x00"),
        E.StringDataRightTruncationError("value too long for type character varying(255)"),
        E.CheckViolationError('new row violates check constraint "ck_jobs_max_attempts"'),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_value_refused_on_submission_is_still_the_clients_invalid_job(error: Exception) -> None:
    # As enqueue() nests them: a 22xxx/23xxx on a submission is the submitter's value.
    with pytest.raises(InvalidJob) as raised, store_failures(), refused_values():
        raise wrapped(error)
    assert str(raised.value).startswith("the job store refused the job: ")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (E.UndefinedTableError('relation "jobz" does not exist'), StoreError),
        (E.AdminShutdownError("terminating connection"), StoreUnavailable),
    ],
    ids=["undefined-table", "admin-shutdown"],
)
def test_refused_values_leaves_the_rest_to_store_failures(
    error: Exception, expected: type[JobQueueError]
) -> None:
    with pytest.raises(JobQueueError) as raised, store_failures(), refused_values():
        raise wrapped(error)
    assert type(raised.value) is expected


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (StoreUnavailable("down"), True),
        (StoreError("refused"), False),
        (InvalidJob("bad"), False),
        (LeaseLost(uuid4(), 1), False),
        (ValueError("not the driver's"), False),
        (RuntimeError("boom"), False),
    ],
    ids=lambda value: type(value).__name__,
)
def test_is_transient_answers_for_domain_errors_too(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_classified_builds_without_raising() -> None:
    error = wrapped(E.DeadlockDetectedError("deadlock detected"))
    built = classified(error)
    assert isinstance(built, StoreUnavailable)
    assert str(built) == "the job store failed: 40P01 DeadlockDetectedError: deadlock detected"


def test_sqlstate_and_reason_read_the_drivers_own_exception() -> None:
    error = wrapped(E.UniqueViolationError('duplicate key value violates unique constraint "k"'))
    assert sqlstate(error) == "23505"
    assert (
        reason(error) == 'UniqueViolationError: duplicate key value violates unique constraint "k"'
    )
    assert sqlstate(ValueError("x")) == ""
    assert reason(TimeoutError()) == "TimeoutError"


def test_store_error_is_public_and_not_a_kind_of_store_unavailable() -> None:
    assert jobqueue.StoreError is StoreError
    assert "StoreError" in jobqueue.__all__
    assert issubclass(StoreError, JobQueueError)
    assert not issubclass(StoreError, StoreUnavailable)
    assert not issubclass(StoreUnavailable, StoreError)
    assert StoreError("refused", "42P01").sqlstate == "42P01"
    assert StoreError("refused").sqlstate == ""
