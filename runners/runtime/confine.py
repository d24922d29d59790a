"""Run a command confined by what the kernel offers any user: no root, no package but Python.

    python confine.py PLAN_JSON -- COMMAND [ARG ...]

The plan (`sandbox.Plan.as_json`) names what the command may see; everything else of the
machine is absent. The command gets:

- **A filesystem of its own, by allow-list**: an empty root (a tmpfs, read-only) holding only
  the plan's `binds` (`[source, target, writable]`; an empty source hides its target), a `/proc` of its own PID namespace (the
  kernel's settings in it read-only), a minimal `/dev` and an empty `/tmp`, both of bounded
  size. The machine's root is detached, not hidden under a
  mount: nothing else can be reached by any path.
- **Namespaces**: user (the same uid inside as outside; root's is nobody's), mount, PID (it
  sees no process of the host; a small init is pid 1 and passes signals on), IPC, UTS, and
  network when `network` is false (then only a loopback that is down: no connection at all),
  and a session of its own (no controlling terminal).
- **Landlock** where the kernel has it: no TCP connection to `closed_ports` (LangHost's own
  web port, database, Redis), and no signal or abstract-socket connection to processes
  outside the sandbox.
- **No privilege**: every capability dropped from every set (the bounding set too, so an
  exec as uid 0 gains none back), `PR_SET_NO_NEW_PRIVS`, and the plan's resource limits.
- **Its lifetime tied to the caller's**: this launcher stays as the parent, passes SIGTERM,
  SIGINT and SIGHUP on, ends with the command's status, and the command is killed when the
  launcher dies (`PR_SET_PDEATHSIG`). With `info_fd`, it writes `{"child-pid": N}` there
  once the command's sandbox is built, as bubblewrap's `--info-fd` does.

With `"namespaces": false` it only closes the ports and sets the limits and no-new-privs:
inside bubblewrap, which has built the view and set the capabilities already.

Nested: a command confined here can run this launcher again for its own children (the
runtime does so for each plugin), each level with a smaller view.

Standard library only, run by path: it runs before anything of LangHost or the SDK.
"""

from __future__ import annotations

import array
import ctypes
import functools
import itertools
import json
import os
import resource
import signal
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_NET_PORT = 2
LANDLOCK_ACCESS_NET_CONNECT_TCP = 2
LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, LANDLOCK_SCOPE_SIGNAL = 1, 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522
LAST_CAPABILITY = 63
# Who root is inside: mapping uid 0 needs CAP_SETFCAP, which a confined process no longer has
# when it confines its own children (the runtime its plugins).
NOBODY = 65534
DEVICES = ("null", "zero", "full", "random", "urandom")
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
TMP_SIZE = "256m"
# statvfs's ST_RDONLY, ST_NOSUID, ST_NODEV, ST_NOEXEC, ST_NOATIME, ST_NODIRATIME: the same bits
# as mount's MS_ flags.
KEPT_MOUNT_FLAGS = 1 | 2 | 4 | 8 | 1024 | 2048
RLIMITS = {"as": resource.RLIMIT_AS, "cpu": resource.RLIMIT_CPU, "nproc": resource.RLIMIT_NPROC,
           "nofile": resource.RLIMIT_NOFILE, "fsize": resource.RLIMIT_FSIZE}
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Built in a private tmpfs over /tmp: the machine's root stays reachable below `OLD` until the
# new root is in place.
BASE, NEW, OLD = "/tmp", "/tmp/newroot", "/tmp/oldroot"

_libc = ctypes.CDLL(None, use_errno=True)
_add_rule = functools.partial(ctypes.CDLL(None, use_errno=True).syscall, SYS_LANDLOCK_ADD_RULE)
_add_rule.func.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                           ctypes.c_uint]
_add_rule.func.restype = ctypes.c_long
_machine = os.uname().machine


class ConfinementError(OSError):
    pass


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise ConfinementError(number, f"{what}: {os.strerror(number)}")
    return result


