"""How a student process is isolated: the strongest mechanism this machine really offers, chosen once per command
by what a probe saw from inside each (grader/sandbox/inspection.py), and named in every result.

Each strategy turns the harness command line into the sandboxed one, in three layers:
  prlimit (rlimits, set before anything runs)  ->  namespaces  ->  setpriv (a fresh unprivileged uid)  ->  python
Strategies, strongest first:

- `Bubblewrap`: `bwrap` gives new pid, network, ipc and uts namespaces and a mount namespace that shows only
  the system (read-only) and the Python installation (read-only). The project checkout, the solutions, the
  assignment configs and the output folder do not exist inside. The only writable places are a size-capped
  tmpfs (the working dir and /tmp) and a size-capped /dev/shm, all gone when the run ends.
- `Unshare`: util-linux `unshare` for pid, network and ipc namespaces. Files and /proc stay the machine's: weak.
- `ProcessGroup`: rlimits and a process group only: weak.

A strategy counts as strong only when its probe run saw none of the machine's files, its own /proc and a uid of its
own (inspection.py); a strategy whose tool is installed but fails, or that shows the machine's files, is weak. The
grader fails closed: `require_isolation` refuses (`WeakIsolation`, exit 2 at the command line) anything weak unless
the instructor asks for it by name (`--allow-weak-isolation`, `$GRADER_ALLOW_WEAK_ISOLATION=1`, the LMS setting),
and refuses in every mode a sandbox in which student code would run as root. Whatever is used, `reach` says in one
line what a run can reach, printed before anything runs.

Running as root, the child switches to a uid of its own (`setpriv`) chosen per run, so RLIMIT_NPROC is really
enforced and counts only this run's processes, and no file outside its sandbox is writable.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import threading
from functools import lru_cache
from pathlib import Path

from grader.common import system
from grader.model.limits import Limits
from grader.sandbox.inspection import SandboxFacts, inspect_with, parse_printed, script
from grader.sandbox.python_access import cannot_start
from grader.sandbox.run_environment import child_environment
from grader.sandbox.scratch import make_temp_dir
from grader.sandbox.shared_python import folders_to_show

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
        self._system: set[int] | None = None   # the accounts' uids, read at the first run that switches uid (POSIX)

    def take(self) -> int:
        with self._lock:
            if self._system is None:
                import pwd
                self._system = {entry.pw_uid for entry in pwd.getpwall()}
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

    name = "process group only (no namespaces): student code can see and reach this machine"
    reach = ("NOT sandboxed (no working bubblewrap or unshare): student code can read this machine's files (solutions "
             "included), reach its network and signal its processes")
    prlimit = shutil.which("prlimit")
    passed_over: list[Isolation] = []    # the stronger strategies tried before this one (for a refusal's reasons)
    setpriv = shutil.which("setpriv")
    portable = False                     # the plain-subprocess strategy of a student's check (Portable)

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
        """What a run under this strategy gets, as its probe saw it (every record names it)."""
        facts = self.facts
        parts = [self.name, "rlimits", "a uid of its own" if facts.own_uid else "the grader's own uid",
                 "private temp dir" if facts.host_files_visible else "private scratch space", "scrubbed environment"]
        if not facts.strong:
            parts.append("WEAK (asked for by name): " + "; ".join(facts.weaknesses()))
        return ", ".join(parts)

    def works(self) -> bool:
        """The strategy starts a run at all (strong or weak)."""
        return self.facts.ran

    @property
    def facts(self) -> SandboxFacts:
        """What a probe run under this strategy saw of its sandbox (measured once per strategy object)."""
        if self._facts is None:
            self._facts = self.inspect()
        return self._facts

    _facts: SandboxFacts | None = None

    @property
    def strong(self) -> bool:
        return self.facts.strong

    def available(self) -> bool:
        """Its tools are installed (a strategy whose tools are missing is not even tried)."""
        return True

    def inspect(self) -> SandboxFacts:
        """Run the probe under this strategy's command line, as a run would be (a uid of its own when root)."""
        if not self.available():
            return SandboxFacts(failure=f"{type(self).__name__.lower()}'s tool is not installed")
        problem = self.python_problem()
        if problem:   # its runs could not even start this Python: said now, with the fix, never by a failing run
            return SandboxFacts(failure=problem, cannot_start_python=True)
        return inspect_with(self._probe)

    def python_problem(self) -> str | None:
        """Why a run's own uid cannot start this Python (python_access.py), where runs switch to one; else None."""
        return cannot_start() if self.switches_uid else None

    def _probe(self, canary: Path) -> object:
        workdir = make_temp_dir("probe")
        uid = UIDS.take() if self.switches_uid else None
        try:
            self.prepare_workdir(workdir, uid)
            argv = self.command([sys.executable, "-I", "-c", script(canary)], Limits(), workdir, uid)
            done = subprocess.run(argv, capture_output=True, timeout=60, cwd=workdir, env=child_environment(workdir))
            if done.returncode != 0:
                raise RuntimeError(f"exit status {done.returncode}: "
                                   f"{done.stderr.decode('utf-8', 'replace').strip()[-300:] or 'no message'}")
            return parse_printed(done.stdout)
        finally:
            if uid is not None:
                UIDS.give_back(uid)
            shutil.rmtree(workdir, ignore_errors=True)


