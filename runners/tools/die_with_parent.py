"""Run a command, and every process it starts, no longer than the process that started it.

`python -I die_with_parent.py <parent pid> <command> [args...]` stays as the command's parent
(its stdin and stdout go to the command alone) and ends the command's whole process group
(the command's children too, such as `npx`'s `node`):
- when the command exits (a server that exits on its closed stdin may leave children behind);
- when it is told to stop (SIGTERM, SIGINT, SIGHUP);
- when the parent dies, even by SIGKILL (the kernel sends SIGTERM: PR_SET_PDEATHSIG).
Its exit status is the command's. Stdlib only: it runs isolated (`-I`).
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_libc = ctypes.CDLL(None, use_errno=True)


def _end_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> None:
    parent, command = int(sys.argv[1]), sys.argv[2:]
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl: no signal would come
        sys.exit(1)
    for number in STOPPING_SIGNALS:  # until the command's group exists, stopping is exiting
        signal.signal(number, lambda *_: os._exit(1))
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)  # a group of its own: what this process ends, itself left out
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"cannot start {command[0]}: {exc}\n")
            os._exit(127)
    try:
        os.setpgid(child, child)
    except (ProcessLookupError, PermissionError):  # it did so itself, or is gone already
        pass

    def stop(*_):
        _end_group(child)
        os._exit(128 + signal.SIGTERM)

    for number in STOPPING_SIGNALS:
        signal.signal(number, stop)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the pipes are the command's: its end of them is what counts
    os.dup2(devnull, 1)
    _, status = os.waitpid(child, 0)
    _end_group(child)
    os._exit(os.waitstatus_to_exitcode(status) % 256)


if __name__ == "__main__":
    main()
