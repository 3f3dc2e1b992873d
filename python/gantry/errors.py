"""gantry.errors - the exceptions the client raises.

Every refusal of the API is an :class:`ApiError` carrying what the server said
(``{"error": {"code", "message", "field"}}``, docs/errors.md) and the HTTP status; a
subclass per status lets a caller catch what it can handle."""


class GantryError(Exception):
    """The base of every exception of this package."""


class ApiError(GantryError):
    """The API answered with an error.

    Attributes: ``status`` (the HTTP status), ``code`` (the API's code, e.g.
    ``invalid_field``), ``message`` (its message), ``field`` (the request's field it names, e.g.
    ``spec.graph.ops[3].compute_us``, or None), ``retry_after`` (seconds, from ``Retry-After``, or None)."""

    def __init__(self, status, code, message, field=None, retry_after=None):
        self.status, self.code, self.message, self.field, self.retry_after = status, code, message, field, retry_after
        where = f" ({field})" if field else ""
        super().__init__(f"{status} {code}: {message}{where}")


class BadRequest(ApiError):
    """400 (and 411, 413, 415, 422): the request or a field of it is invalid; ``field`` names it."""


class Unauthorized(ApiError):
    """401: no token, an unknown, revoked or expired one."""


class Forbidden(ApiError):
    """403: the token's role may not do this."""


class NotFound(ApiError):
    """404: no such job, model or route (another tenant's job is a 404 too)."""


class Conflict(ApiError):
    """409: the resource is not in a state that allows this (cancel a finished job, ...)."""


class RateLimited(ApiError):
    """429: over the token's rate limit or the tenant's ``max_queued``; ``retry_after`` says when to retry."""


class ServerError(ApiError):
    """5xx: the server could not do it (503: busy or not ready, 504: a prediction timed out)."""


class ConnectionFailed(GantryError):
    """The server could not be reached (after the client's retries)."""


class WaitTimeout(GantryError, TimeoutError):
    """A wait (:meth:`gantry.Client.wait`, :meth:`gantry.Client.wait_ready`) ran out of time; ``job`` is the last
    state seen (a dict, or None)."""

    def __init__(self, message, job=None):
        super().__init__(message)
        self.job = job


class IntegrityError(GantryError):
    """A file's SHA-256 or size differs from what the server lists (a download) or recorded (an upload)."""


_BY_STATUS = {400: BadRequest, 411: BadRequest, 413: BadRequest, 415: BadRequest, 422: BadRequest,
              401: Unauthorized, 403: Forbidden, 404: NotFound, 405: NotFound, 409: Conflict, 429: RateLimited}


def from_response(status, body, retry_after=None):
    """the ApiError for an error answer: status and its body (bytes)"""
    import json
    code, message, field = "http_%d" % status, "", None
    try:
        err = json.loads(body.decode("utf-8", "replace"))["error"]
        code, message, field = err.get("code") or code, err.get("message") or "", err.get("field")
    except (ValueError, KeyError, TypeError, AttributeError):
        message = body[:300].decode("utf-8", "replace")
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, code, message, field, retry_after)
