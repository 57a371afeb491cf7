"""How a student process is isolated: the strongest mechanism this machine offers, chosen once, named in every result.

Each strategy turns the harness command line into the sandboxed one, in three layers:
  prlimit (rlimits, set before anything runs)  ->  namespaces  ->  setpriv (a fresh unprivileged uid)  ->  python
Strategies, strongest first:

- `Bubblewrap`: `bwrap` gives new pid, network, ipc and uts namespaces and a mount namespace that shows only
  the system (read-only) and the Python installation (read-only). The project checkout, the solutions, the
  assignment configs and the output folder do not exist inside. The only writable places are a size-capped
  tmpfs (the working dir and /tmp) and a size-capped /dev/shm, all gone when the run ends.
- `Unshare`: util-linux `unshare` for pid, network and ipc namespaces. Files stay visible, so the description
  says so.
- `ProcessGroup`: rlimits and a process group only (no namespaces allowed). Every result says so loudly.

Below namespaces the grader fails closed: `require_isolation` refuses (`WeakIsolation`, exit 2 at the command line)
unless the instructor asks for it by name (`--allow-weak-isolation`, or `$GRADER_ALLOW_WEAK_ISOLATION=1` for the LMS
path), since a student's file could then read the solutions, reach the network and signal the grader. Whatever is
used, `reach` says in one line what a run can reach, printed before anything runs.

Running as root, the child switches to a uid of its own (`setpriv`) chosen per run, so RLIMIT_NPROC is really
enforced and counts only this run's processes, and no file outside its sandbox is writable.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import threading
from functools import lru_cache
from pathlib import Path

from grader.model.limits import Limits
from grader.sandbox.scratch import make_temp_dir

SYSTEM_DIRS = ("/usr", "/etc")
SYSTEM_LINKS_OR_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
UID_RANGE = (200_000, 2_000_000_000)   # far above any account; one uid per concurrent run


def installed(tool: str | None, name: str) -> str:
    """A tool's path, found by `shutil.which` at import; a strategy is only chosen when its tools exist."""
    if tool is None:
        raise RuntimeError(f"`{name}` is not installed, so this isolation strategy cannot be used")
    return tool


def limit_arguments(limits: Limits) -> list[str]:
    """`prlimit` options for the limits."""
    return [f"--{name}={value}" for name, value in limits.rlimits().items()]


