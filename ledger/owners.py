"""Who executes a run: the owner id a process stamps on the runs it executes (and renews their
leases under), and whether that process is known to be gone.

An owner id reads `<host>:<pid>:<start>:<tag>`, `start` being the process's start time in clock
ticks since boot (`/proc/<pid>/stat`), so a pid the kernel gave to another process since does
not pass for the owner. Only a process of this host can be known gone; elsewhere its lease
decides.
"""

import os
import uuid

HOST = os.uname().nodename


def _start_ticks(pid: int) -> str | None:
    """The start time of process `pid`, or None when there is no such (living) process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    # After the command: state, ppid, …; starttime is the stat file's 22nd field.
    return None if fields[0] in ("Z", "X") else fields[19]


def new_owner_id() -> str:
    pid = os.getpid()
    return f"{HOST}:{pid}:{_start_ticks(pid) or 0}:{uuid.uuid4().hex[:8]}"


def owner_is_gone(owner_id: str) -> bool:
    """Whether `owner_id` names a process of this host that no longer runs."""
    parts = (owner_id or "").rsplit(":", 3)
    if len(parts) != 4 or parts[0] != HOST or not parts[1].isdigit():
        return False
    return _start_ticks(int(parts[1])) != parts[2]


def owner_pid(owner_id: str) -> str:
    parts = (owner_id or "").rsplit(":", 3)
    return parts[1] if len(parts) == 4 else "?"