class ProcessGroup(Isolation):
    pass


class Unshare(Isolation):
    name = "pid, network and ipc namespaces (unshare): student code can still read this machine's files"
    reach = ("unshare (no working bubblewrap): no network, but student code can read this machine's files (solutions "
             "included) and its /proc")
    unshare = shutil.which("unshare")

    def namespace_prefix(self, workdir: Path, limits: Limits) -> list[str]:
        user = [] if os.geteuid() == 0 else ["--user"]   # no root mapping: student code never runs as (mapped) root
        return [installed(self.unshare, "unshare"), *user, "--pid", "--fork", "--kill-child", "--net", "--ipc", "--"]

    def available(self) -> bool:
        return bool(self.unshare)


class Bubblewrap(Isolation):
    name = ("bubblewrap: pid, network, ipc and mount namespaces, read-only system, "
            "grader and instructor files invisible")
    reach = ("bubblewrap: no network, no other process, the system and Python read-only, no grader or instructor "
             "file; only its own scratch space is writable")
    bwrap = shutil.which("bwrap")
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
        copy._facts = self._facts       # the same sandbox, measured once
        return copy

    def prepare_workdir(self, workdir: Path, uid: int | None) -> None:
        os.chmod(workdir, 0o755)  # the child never writes here: its working dir is a tmpfs at this path

    def available(self) -> bool:
        return bool(self.bwrap)

    def python_problem(self) -> str | None:
        """As for any strategy, but only the folders the sandbox shows count (the folders above them it makes
        enterable)."""
        if not self.switches_uid:
            return None
        shown = python_dirs() + [Path(path) for path in (*SYSTEM_DIRS, *SYSTEM_LINKS_OR_DIRS) if os.path.isdir(path)]
        return cannot_start(shown=shown)


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
    # A student's check: the folders its own Python imports from (user site, PYTHONPATH), shown read-only too.
    for folder in folders_to_show():
        if not any(str(folder) == d or str(folder).startswith(d + "/") for d in SYSTEM_DIRS) and \
                not any(folder == k or k in folder.parents for k in kept):
            kept.append(folder)
    return kept


def parents_traversable(path: Path) -> list[str]:
    """bwrap creates missing parents as root-only dirs; make each one enterable by the child's uid."""
    args: list[str] = []
    for parent in reversed(Path(path).parents):
        if str(parent) in ("/", "/tmp", "/usr", "/etc"):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def strongest_available() -> Isolation:
    """The first strategy whose probe run was strong; else the first that runs at all (weak: `require_isolation`
    refuses it unless asked for); else the process group (whose facts say why nothing runs). Measured once per
    process: `recheck` measures again (each batch does). A system without POSIX (Windows) has none to probe."""
    if not system.POSIX:
        nothing = ProcessGroup()
        nothing._facts = SandboxFacts(failure="this system has no sandbox: bubblewrap, unshare and rlimits are Linux's")
        return nothing
    return _strongest()


@lru_cache(maxsize=1)
def _strongest() -> Isolation:
    tried: list[Isolation] = []
    for strategy in (Bubblewrap(), Unshare(), ProcessGroup()):
        if strategy.available() and strategy.strong:
            return strategy
        tried.append(strategy)
    usable = [strategy for strategy in tried if strategy.available() and strategy.works()]
    chosen = usable[0] if usable else tried[-1]
    chosen.passed_over = [strategy for strategy in tried if strategy is not chosen]
    return chosen


