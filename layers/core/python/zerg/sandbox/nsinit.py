"""The first process of a sandbox call (see :mod:`zerg.sandbox.launch`): in namespaces built by
util-linux ``unshare`` (``ns``), or at best effort, where there are none (``best``).

Not imported: compiled once, it is run as ``python -I -S nsinit.pyc MODE ...``. It imports nothing
of zerg and only C modules: it runs once per ``container_exec`` call, and ``import ctypes`` alone
would cost a third of its budget, so libc is called through ``_ctypes`` directly.

``ns ROOT NET LIMITS WRITABLE UID COMMAND``, run by

    unshare [--map-current-user --keep-caps] --pid --fork --kill-child --mount --ipc --uts [--net]

so it starts as PID 1 of fresh PID, mount, IPC, UTS (and network) namespaces. Not as root (UID is
``-``): in a fresh user namespace too, holding every capability *of those namespaces only*. As
root (UID is the call's host uid): as root, with no user namespace, so that this Python may live
where the call's uid cannot enter (a 0700 ``/root/.pyenv``); it becomes UID just before the command.

- The command sees a fresh tmpfs root (read-only) holding only: the host's system directories
  bound read-only (submounts included), a fresh /proc of its own PID namespace, a minimal /dev,
  and a /tmp and a home (its working directory) that are each a fresh tmpfs of WRITABLE bytes.
  The host's root is detached, so nothing else of the host (data directory, database socket,
  other sandboxes, /root, /home) has a path inside.
- Before the command every capability is dropped for good (bounding set emptied, ambient and
  inheritable cleared, no-new-privs, securebits locked), so it cannot unmount, remount or regain
  anything; it runs as the caller's host uid (as root: the call's own uid, no supplementary
  groups), unprivileged.
- This process stays PID 1: it forks the command (PID 2, where every signal reaches it as it would
  anywhere, SIGXCPU and SIGXFSZ of its limits included), reaps whatever is orphaned to it, and
  exits with the command's status (128 + the signal when a signal ended it). Then the kernel kills
  every process left in the namespace before ``unshare`` sees the exit. The command cannot signal
  it (the init of a PID namespace ignores its members' signals).

``best PARENT LIMITS UID COMMAND``, run by the zerg process PARENT itself, at best effort:

- It becomes a child subreaper with a parent-death signal (SIGTERM): whatever the command starts,
  however it daemonises (``setsid``, double forks, a dropped marker variable), stays below this
  process; when the command's shell exits, when zerg stops the call (SIGTERM) or when zerg itself
  dies (``kill -9``), it kills everything below it, then exits with the command's status. As root
  (UID is the call's host uid) it runs as root and the command as UID, so the command cannot kill
  it; without root the command can (same uid), and what it started then outlives the call unless
  its marker variable finds it (see :mod:`zerg.sandbox.processes`).
- As root the command's process first kills every process UID still has, as UID, so nothing of
  an earlier call with that uid sees this one.

Both modes:

- The command's limits are set here with ``setrlimit``, never by a shell: LIMITS is
  ``FSIZE,AS,CPU,NPROC`` (bytes, bytes, seconds, processes; 0: not set), and core dumps are off.
  CPU is the soft limit (SIGXCPU), CPU + 1 the hard one (SIGKILL). NPROC is set only for a
  call's own uid: it counts every process of the uid.
- Signals Python ignores (SIGPIPE, SIGXFSZ) are the default again for the command.
- Any setup failure exits 125 with one line on stderr naming the step; the command never runs
  half-isolated or unlimited.
"""

import _ctypes
import _signal
import codecs
import os
import resource
import sys
import time

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
MNT_DETACH = 2
# Per-mount options a remount must keep (the kernel locks them on mounts inherited from the host).
OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126}, "aarch64": {"pivot_root": 41, "capset": 91}}
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "shm": "/tmp"}



class c_int(_ctypes._SimpleCData):  # noqa: N801  (ctypes' own names)
    _type_ = "i"


class c_ulong(_ctypes._SimpleCData):  # noqa: N801
    _type_ = "L"


class _LibC:
    _handle = _ctypes.dlopen(None, os.RTLD_NOW)

    def __getattr__(self, name):
        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = c_int

        function = Function((name, self))
        setattr(self, name, function)
        return function


libc = _LibC()


def fail(step):
    err = _ctypes.get_errno()
    os.write(2, f"zerg sandbox: setup failed: {step}: {os.strerror(err) if err else 'error'}\n".encode())
    os._exit(125)


def check(result, step):
    if result != 0:
        fail(step)


def mount(source, target, fstype, flags, data=None):
    enc = os.fsencode
    check(libc.mount(enc(source) if source else None, enc(target), enc(fstype) if fstype else None,
                     c_ulong(flags), enc(data) if data else None), f"mount {target}")


