"""The first process inside a sandbox built by util-linux ``unshare`` (see :mod:`zerg.sandbox.launch`).

Not imported: compiled once, it is run as ``python -I -S nsinit.pyc ROOT HOME TMP NET FSIZE UID NPROC COMMAND`` by

    unshare [--map-current-user --keep-caps] --pid --fork --kill-child --mount --ipc --uts [--net]

so it starts as PID 1 of fresh PID, mount, IPC, UTS (and network) namespaces. Not as root (UID is
``-``): in a fresh user namespace too, holding every capability *of those namespaces only*. As
root (UID is the call's host uid): as root, with no user namespace, so that this Python may live
where the call's uid cannot enter (a 0700 ``/root/.pyenv``); it becomes UID, capped at NPROC
processes, just before the command. It imports nothing of zerg and only C modules: it runs
once per ``container_exec`` call, and ``import ctypes`` alone would cost a third of its budget, so
libc is called through ``_ctypes`` directly.

Invariants:
- The command sees a fresh tmpfs root (read-only) holding only: the host's system directories
  bound read-only (submounts included), a fresh /proc of its own PID namespace, a minimal /dev,
  the call's private /tmp and home (its working directory). The host's root is detached, so
  nothing else of the host (data directory, database socket, other sandboxes, /root, /home) has
  a path inside.
- Before ``exec`` every capability is dropped for good (bounding set emptied, ambient and
  inheritable cleared, no-new-privs, securebits locked), so the command cannot unmount, remount or
  regain anything; it runs as the caller's host uid (as root: the call's own uid, no
  supplementary groups), unprivileged.
- The command execs in place of this process: it is PID 1, and when it exits the kernel kills
  every process left in the namespace before ``unshare`` sees the exit.
- Any setup failure exits 125 with one line on stderr naming the step; the command never runs
  half-isolated.
"""

import _ctypes
import codecs
import os
import resource
import sys

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


def main(root, home, tmp, network, fsize, uid, nproc, command):
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
    mount(tmp, f"{root}/tmp", None, MS_BIND)
    mount(home, f"{root}/home/sandbox", None, MS_BIND)
    check(libc.sethostname(b"zerg-sandbox", 12), "sethostname")
    if network == "0":
        loopback_up()
    os.chdir(root)  # pivot_root(".", "."), then detach the old root stacked beneath
    check(libc.syscall(calls["pivot_root"], b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "detach the host root")
    os.chdir("/home/sandbox")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    limit = int(fsize)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if uid != "-":  # counted per uid: a fork bomb stops there
        resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))
    drop_capabilities(calls, None if uid == "-" else int(uid))
    os.execve("/bin/sh", ["sh", "-c", command], dict(os.environ))


if __name__ == "__main__":
    main(*sys.argv[1:9])
