class ToolError(Exception):
    """A tool call failed: the tool said so, or its server could not be reached. The message
    says which, in words fit for an operator or a model."""
