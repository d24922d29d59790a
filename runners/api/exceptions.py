"""The API's answer to each refusal of the door: one status code per cause, everywhere."""

from rest_framework import exceptions, status

from langhost.base.api import exception_handler as envelope_exception_handler
from runners.conversations import exceptions as refusals

STATUS_FOR = {
    refusals.NotFound: status.HTTP_404_NOT_FOUND,
    refusals.Forbidden: status.HTTP_403_FORBIDDEN,
    refusals.InvalidInput: status.HTTP_422_UNPROCESSABLE_ENTITY,
    refusals.AgentPaused: status.HTTP_409_CONFLICT,
    refusals.AgentTerminated: status.HTTP_410_GONE,
    refusals.Unroutable: status.HTTP_409_CONFLICT,
    refusals.RunnerUnavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
    refusals.StorageFailed: status.HTTP_503_SERVICE_UNAVAILABLE,
    refusals.AlreadyAnswered: status.HTTP_409_CONFLICT,
    refusals.Expired: status.HTTP_410_GONE,
    refusals.AlreadyEnded: status.HTTP_422_UNPROCESSABLE_ENTITY,
}


class RuntimeUnreachable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "runtime_unreachable"


def status_for(refusal: refusals.Refused) -> int:
    return next(code for kind, code in STATUS_FOR.items() if isinstance(refusal, kind))


class RefusedError(exceptions.APIException):
    """A refusal as DRF answers it: `{detail, errors?: {<field>: [...]}}` (errors for the
    invalid input's field only)."""

    def __init__(self, refusal: refusals.Refused):
        super().__init__(refusal.detail)
        self.status_code = status_for(refusal)
        self.field = refusal.field if isinstance(refusal, refusals.InvalidInput) else None
        self.current_status = getattr(refusal, "current_status", None)


def exception_handler(exc, context):
    if isinstance(exc, refusals.TooManyRuns):
        exc = exceptions.Throttled(wait=exc.retry_after, detail=exc.detail)  # with Retry-After
    elif isinstance(exc, refusals.Refused):
        exc = RefusedError(exc)
    response = envelope_exception_handler(exc, context)
    if response is not None and isinstance(exc, RefusedError):
        if exc.field:
            response.data["errors"] = {exc.field: [str(exc.detail)]}
        if exc.current_status:
            response.data["current_status"] = exc.current_status
    return response


def error_body(exc: refusals.Refused | exceptions.APIException) -> tuple[int, dict]:
    """The status and the body (`{detail, errors?}`) REST answers `exc` with: what every
    other door says, in its own envelope (the conversation socket's `error` frame, LangBot's
    `{code, msg}`)."""
    response = exception_handler(exc, {})
    return response.status_code, response.data
