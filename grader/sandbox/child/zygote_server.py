"""The fork server ("zygote"): runs INSIDE the bubblewrap sandbox, as a standalone script beside harness.py.

Why: a fresh interpreter per run pays for `import jax` and for process start and shutdown every time. This
process imports JAX once (without ever starting a backend: a parent that has started one makes forked
children hang), then forks one child per run. It never reads student code itself.

Its sandbox (set up by grader/zygote.py) already hides the grader's and the instructor's files and has no
network. It keeps the capabilities it needs to isolate each run further. For every request (a small JSON
header plus four pipe fds over a unix socket) it forks a supervisor that:
  1. unshares new mount, pid, network, ipc and uts namespaces, mounts a size-capped tmpfs on /tmp and on
     /dev/shm, and copies the read-only compilation cache into it (student compiles land in that copy);
  2. forks the run's process, pid 1 of the new pid namespace: it mounts its own /proc, sets the rlimits,
     closes every fd but its pipes, switches to the run's own uid (dropping every capability, no new
     privileges), then reads the job (the student's source among it) from the job pipe and runs the harness;
  3. kills that process (and with it the whole pid namespace) at the wall limit, and writes how it ended,
     its CPU seconds and peak memory to the status pipe.
Two runs never share a process, a writable directory, a cache layer, a uid or a network namespace.
"""

import ctypes
import fcntl
import gc
import json
import os
import resource
import shutil
import signal
import socket
import sys
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_MOVE = 1, 2, 4, 8, 32, 4096, 8192
MS_REC, MS_PRIVATE = 16384, 1 << 18
STAGING = "/grader-staging"   # where each run's /tmp is assembled before it is moved into place
PR_SET_NO_NEW_PRIVS = 38
CHANNEL_FD = 3
CONTROL_FD = 4      # the harness's set-up report, closed before student code
SETUP_FAILED = 70   # exit status of a run that failed before student code (the control pipe says why)
MNT_DETACH = 2
LIBC = ctypes.CDLL(None, use_errno=True)


def _call(name, *args):
    if getattr(LIBC, name)(*args) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{name}: {os.strerror(error)}")


def _mount_tmpfs(target, size):
    os.makedirs(target, exist_ok=True)
    _call("mount", b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size)},mode=1777".encode())


def mounts_under(folder):
    """Mount points below `folder` in this mount namespace (the sandbox's read-only binds, e.g. a venv in /tmp)."""
    points = []
    with open("/proc/self/mountinfo") as stream:
        for line in stream:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(folder + "/"):
                points.append(point)
    return sorted(points, key=len)


