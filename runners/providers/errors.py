"""What a failed model call raises; messages are safe to show (never an API key)."""


class ProviderError(Exception):
    """One model's call failed.

    `status` is the ModelCall status it is recorded with (`error` or `timeout`); `retryable`
    says whether another model may answer instead (connection errors, timeouts, 429, 5xx).
    """

    def __init__(self, message: str, *, status: str = "error", retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class ModelsUnavailable(ProviderError):
    """Every model of a fallback chain failed: `model.unavailable: <model>: <error>; ...`."""

    def __init__(self, errors: list[str]):
        super().__init__("model.unavailable: " + ("; ".join(errors) or "no model to call"))
        self.errors = errors
