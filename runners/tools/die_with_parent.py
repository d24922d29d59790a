"""Start a command that dies with the process that started it (Linux: PR_SET_PDEATHSIG).

`python -I die_with_parent.py <parent pid> <command> [args...]`: the command replaces this
process (exec), keeping its pid, stdin and stdout, and the kernel SIGKILLs it when the thread
that started it ends, even if LangHost is SIGKILLed. Stdlib only: it runs isolated (`-I`).
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    parent, command = int(sys.argv[1]), sys.argv[2:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl: no signal would come
        sys.exit(1)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.exit(f"cannot start {command[0]}: {exc}")


if __name__ == "__main__":
    main()
