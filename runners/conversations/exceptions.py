"""Why the door refused a run. Nothing was written when one of these is raised.

Each edge maps a refusal to its own answer (HTTP status, WebSocket close code or error frame,
LangBot's `{code, msg}`, a command's error), the same answer for the same cause everywhere.
"""


class Refused(Exception):
    """The caller may not start this run, or it cannot start; `field` names the input at fault."""

    def __init__(self, detail: str, *, field: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.field = field


class NotFound(Refused):
    """No such agent, conversation or binding for this caller (someone else's is not found)."""


class Forbidden(Refused):
    """The caller is known but may not do this (e.g. run a runner directly)."""


class InvalidInput(Refused):
    """Well-formed, but not something LangHost can run (unknown runner, empty message)."""


class AgentPaused(Refused):
    pass


class AgentTerminated(Refused):
    pass


class Unroutable(Refused):
    """The agent's tree or bindings do not name one runner to answer."""


class RunnerUnavailable(Refused):
    """The runner exists but cannot run now (its plugin is down or disabled)."""


class StorageFailed(Refused):
    """An input file could not be saved as an artifact."""


class TooManyRuns(Refused):
    """The caller started as many runs as their rate allows (`LANGHOST_RUNS_PER_USER`); the
    next may start in `retry_after` seconds."""

    def __init__(self, detail: str, *, retry_after: int):
        super().__init__(detail)
        self.retry_after = retry_after


class AlreadyAnswered(Refused):
    """The interaction was answered before: each is answered once."""


class Expired(Refused):
    """The interaction expired before it was answered."""


class AlreadyEnded(Refused):
    """The run ended before it could be cancelled; `current_status` says how."""

    def __init__(self, detail: str, *, current_status: str):
        super().__init__(detail)
        self.current_status = current_status
