"""Secrets handed to a LangHost process in its environment, taken out of it at the start.

The entry points (`manage.py`, `asgi.py`) call `take_secrets()` before anything else runs:
each secret variable is removed from the environment (no child process inherits it) and
zeroed in the process's initial environment block (what `/proc/<pid>/environ` shows, which
removing a variable does not change), and the process is made non-dumpable
(`PR_SET_DUMPABLE 0`): its `/proc/<pid>/environ` and memory are closed to the other processes
of its user. Settings read the secrets through `value()`; the admin's password is used once
(`ensure_admin`) and `forget()`-ten.
"""

import ctypes
import os
import sys

SECRET_VARIABLES = ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FALLBACKS", "LANGHOST_ADMIN_PASSWORD",
                    "DATABASE_URL", "REDIS_URL", "LANGHOST_RUNTIME_TOKEN", "LANGHOST_METRICS_TOKEN")
PR_SET_DUMPABLE = 4
# /proc/<pid>/stat's fields after the command's name: env_start and env_end (proc(5)).
ENV_START_FIELD, ENV_END_FIELD = 47, 48

_taken: dict[str, str] = {}


def take_secrets() -> None:
    for name in SECRET_VARIABLES:
        if name in os.environ:
            _taken[name] = os.environ.pop(name)
            _zero_initial(name)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def value(name: str, default: str | None = None) -> str | None:
    """A secret variable's value: taken at the start, or still in the environment (a process
    that did not start through an entry point, such as the tests')."""
    return _taken.get(name, os.environ.get(name, default))


def forget(name: str) -> None:
    _taken.pop(name, None)
    os.environ.pop(name, None)


def _zero_initial(name: str) -> None:
    """Zero `name`'s value where the kernel keeps the environment the process started with."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return
    start, end = int(fields[ENV_START_FIELD]), int(fields[ENV_END_FIELD])
    block = ctypes.string_at(start, end - start)
    prefix, at = name.encode() + b"=", 0
    while (found := block.find(prefix, at)) != -1:
        if found == 0 or block[found - 1] == 0:
            length = block.find(b"\0", found) - found - len(prefix)
            ctypes.memset(start + found + len(prefix), 0, max(0, length))
        at = found + 1