def mounts_under(prefix):
    """(mount point, per-mount options) of every mount at or below ``prefix``."""
    with open("/proc/self/mountinfo", "rb") as fh:
        for line in fh:
            fields = line.split()
            point = os.fsdecode(codecs.escape_decode(fields[4])[0])
            if point == prefix or point.startswith(prefix + "/"):
                yield point, fields[5].decode()


def bind_system_dirs(root):
    for name in SYSTEM_DIRS:
        host, inside = "/" + name, f"{root}/{name}"
        if os.path.islink(host):  # merged /usr: /bin -> usr/bin
            os.symlink(os.readlink(host), inside)
        elif os.path.isdir(host):
            os.mkdir(inside)
            mount(host, inside, None, MS_BIND | MS_REC)
    for point, options in mounts_under(root):  # read-only, submounts (e.g. /etc/hosts) included
        top = point[len(root) + 1:].split("/", 1)[0]
        if top in SYSTEM_DIRS:
            flags = MS_BIND | MS_REMOUNT | MS_RDONLY
            for option in options.split(","):
                flags |= OPTION_FLAGS.get(option, 0)
            mount(None, point, None, flags)


def make_dev(root):
    dev = f"{root}/dev"
    os.mkdir(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536")
    for name in DEVICES:
        os.close(os.open(f"{dev}/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
        mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    mount(None, dev, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def loopback_up():
    import _socket
    import fcntl

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        req = b"lo".ljust(16, b"\0") + b"\0" * 24
        flags = int.from_bytes(fcntl.ioctl(sock.fileno(), siocgifflags, req)[16:18], "little")
        fcntl.ioctl(sock.fileno(), siocsifflags, b"lo".ljust(16, b"\0") + (flags | iff_up).to_bytes(2, "little") + b"\0" * 22)
    except OSError as exc:
        os.write(2, f"zerg sandbox: setup failed: loopback up: {exc.strerror}\n".encode())
        os._exit(125)
    finally:
        sock.close()


def drop_capabilities(calls, uid):
    """Empty the bounding set, become ``uid`` (None: stay), then clear every capability for good."""
    pr_set_securebits, pr_capbset_drop, pr_cap_ambient, pr_set_no_new_privs = 28, 24, 47, 38
    # SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and their locks: uid 0 means nothing later.
    check(libc.prctl(pr_set_securebits, 0x2F, 0, 0, 0), "securebits")
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        check(libc.prctl(pr_capbset_drop, cap, 0, 0, 0), f"drop capability {cap}")
    check(libc.prctl(pr_cap_ambient, 4, 0, 0, 0), "clear ambient capabilities")  # CLEAR_ALL
    if uid is not None:  # NO_SETUID_FIXUP keeps the capabilities over this; capset clears them
        check(libc.setgroups(0, None), "setgroups")
        check(libc.setresgid(uid, uid, uid), "setresgid")
        check(libc.setresuid(uid, uid, uid), "setresuid")
        # A change of uid clears the parent-death signal unshare --kill-child set: set it again, so
        # the namespace still dies with its launcher (a crash in between is the reaper's, by uid).
        check(libc.prctl(1, 9, 0, 0, 0), "parent-death signal")  # PR_SET_PDEATHSIG, SIGKILL
    check(libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0), "no_new_privs")
    header = (0x20080522).to_bytes(4, sys.byteorder) + bytes(4)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = bytes(24)  # effective, permitted, inheritable (x 2 words): all zero
    check(libc.syscall(calls["capset"], header, data), "capset")


def set_limits(limits):
    """The command's rlimits (it inherits them, and so does everything it starts); never above a
    hard limit this process already has."""
    fsize, space, cpu, nproc = (int(part) for part in limits.split(","))
    wanted = [(resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_FSIZE, fsize, fsize), (resource.RLIMIT_AS, space, space),
              (resource.RLIMIT_CPU, cpu, cpu + 1), (resource.RLIMIT_NPROC, nproc, nproc)]
    for which, soft, hard in wanted:
        if which != resource.RLIMIT_CORE and not soft:
            continue
        _, current = resource.getrlimit(which)
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        try:
            resource.setrlimit(which, (soft, hard))
        except (OSError, ValueError) as exc:
            os.write(2, f"zerg sandbox: setup failed: limit {which}: {exc}\n".encode())
            os._exit(125)


def default_signals():
    """What Python ignores (SIGPIPE, SIGXFSZ) back to the default: ``yes | head`` ends quietly, a
    file over the limit kills its writer, as for any command started by a shell."""
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGTERM):
        _signal.signal(sig, _signal.SIG_DFL)


def exit_code(status):
    """A shell's convention: the exit code, or 128 + the signal that ended the process."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def start(command, before_exec=None):
    """Fork the command (``/bin/sh -c``); the child runs ``before_exec`` first. Returns its pid."""
    child = os.fork()
    if child:
        return child
    try:
        default_signals()
        if before_exec is not None:
            before_exec()
        os.execve("/bin/sh", ["sh", "-c", command], dict(os.environ))
    except BaseException as exc:  # noqa: BLE001  (a child must never return into the parent's code)
        os.write(2, f"zerg sandbox: setup failed: start the command: {exc}\n".encode())
    os._exit(125)


def namespace(root, network, limits, writable, uid, command):
    calls = SYSCALLS.get(os.uname().machine)
    if calls is None:
        os.write(2, f"zerg sandbox: setup failed: unsupported machine {os.uname().machine}\n".encode())
        os._exit(125)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576")
    bind_system_dirs(root)
    for name in ("proc", "tmp", "home", "home/sandbox"):
        os.mkdir(f"{root}/{name}")
    mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    make_dev(root)
    owner = "" if uid == "-" else f",uid={uid},gid={uid}"  # in a user namespace: its root, mapped to us
    for inside in ("tmp", "home/sandbox"):  # the only writable places, each capped
        mount("tmpfs", f"{root}/{inside}", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={writable}{owner}")
    check(libc.sethostname(b"zerg-sandbox", 12), "sethostname")
    if network == "0":
        loopback_up()
    os.chdir(root)  # pivot_root(".", "."), then detach the old root stacked beneath
    check(libc.syscall(calls["pivot_root"], b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "detach the host root")
    os.chdir("/home/sandbox")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    set_limits(limits)  # as root still: NPROC, counted per uid, holds once we become it
    drop_capabilities(calls, None if uid == "-" else int(uid))
    child = start(command)
    while True:  # PID 1: orphans come here; reap them until the command itself ends
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            os._exit(exit_code(status))


def below(me):
    """{pid: process group} of every live process below ``me`` (one pass over /proc)."""
    children, groups = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                state, ppid, pgid = fh.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if state != b"Z":
            children.setdefault(int(ppid), []).append(int(name))
            groups[int(name)] = int(pgid)
    found, frontier = {}, [me]
    while frontier:
        for pid in children.get(frontier.pop(), ()):
            if pid not in found:
                found[pid] = groups[pid]
                frontier.append(pid)
    return found


def become_uid(uid):
    """This process as ``uid`` alone (no supplementary groups), for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def kill_as(uid):
    """Kill every process of ``uid`` in one ``kill(-1)`` run as that uid: the kernel signals them
    all while holding off forks, so a forking loop cannot outrun it."""
    helper = os.fork()
    if helper == 0:
        try:
            become_uid(uid)
            os.kill(-1, 9)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(helper, 0)


def reap():
    """Reap what has ended; False when nothing is left below this process (a subreaper with no
    children has no descendants)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        return False
    return True


def end_all(uid):
    """Kill everything below this process and reap it, within a few seconds."""
    if not reap():
        return
    me, mine = os.getpid(), os.getpgid(0)
    if uid != "-":
        kill_as(int(uid))
    deadline = time.monotonic() + 5
    while reap():
        if time.monotonic() > deadline:
            return
        found = below(me)
        for pid, pgid in found.items():
            for target in ((pid,) if pgid in (mine, me) else (pid, -pgid)):  # never our own group
                try:
                    os.kill(target, 9)
                except OSError:
                    pass
        time.sleep(0.002)


def best_effort(parent, limits, uid, command):
    def stop(signum, frame):  # zerg stopped the call, or died (the parent-death signal)
        end_all(uid)
        os._exit(128 + signum)

    _signal.signal(_signal.SIGTERM, stop)
    check(libc.prctl(36, 1, 0, 0, 0), "child subreaper")  # PR_SET_CHILD_SUBREAPER
    check(libc.prctl(1, _signal.SIGTERM, 0, 0, 0), "parent-death signal")  # PR_SET_PDEATHSIG
    if os.getppid() != int(parent):  # zerg died before the signal was set: run nothing
        os._exit(125)

    def become():
        set_limits(limits)
        if uid != "-":
            become_uid(int(uid))
            try:
                os.kill(-1, 9)  # what an earlier call of this uid left (spares this process)
            except ProcessLookupError:
                pass

    child = start(command, become)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)  # the end is under way
    end_all(uid)
    os._exit(exit_code(status))


if __name__ == "__main__":
    if sys.argv[1] == "ns":
        namespace(*sys.argv[2:8])
    else:
        best_effort(*sys.argv[2:6])
