"""Reading the plugin runtime's log: which plugin failed, and why.

A plugin process's own lines come prefixed with its name (`runtime_main.py`); the runtime's own
lines name a plugin only in passing.
"""

import re
from collections.abc import Iterable

_PLUGIN_IN_LOG = re.compile(r"[Pp]lugin ([\w.-]+/[\w.-]+)|data/plugins/([\w.-]+__[\w.-]+)")
# "Plugin process exited unexpectedly; restarting data/plugins/<author>__<name> in 1.0s"
_PLUGIN_EXIT_IN_LOG = re.compile(r"exited unexpectedly; restarting data/plugins/([\w.-]+__[\w.-]+)")
# A plugin process's own line, relayed by the runtime: "[plugin <author>__<name>] <text>"
_PLUGIN_LINE_IN_LOG = re.compile(r"^\[plugin ([\w.-]+__[\w.-]+)\] (.*)$")
_STOPPED_IN_LOG = re.compile(r"^stopped after \d+ crashes in a row$")
_ERROR_IN_LOG = re.compile(r"^(?:[\w.]*Error: )*(\w*(?:Error|Exception): .+)$")


def _error_text(line: str) -> str | None:
    """The innermost `SomeError: text` of a traceback's last line, if this is one."""
    match = _ERROR_IN_LOG.match(line.strip())
    return match.group(1) if match else None


def exited_plugin(line: str) -> str | None:
    """The `author/name` of the plugin whose unexpected exit the line reports, if it does."""
    exited = _PLUGIN_EXIT_IN_LOG.search(line)
    return exited.group(1).replace("__", "/", 1) if exited else None


def plugin_failures(log_tail: Iterable[str]) -> dict[str, str]:
    """`{"author/name": last error}` from the runtime's recent log. Only meaningful for
    plugins that are not running: a running plugin may have failed before and recovered.

    A plugin process's own lines come prefixed with its name (`runtime_main.py`): its
    errors are its own, and so is the runtime's word that it stopped restarting it. The
    runtime's lines (a manifest it could not load) name the plugin only in passing: such an
    error belongs to the plugin whose exit the runtime logs next ("exited unexpectedly;
    restarting data/plugins/<author>__<name>"), failing that to the plugin the log last
    mentioned.
    """
    own: dict[str, str] = {}
    stopped: dict[str, str] = {}
    confirmed: dict[str, str] = {}
    guessed: dict[str, str] = {}
    current = pending = None
    for line in log_tail:
        if prefixed := _PLUGIN_LINE_IN_LOG.match(line):
            plugin, text = prefixed.group(1).replace("__", "/", 1), prefixed.group(2)
            if _STOPPED_IN_LOG.match(text):
                stopped[plugin] = text
            elif reason := _error_text(text):
                own[plugin] = reason
                stopped.pop(plugin, None)  # restarted since (its folder reloaded)
        elif exited := _PLUGIN_EXIT_IN_LOG.search(line):
            plugin = exited.group(1).replace("__", "/", 1)
            if pending:
                confirmed[plugin] = pending
            current, pending = plugin, None
        elif match := _PLUGIN_IN_LOG.search(line):
            current = (match.group(1) or match.group(2).replace("__", "/", 1)).rstrip(".")
        elif reason := _error_text(line):
            pending = reason
            if current:
                guessed[current] = reason
    failures = {**guessed, **confirmed, **own}
    for plugin, text in stopped.items():
        failures[plugin] = f"{failures[plugin]} ({text})" if plugin in failures else text
    return failures