class UidPool:
    """Hands out a distinct unused uid to each concurrent run, so runs cannot share a process count or files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: set[int] = set()
        self._system = {entry.pw_uid for entry in pwd.getpwall()}

    def take(self) -> int:
        with self._lock:
            while True:
                uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
                if uid not in self._taken and uid not in self._system:
                    self._taken.add(uid)
                    return uid

    def give_back(self, uid: int) -> None:
        with self._lock:
            self._taken.discard(uid)


UIDS = UidPool()


class Isolation:
    """Base strategy: rlimits, a process group, and (as root) a uid of the run's own."""

    name = "process group only (no namespaces available): student code can see and reach this machine"
    reach = ("NOT sandboxed (no bubblewrap, no unshare): student code can read this machine's files (solutions "
             "included), reach its network and signal its processes")
    has_namespaces = False
    prlimit = shutil.which("prlimit")
    setpriv = shutil.which("setpriv")
    hides_files = False

    @property
    def switches_uid(self) -> bool:
        return os.geteuid() == 0 and self.setpriv is not None

    def namespace_prefix(self, workdir: Path, limits: Limits) -> list[str]:
        return []

    def command(self, argv: list[str], limits: Limits, workdir: Path, uid: int | None) -> list[str]:
        """The full command line: limits, then namespaces, then the uid switch, then `argv`."""
        inner = list(argv)
        if uid is not None and self.switches_uid:
            inner = [installed(self.setpriv, "setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                     "--inh-caps=-all", "--bounding-set=-all", "--", *inner]
        wrapped = self.namespace_prefix(workdir, limits) + inner
        return [self.prlimit, *limit_arguments(limits), "--", *wrapped] if self.prlimit else wrapped

    def prepare_workdir(self, workdir: Path, uid: int | None) -> None:
        """The private dir the child works in: only its own uid may enter it."""
        if uid is not None and self.switches_uid:
            os.chown(workdir, uid, uid)
            os.chmod(workdir, 0o700)

    @property
    def limits_need_pid(self) -> bool:
        """True when limits must be set on the spawned pid (no prlimit binary)."""
        return self.prlimit is None

    def describe(self) -> str:
        parts = [self.name, "rlimits"]
        if self.switches_uid:
            parts.append("a uid of its own")
        elif os.geteuid() == 0:
            parts.append("running as root (setpriv missing), so the process-count limit is not enforced")
        else:
            parts.append("the grader's own uid")
        parts.append("private scratch space" if self.hides_files else "private temp dir")
        if not self.hides_files:
            parts.append("WARNING: the grader's files are readable by student code")
        parts.append("scrubbed environment")
        return ", ".join(parts)

    def works(self) -> bool:
        """Try the strategy once on `true`; a strategy the kernel refuses is never used."""
        workdir = make_temp_dir("probe")
        uid = UIDS.take() if self.switches_uid else None
        try:
            self.prepare_workdir(workdir, uid)
            argv = self.command([sys.executable, "-I", "-c", "import os; open('probe', 'w').close()"],
                                Limits(), workdir, uid)
            done = subprocess.run(argv, capture_output=True, timeout=30, cwd=workdir)
        except (OSError, subprocess.SubprocessError):
            return False
        finally:
            if uid is not None:
                UIDS.give_back(uid)
            shutil.rmtree(workdir, ignore_errors=True)
        return done.returncode == 0


class ProcessGroup(Isolation):
    pass


class Unshare(Isolation):
    name = "pid, network and ipc namespaces (unshare): student code can still read this machine's files"
    reach = ("unshare (no bubblewrap): no network and no other process, but student code can read this machine's "
             "files (solutions included)")
    has_namespaces = True
    unshare = shutil.which("unshare")

    def namespace_prefix(self, workdir: Path, limits: Limits) -> list[str]:
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return [installed(self.unshare, "unshare"), *user, "--pid", "--fork", "--kill-child", "--net", "--ipc", "--"]

    def works(self) -> bool:
        return bool(self.unshare) and super().works()


class Bubblewrap(Isolation):
    name = ("bubblewrap: pid, network, ipc and mount namespaces, read-only system, "
            "grader and instructor files invisible")
    reach = ("bubblewrap: no network, no other process, the system and Python read-only, no grader or instructor "
             "file; only its own scratch space is writable")
    has_namespaces = True
    bwrap = shutil.which("bwrap")
    hides_files = True
    writable: tuple[tuple[Path, str], ...] = ()

    def namespace_prefix(self, workdir: Path, limits: Limits) -> list[str]:
        args = [installed(self.bwrap, "bwrap"), *NAMESPACES, *system_view(limits.scratch_bytes)]
        for host, inside in self.writable:
            args += parents_traversable(Path(inside)) + ["--bind", str(host), str(inside)]
        # The working dir lives in the private tmpfs at the same path as the host's; only the harness is bound in.
        args += parents_traversable(workdir) + ["--perms", "1777", "--dir", str(workdir)]
        runtime = workdir / RUNTIME_NAME
        if runtime.exists():
            args += ["--ro-bind", str(runtime), str(runtime)]
        return [*args, "--chdir", str(workdir), "--"]

    def with_writable(self, host: Path, inside: str) -> Bubblewrap:
        """The same sandbox with a host folder bound writable at `inside` (trusted runs: warming the compile cache)."""
        copy = Bubblewrap()
        copy.writable = ((host, inside),)
        return copy

    def prepare_workdir(self, workdir: Path, uid: int | None) -> None:
        os.chmod(workdir, 0o755)  # the child never writes here: its working dir is a tmpfs at this path

    def works(self) -> bool:
        return bool(self.bwrap) and super().works()


RUNTIME_NAME = "_grader_runtime"   # the folder of grader/child/ modules inside a run's working dir
NAMESPACES = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--die-with-parent", "--new-session", "--hostname", "sandbox")


def system_view(scratch_bytes: int) -> list[str]:
    """bwrap options for what every sandbox sees: the system and Python read-only, capped private scratch."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in SYSTEM_LINKS_OR_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc"]
    for listing in ("/proc/keys", "/proc/key-users"):   # other users' keys and uids: shown empty
        if os.path.exists(listing):
            args += ["--ro-bind", "/dev/null", listing]
    args += ["--dev", "/dev",
             "--size", str(scratch_bytes), "--perms", "1777", "--tmpfs", "/dev/shm",
             "--size", str(scratch_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    for directory in python_dirs():
        args += parents_traversable(directory) + ["--ro-bind", str(directory), str(directory)]
    return args


def python_dirs() -> list[Path]:
    """The Python installation the child needs (interpreter, stdlib, site-packages), outside the system dirs.

    Only these are shown to the child: an editable install's project folder is left out on purpose."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                  os.path.dirname(os.path.realpath(sys.executable))}
    paths = sorted({Path(p).resolve() for p in candidates if p and os.path.isdir(p)}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in paths:
        if any(str(path) == d or str(path).startswith(d + "/") for d in SYSTEM_DIRS):
            continue
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    # A venv's bin/python is a symlink to the base interpreter; its own folder must be there too.
    venv = Path(sys.prefix)
    if venv not in kept and not any(k in venv.parents for k in kept) and not str(venv).startswith("/usr"):
        kept.append(venv)
    return kept


def parents_traversable(path: Path) -> list[str]:
    """bwrap creates missing parents as root-only dirs; make each one enterable by the child's uid."""
    args: list[str] = []
    for parent in reversed(Path(path).parents):
        if str(parent) in ("/", "/tmp", "/usr", "/etc"):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


@lru_cache(maxsize=1)
def strongest_available() -> Isolation:
    for strategy in (Bubblewrap(), Unshare()):
        if strategy.works():
            return strategy
    return ProcessGroup()


WEAK_ISOLATION_ENV = "GRADER_ALLOW_WEAK_ISOLATION"
_weak_allowed = False   # set by the command line's --allow-weak-isolation, for this process


class WeakIsolation(RuntimeError):
    """No namespaces here and nobody asked for weak isolation by name: nothing is graded."""


def allow_weak_isolation(allowed: bool = True) -> None:
    """The instructor asked, by name, to grade without namespaces (`--allow-weak-isolation`)."""
    global _weak_allowed
    _weak_allowed = allowed


def weak_isolation_allowed() -> bool:
    return _weak_allowed or os.environ.get(WEAK_ISOLATION_ENV, "").strip().lower() in ("1", "true", "yes")


def require_isolation(strategy: Isolation | None = None) -> Isolation:
    """`strategy` (default: the strongest this machine offers) if it gives namespaces or weak isolation was asked
    for by name; else `WeakIsolation` with why and what to install."""
    strategy = strategy or strongest_available()
    if strategy.has_namespaces or weak_isolation_allowed():
        return strategy
    raise WeakIsolation(
        "refusing to grade: this machine offers no namespaces (neither bubblewrap nor util-linux unshare works "
        "here), so student code would run unsandboxed and could read the solutions, reach the network and signal "
        "the grader. Install bubblewrap (apt-get install bubblewrap; run as root for the fork server and a uid per "
        "run), or accept weak isolation by name: --allow-weak-isolation on the command line, "
        f"{WEAK_ISOLATION_ENV}=1 in the environment (otter, Gradescope).")


def reach_line(strategy: Isolation | None = None) -> str:
    """One line for the terminal, before anything runs: what a run can reach."""
    return f"Sandbox: {(strategy or strongest_available()).reach}."


def isolation_for_command(allow_weak: bool = False) -> str:
    """For a command about to grade: records an explicit opt-in, then the line saying what a run can reach (raises
    `WeakIsolation` below namespaces without an opt-in)."""
    if allow_weak:
        allow_weak_isolation()
    return reach_line(require_isolation())


WEAK_OPTION_HELP = ("grade even where no namespaces are available (no bubblewrap, no unshare): student code can then "
                    f"read this machine's files and reach its network (also ${WEAK_ISOLATION_ENV}=1)")
