"""What a call to the service can fail with: one exception per status the service sends,
each carrying its `{"error": "…"}` message, and one for a service that could not be
reached."""

from __future__ import annotations

from jobqueue.domain.errors import JobQueueError


class ClientError(JobQueueError):
    """Base of the client's errors."""


class InvalidClientOption(ClientError, ValueError):
    """A client made with what it could never send: a token an `Authorization` header
    cannot carry (a placeholder such as "…" left in, a line break), or a URL that is not
    http(s). Raised when the client is made, not at its first call."""


class ServiceUnreachable(ClientError):
    """No answer: the connection failed or broke, and retrying (where it was safe) did not
    help. The request may or may not have been acted on, unless it was a submission: those
    carry an Idempotency-Key, so submitting again is safe (but for jobs that depend on
    each other, which take none: the message then says it may have been carried out)."""


class UnexpectedAnswer(ClientError):
    """A success status whose body is not the record the call expects: the URL is not a
    jobqueue service's API (another server, a proxy's page), or one whose records differ
    from this client's."""


class ApiError(ClientError):
    """The service answered with an error status."""

    def __init__(self, status: int, message: str, request_id: str | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        # The X-Request-ID of the answer: what the operator finds the log lines by.
        self.request_id = request_id


class BadRequest(ApiError):
    """400: the request can never succeed as sent; the message says what to change."""


class Unauthorized(ApiError):
    """401: no bearer token, or not one the service accepts."""


class NotFound(ApiError):
    """404: no such job or workflow (or route)."""


class MethodNotAllowed(ApiError):
    """405: the path has no route for the method."""


class Conflict(ApiError):
    """409: an Idempotency-Key reused with another request, or a job not in a state the
    operation acts on (cancel a finished job, retry a pending one), or a unique key held."""


class RequestTimeout(ApiError):
    """408: the request did not reach the service whole within its read timeout."""


class PayloadTooLarge(ApiError):
    """413: the body exceeds the service's MAX_BODY_BYTES."""


class ServerError(ApiError):
    """500: a failure of the service's own; quote `request_id` to its operator."""


class Unavailable(ApiError):
    """503: the service's database is unavailable, and retrying did not outlast it."""


# The statuses with an exception of their own; any other error status is an `ApiError`.
BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    405: MethodNotAllowed,
    408: RequestTimeout,
    409: Conflict,
    413: PayloadTooLarge,
    500: ServerError,
    503: Unavailable,
}
