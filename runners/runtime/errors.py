"""What a call over the runtime link can fail with."""


class RuntimeLinkError(Exception):
    """A call over the link failed (error frame, timeout, bad state)."""


class LinkNotReady(RuntimeLinkError):
    """The link has no ready connection right now."""


class LinkLost(RuntimeLinkError):
    """The connection died while the call was in flight."""


class ToolNotFound(RuntimeLinkError):
    """The runtime lists no such tool for that plugin (not loaded, or no such component)."""