def recheck() -> Isolation:
    """Inspect the machine's strategies again (a batch checks its own preconditions, not an earlier command's)."""
    _strongest.cache_clear()
    return strongest_available()


WEAK_ISOLATION_ENV = "GRADER_ALLOW_WEAK_ISOLATION"
_weak_allowed = False   # set by the command line's --allow-weak-isolation, for this process


class WeakIsolation(RuntimeError):
    """No strong sandbox here and nobody asked for weak isolation by name, or student code would run as root:
    nothing is graded."""


def allow_weak_isolation(allowed: bool = True) -> None:
    """The instructor asked, by name, to grade without a strong sandbox (`--allow-weak-isolation`)."""
    global _weak_allowed
    _weak_allowed = allowed


def weak_isolation_allowed() -> bool:
    return _weak_allowed or os.environ.get(WEAK_ISOLATION_ENV, "").strip().lower() in ("1", "true", "yes")


def _why(strategy: Isolation) -> str:
    """What each strategy tried gave, for a refusal: the reader can see which tool failed and how."""
    tried = [*getattr(strategy, "passed_over", []), strategy]
    parts = []
    for each in tried:
        facts = each.facts
        label = type(each).__name__.lower()
        parts.append(f"{label}: {'; '.join(facts.weaknesses()) or 'strong'}")
    return " / ".join(parts)


def require_isolation(strategy: Isolation | None = None, allow_weak: bool | None = None) -> Isolation:
    """`strategy` (default: the strongest this machine offers) when its probe run was strong, or when weak isolation
    was asked for by name (`allow_weak`, default: this process's opt-in) and student code would still not run as
    root; else `WeakIsolation` with what each strategy gave and what to do."""
    strategy = strategy or strongest_available()
    facts = strategy.facts
    if facts.strong:
        return strategy
    if facts.cannot_start_python:   # one sentence with the folder and the fix (what was tried before, after it)
        before = [f"{type(each).__name__.lower()}: {'; '.join(each.facts.weaknesses())}"
                  for each in getattr(strategy, "passed_over", []) if each.facts.failure != facts.failure]
        raise WeakIsolation(f"refusing to grade: {facts.failure}" + (f" (tried first: {' / '.join(before)})"
                                                                       if before else ""))
    if not facts.ran or facts.as_root:
        raise WeakIsolation(
            f"refusing to grade: no sandbox here can run student code safely ({_why(strategy)}). Student code never "
            "runs as root and never outside a sandbox that starts: install bubblewrap (apt-get install bubblewrap) "
            "and util-linux's setpriv, and run the grader as root for a uid per run.")
    if weak_isolation_allowed() if allow_weak is None else allow_weak:
        return strategy
    raise WeakIsolation(
        f"refusing to grade: this machine offers no strong sandbox ({_why(strategy)}), so student code could read "
        "the solutions, reach the network or signal the grader. Install bubblewrap (apt-get install bubblewrap; run "
        "as root for the fork server and a uid per run), or accept weak isolation by name: --allow-weak-isolation "
        f"on the command line, {WEAK_ISOLATION_ENV}=1 in the environment (otter, Gradescope).")


def reach_line(strategy: Isolation | None = None) -> str:
    """One line for the terminal, before anything runs: what a run can reach."""
    strategy = strategy or strongest_available()
    if strategy.portable:
        return f"Runs: {strategy.reach} ({sys.executable})."
    if strategy.facts.strong:
        return f"Sandbox: {strategy.reach}."
    return (f"Sandbox: WEAK, used because it was asked for by name: {strategy.reach} "
            f"({'; '.join(strategy.facts.weaknesses())}).")


def isolation_for_command(allow_weak: bool = False) -> str:
    """For a command about to grade: records an explicit opt-in, inspects the machine's sandboxes afresh, then the
    line saying what a run can reach (raises `WeakIsolation` when nothing strong works and no opt-in was given, or
    when student code would run as root)."""
    if allow_weak:
        allow_weak_isolation()
    return reach_line(require_isolation(recheck()))


WEAK_OPTION_HELP = ("grade even where no strong sandbox works (bubblewrap missing or failing): student code can then "
                    f"read this machine's files and see its processes; never as root (also ${WEAK_ISOLATION_ENV}=1)")