def _mount(source, target, fstype, flags, data=None) -> None:
    _check(_libc.mount(source and source.encode(), target.encode(),
                       fstype and fstype.encode(), ctypes.c_ulong(flags),
                       data and data.encode()), f"mount {source or fstype} on {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _isolate(network: bool) -> None:
    """New namespaces, this process's uid and gid mapped inside (root's as nobody's)."""
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    _check(_libc.unshare(flags | (0 if network else CLONE_NEWNET)), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid or NOBODY} {uid} 1")
    _write("/proc/self/gid_map", f"{gid or NOBODY} {gid} 1")


def _place(source: str, target: str) -> None:
    """An empty file or directory at `target` (in the new root) to mount `source` on."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()


def _bind(source: str, target: str, writable: bool, device: bool = False) -> None:
    _place(source, target)
    _mount(source, target, None, MS_BIND | MS_REC)
    # The flags the source's mount has are kept (a user namespace may not drop them).
    kept = os.statvfs(target).f_flag & KEPT_MOUNT_FLAGS
    flags = (MS_BIND | MS_REMOUNT | MS_NOSUID | kept | (0 if device else MS_NODEV)
             | (0 if writable else MS_RDONLY))
    _mount(None, target, None, flags)


def _build_root(binds: list, mount_proc: bool) -> None:
    """The new root: /dev, /proc, /tmp, then the plan's binds; then pivot into it."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    os.makedirs(NEW)
    os.makedirs(OLD)
    _check(_libc.syscall(SYS_PIVOT_ROOT[_machine], BASE.encode(), OLD.encode()),
           "pivot_root")
    # The machine's root is now at OLD (its paths as seen before, /tmp included), the new one
    # is built at NEW.
    old, new = OLD[len(BASE):], NEW[len(BASE):]
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    os.makedirs(new + "/dev", exist_ok=True)
    _mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for device in DEVICES:
        if os.path.exists(f"{old}/dev/{device}"):
            _bind(f"{old}/dev/{device}", f"{new}/dev/{device}", True, device=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    os.makedirs(new + "/dev/shm")
    os.makedirs(new + "/tmp", exist_ok=True)
    _mount("tmpfs", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMP_SIZE}")
    os.makedirs(new + "/proc", exist_ok=True)
    if mount_proc:
        _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for entry in PROC_READ_ONLY:  # the kernel's settings: uid 0 may write them, caps or not
            if os.path.exists(f"{new}/proc/{entry}"):
                _bind(f"{new}/proc/{entry}", f"{new}/proc/{entry}", False)
    # Last, over the empty /tmp: the binds may lie below it.
    for source, target, writable in sorted(binds, key=lambda bind: bind[1].count("/")):
        if not source:  # hidden: an empty directory, or an empty file, in its place
            if os.path.isdir(new + target):
                _mount("tmpfs", new + target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k")
            elif os.path.lexists(new + target):
                _bind(f"{old}/dev/null", new + target, False, device=True)
        elif os.path.lexists(old + source):
            _bind(old + source, new + target, writable)
    os.chdir(new)
    _check(_libc.syscall(SYS_PIVOT_ROOT[_machine], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detaching the machine's root")
    os.chdir("/")
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 without Landlock."""
    return max(0, _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0,
                                LANDLOCK_CREATE_RULESET_VERSION))


def _landlock(closed_ports: list[int]) -> None:
    """No TCP connection to `closed_ports` (from ABI 4), nor signals and abstract sockets to
    processes outside (from ABI 6). Files are the mount namespace's business."""
    abi = landlock_abi()
    net = LANDLOCK_ACCESS_NET_CONNECT_TCP if abi >= 4 and closed_ports else 0
    scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL if abi >= 6 else 0
    if not (net or scoped):
        return
    attr = struct.pack("QQQ", 0, net, scoped)
    ruleset = _check(_libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0),
                     "landlock_create_ruleset")
    try:
        if net:
            _allow_ports_but(ruleset, set(closed_ports))
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def close_ports(ports: list[int]) -> None:
    """This process and what it starts: no TCP connection to `ports`, no new privileges. For
    a process in a view built already (bubblewrap's), whose capabilities are left as they are
    (the runtime keeps the one it nests sandboxes with)."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _landlock(ports)


def _allow_ports_but(ruleset: int, closed: set[int]) -> None:
    """A rule allowing each port but the `closed` ones (Landlock has no ranges): the rules laid
    out in one array and added from C's side of the loop (`map`), which halves the cost."""
    ports = [port for port in range(65536) if port not in closed]
    rules = array.array("Q", bytes(16 * len(ports)))
    rules[0::2] = array.array("Q", [LANDLOCK_ACCESS_NET_CONNECT_TCP]) * len(ports)
    rules[1::2] = array.array("Q", ports)
    start = rules.buffer_info()[0]
    added = map(functools.partial(_add_rule, ruleset, LANDLOCK_RULE_NET_PORT),
                range(start, start + 16 * len(ports), 16), itertools.repeat(0, len(ports)))
    if min(added) < 0:
        _check(-1, "landlock_add_rule")


def _limit(limits: dict) -> None:
    for name, value in limits.items():
        resource.setrlimit(RLIMITS[name], (value, value))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _drop_privileges(limits: dict) -> None:
    _limit(limits)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for capability in range(LAST_CAPABILITY + 1):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)  # past the kernel's last: EINVAL
    header = struct.pack("Ii", LINUX_CAPABILITY_VERSION_3, 0)
    _check(_libc.syscall(SYS_CAPSET[_machine], header, bytes(24)), "capset")


def _forward_signals_to(pid: int) -> None:
    def forward(number, _frame):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    for number in FORWARDED_SIGNALS:
        signal.signal(number, forward)


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def _confined_child(plan: dict, argv: list[str], ready_write: int) -> None:
    try:
        # (Its parent is outside its PID namespace: getppid() says 0, whether alive or not.)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _build_root(plan["binds"], plan.get("proc", True))
        _landlock(plan.get("closed_ports", []))
        _drop_privileges(plan.get("limits", {}))
        os.chdir(plan.get("chdir", "/"))
    except BaseException as exc:
        os.write(2, f"confine: the sandbox could not be built: {exc}\n".encode())
        os._exit(126)
    os.write(ready_write, b"1")
    os.close(ready_write)
    os.setsid()  # no controlling terminal: nothing can be typed into the operator's
    command = os.fork()
    if command == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"confine: {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    _init(command)


def _init(command: int) -> None:
    """Pid 1 of the sandbox: passes the stopping signals on to the command (the kernel ignores
    a signal to pid 1 that has no handler), reaps every orphan, ends with the command."""
    _forward_signals_to(command)
    while True:  # (a signal handled meanwhile does not interrupt the wait: PEP 475)
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == command:
            _exit_like(status)


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: confine.py PLAN_JSON -- COMMAND [ARG ...]")
    plan, argv = json.loads(args[0]), args[2:]
    if not plan.get("namespaces", True):  # inside bubblewrap, which built the view
        close_ports(plan.get("closed_ports", []))
        _limit(plan.get("limits", {}))
        os.execvp(argv[0], argv)
    # Links resolved while the machine's root is still the root they point in.
    plan["binds"] = [(source and os.path.realpath(source), target, writable)
                     for source, target, writable in plan["binds"]]
    info_fd = plan.get("info_fd")
    try:
        _isolate(plan.get("network", True))
    except OSError as exc:
        sys.stderr.write(f"confine: no namespaces here: {exc}\n")
        os._exit(126)
    ready_read, ready_write = os.pipe2(os.O_CLOEXEC)
    child = os.fork()
    if child == 0:
        os.close(ready_read)
        _confined_child(plan, argv, ready_write)
    os.close(ready_write)
    _forward_signals_to(child)
    built = os.read(ready_read, 1) == b"1"  # EOF: it failed before the exec (it said why)
    os.close(ready_read)
    if info_fd is not None:
        if built:
            os.write(info_fd, json.dumps({"child-pid": child}).encode())
        os.close(info_fd)
    _exit_like(os.waitpid(child, 0)[1])


if __name__ == "__main__":
    main(sys.argv[1:])