def fresh_tmp(size):
    """A new, empty, capped tmpfs on /tmp that still shows the read-only binds the old one had (a virtualenv that
    lives under /tmp must stay importable): built aside, then moved over /tmp."""
    keep = mounts_under("/tmp")
    _mount_tmpfs(STAGING, size)
    for point in keep:
        target = STAGING + point[len("/tmp"):]
        os.makedirs(target, mode=0o755, exist_ok=True)
        _call("mount", point.encode(), target.encode(), None, MS_BIND | MS_REC, None)
        _call("mount", None, target.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    _call("mount", STAGING.encode(), b"/tmp", None, MS_MOVE, None)


def isolate_supervisor(request):
    """In the supervisor: new namespaces and private, capped scratch space (still privileged here)."""
    _call("unshare", CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    _call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
    scratch = request["limits"]["scratch_bytes"]
    fresh_tmp(scratch)
    _mount_tmpfs("/dev/shm", scratch)
    workdir = request["workdir"]
    os.makedirs(workdir, mode=0o700)
    os.chown(workdir, request["uid"], request["uid"])
    cache = request.get("compilation_cache")
    if cache and os.path.isdir(cache["readonly"]):
        shutil.copytree(cache["readonly"], cache["writable"])
        for top, _dirs, files in os.walk(cache["writable"]):
            for name in [top, *(os.path.join(top, f) for f in files)]:
                os.chown(name, request["uid"], request["uid"])


def join_cgroup(request):
    """Move this process (and so everything it starts) into the run's cgroups, then hide the batch's groups."""
    for procs in request.get("cgroup_procs", []):
        with open(procs, "w") as stream:
            stream.write(str(os.getpid()))
    root = request.get("cgroup_root")
    if root and os.path.isdir(root):
        for path in sorted(mounts_under(root), key=len, reverse=True) + [root]:
            try:
                _call("umount2", path.encode(), MNT_DETACH)
            except OSError:
                pass


def open_stats(request, key="cgroup_stats"):
    """A directory fd of the run's cgroup that measures its CPU time and CPU pressure (`cgroup_quota`: the v1 group
    that counts its throttling against its own CPU quota), or None."""
    path = request.get(key)
    if not path:
        return None
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None


def mask_host_proc():
    """/proc/keys and /proc/key-users list other users' keys: a run sees empty files instead."""
    for path in ("/proc/keys", "/proc/key-users", "/proc/sysrq-trigger", "/proc/kcore"):
        if os.path.exists(path):
            try:
                _call("mount", b"/dev/null", path.encode(), None, MS_BIND, None)
            except OSError:
                pass


def become_run(request, fds):
    """In the run's process (pid 1 of its namespace): cgroup, /proc, limits, fds, uid; then the job; then the harness."""
    join_cgroup(request)
    try:
        _call("mount", b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    except OSError:
        pass  # /proc then shows the zygote's namespace read-only; nothing of the grader is in it
    mask_host_proc()
    limits = request["limits"]
    for name, value in limits["rlimits"].items():   # Limits.rlimits(): the same list prlimit applies
        resource.setrlimit(getattr(resource, f"RLIMIT_{name.upper()}"), (int(value), int(value)))
    # Move our pipes above the low fds first, so that placing them cannot clobber one another.
    job_fd, output_fd, channel_fd, control_fd = (fcntl.fcntl(fds[name], fcntl.F_DUPFD, 100)
                                                 for name in ("job", "output", "channel", "control"))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.dup2(channel_fd, CHANNEL_FD)
    os.dup2(control_fd, CONTROL_FD)
    os.closerange(CONTROL_FD + 1, job_fd)
    os.closerange(job_fd + 1, 65536)
    uid = request["uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)            # from root to another uid: every capability is dropped
    _call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(request["workdir"])
    os.environ.clear()
    os.environ.update(request["environment"])
    chunks = []
    while True:
        data = os.read(job_fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(job_fd)
    job = json.loads(b"".join(chunks))
    job["channel_fd"] = CHANNEL_FD
    job["control_fd"] = CONTROL_FD
    import harness  # its serve() gives the run its stdout and stderr (harness.buffered_output)
    harness.serve(job)


def report_setup_failure(control_fd, error):
    message = json.dumps({"setup": "failed", "message": f"sandbox set-up: {type(error).__name__}: {error}"[:1000]})
    for fd in (CONTROL_FD, control_fd):
        try:
            os.write(fd, message.encode() + b"\n")
            return
        except OSError:
            continue


def supervise(request, fds):
    """The supervisor: isolate, fork the run, enforce the wall limit, report how it ended."""
    status_fd = fds["status"]
    report = {"returncode": None, "killed_at_wall_limit": False}
    try:
        from cpu_wait import (  # preloaded by main()
            StretchedDeadline,
            group_usage,
            machine_cpus,
            open_proc,
            starting_usage,
            tree_usage,
        )
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        isolate_supervisor(request)
        proc = open_proc()   # this namespace's /proc, still readable after the run mounts its own over it
        stats = open_stats(request)   # the run's cgroup on the unified hierarchy, still readable after it unmounts it
        quota = open_stats(request, "cgroup_quota")
        pid = os.fork()
        if pid == 0:
            try:
                os.close(status_fd)
                become_run(request, fds)
            except BaseException as error:  # before student code: the grader's own failure, on the control pipe
                report_setup_failure(fds["control"], error)
            os._exit(SETUP_FAILED)
        for fd in (fds["job"], fds["output"], fds["channel"], fds["control"]):
            os.close(fd)
        limits = request["limits"]
        wall = StretchedDeadline(limits["wall_seconds"], limits.get("cpu_wait_allowance_seconds", 0),
                                 lambda: (group_usage(stats, proc, quota) if stats is not None else None)
                                 or tree_usage(pid, proc),
                                 start=starting_usage(proc), cpus=machine_cpus(proc))
        # The grader writes to `extend` once the file's own code has ended: the replays' time is granted on top of
        # the wall limit, once (grader/sandbox/file_end.py). The run itself never holds this pipe.
        extend_fd, after_file = fds["extend"], limits.get("after_file_seconds") or 0
        os.set_blocking(extend_fd, False)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if after_file > 0 and not wall.extended:
                try:
                    if os.read(extend_fd, 16):
                        wall.extend(after_file)
                except BlockingIOError:
                    pass
            if wall.remaining() <= 0:
                os.kill(pid, signal.SIGKILL)     # pid 1 of the namespace: everything in it dies too
                report["killed_at_wall_limit"] = True
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.01)
        report["returncode"] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        measured = group_usage(stats, proc) if stats is not None else None   # counts processes nobody reaped too
        report["cpu_seconds"] = round(measured.cpu_seconds if measured else usage.ru_utime + usage.ru_stime, 3)
        report["cpu_wait_allowance_seconds"] = round(wall.allowance, 3)
        report["max_rss_bytes"] = usage.ru_maxrss * 1024
    except BaseException as error:
        report["error"] = f"{type(error).__name__}: {error}"
    try:
        os.write(status_fd, json.dumps(report).encode())
    finally:
        os._exit(0)


FD_NAMES = ("job", "output", "channel", "status", "control", "extend")   # as fork_server.FD_NAMES
SHARED = None   # the installed SharedLoweringContext, or None
PRELOAD = ("numpy", "numpy.testing", "jax", "jax.numpy", "jax.ad_checkpoint", "jax.experimental.jet", "concurrent.futures",
           "encoding", "recorder", "harness", "cpu_wait")


def thread_names():
    """The names of this process's threads (a fork copies only the thread that forks: there must be one)."""
    names = []
    for task in sorted(os.listdir("/proc/self/task")):
        try:
            with open("/proc/self/task/%s/comm" % task) as stream:
                names.append(stream.read().strip())
        except OSError:
            names.append("?")
    return names


def serve(sock):
    """Accept requests forever; each is answered by a forked supervisor. Never runs anything of a request."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # supervisors are reaped by the kernel
    sock.sendall(b"ready\n")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 16, len(FD_NAMES))
        except OSError:
            return
        if not message:
            return
        if message == b"stats" and not fds:   # the benchmark and the tests ask what this process holds
            usage = resource.getrusage(resource.RUSAGE_SELF)
            sock.sendall(json.dumps({"max_rss_bytes": usage.ru_maxrss * 1024, "threads": thread_names(),
                                     "shared_lowering_context": SHARED is not None}).encode())
            continue
        if len(fds) != len(FD_NAMES):
            for fd in fds:
                os.close(fd)
            continue
        request = json.loads(message)
        named = dict(zip(FD_NAMES, fds))
        if os.fork() == 0:
            sock.close()
            supervise(request, named)
        for fd in fds:
            os.close(fd)


def main():
    global SHARED
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # harness.py sits beside this file
    import import_paths
    import_paths.adopt(os.path.dirname(os.path.abspath(__file__)))   # a student's check: their Python's folders
    os.makedirs(STAGING, exist_ok=True)
    sock = socket.socket(fileno=int(sys.argv[1]))
    os.environ["JAX_PLATFORMS"] = "cpu"
    import importlib
    for module in PRELOAD:   # what every run would otherwise import again
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    try:   # one MLIR context every run's lowerings reuse (lowering_context.py); without it JAX makes its own
        SHARED = importlib.import_module("lowering_context").install()
    except Exception:
        SHARED = None
    gc.freeze()   # the runs are forks: keep the collector from touching (and so copying) these shared pages
    serve(sock)


if __name__ == "__main__":
    main()
