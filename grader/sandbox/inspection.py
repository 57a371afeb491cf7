"""What a sandbox really gives a run, seen from inside it by a trusted probe: never what a strategy declares.

A strategy (isolation.py) or a runner (the fork server) counts as strong only when a run it starts
- sees none of the machine's files but what it is given (a canary file the grader has just made is invisible, and
  the Python installation it is shown is read-only),
- has its own /proc (its own pid namespace, and a /proc mounted for it: the grader's process is not listed), and
- runs as an unprivileged uid of its own (neither root nor the grader's uid, and no capability left).
Anything less is weak. Root (uid 0, or any effective capability) is refused in every mode.

`PROBE_SOURCE` defines `observe(canary, grader_pid, grader_pid_namespace, grader_uid)` in plain Python (no grader
import): it runs as a script under a strategy's command line, and as the source of a harness job through a
runner, so the very path student code takes is the one inspected. The probe is the grader's own code: nothing of
a student's runs in it, so what it reports is trusted.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox.scratch import make_temp_dir

PROBE_SOURCE = r'''
def observe(canary, grader_pid, grader_pid_namespace, grader_uid):
    import os, sys, sysconfig
    found = {"uid": os.getuid(), "euid": os.geteuid(), "grader_uid": grader_uid}
    try:
        with open(canary) as stream:
            found["canary"] = stream.read() != ""
    except OSError:
        found["canary"] = os.path.exists(canary)
    try:
        found["proc_self"] = int(os.readlink("/proc/self")) == os.getpid()
    except (OSError, ValueError):
        found["proc_self"] = False
    found["grader_listed"] = os.path.exists("/proc/%d" % grader_pid) and grader_pid != os.getpid()
    try:
        found["pid_namespace"] = os.readlink("/proc/self/ns/pid")
    except OSError:
        found["pid_namespace"] = ""
    found["shares_pid_namespace"] = found["pid_namespace"] == grader_pid_namespace
    capabilities = 0
    try:
        with open("/proc/self/status") as stream:
            for line in stream:
                if line.startswith("CapEff:"):
                    capabilities = int(line.split()[1], 16)
    except (OSError, ValueError):
        capabilities = -1
    found["capabilities"] = capabilities
    places = {sys.prefix, sys.base_prefix, sysconfig.get_paths()["purelib"], os.path.dirname(canary)}
    found["writable"] = sorted(p for p in places if p and os.path.isdir(p) and os.access(p, os.W_OK))
    try:
        with open("/proc/net/dev") as stream:
            found["interfaces"] = sorted(line.split(":")[0].strip() for line in stream.readlines()[2:])
    except OSError:
        found["interfaces"] = []
    return found
'''


@dataclass(frozen=True)
class SandboxFacts:
    """What one probe run saw of its sandbox (`failure`: why the probe could not run at all)."""

    failure: str = ""
    cannot_start_python: bool = False    # `failure` is python_access.py's sentence: found before any run
    host_files_visible: bool = True
    own_proc: bool = False
    uid: int | None = None
    grader_uid: int | None = None
    capabilities: bool = True
    writable: tuple[str, ...] = ()
    network: tuple[str, ...] = field(default=())

    @property
    def ran(self) -> bool:
        return not self.failure

    @property
    def as_root(self) -> bool:
        """Student code would run as root (uid 0 or a capability): refused in every mode."""
        return self.ran and (self.uid == 0 or self.capabilities)

    @property
    def own_uid(self) -> bool:
        return self.ran and self.uid is not None and self.uid not in (0, self.grader_uid) and not self.capabilities

    @property
    def strong(self) -> bool:
        return (self.ran and not self.host_files_visible and self.own_proc and self.own_uid and not self.writable
                and not self.network)

    def weaknesses(self) -> list[str]:
        """What makes a run's sandbox weak, in words (empty when it is strong)."""
        if not self.ran:
            return [self.failure if self.cannot_start_python else f"a run could not start ({self.failure})"]
        found = []
        if self.host_files_visible:
            found.append("the machine's files are visible to student code")
        if self.writable:
            found.append(f"student code can write to {', '.join(self.writable)}")
        if not self.own_proc:
            found.append("student code shares the machine's /proc (it can see the grader's processes)")
        if self.network:
            found.append(f"student code can reach the network ({', '.join(self.network)})")
        if self.as_root:
            found.append("student code would run as root" + (" with capabilities" if self.capabilities else ""))
        elif not self.own_uid:
            found.append("student code would run as the grader's own uid")
        return found

    @classmethod
    def from_observation(cls, seen: object) -> SandboxFacts:
        """Facts from the probe's report (anything malformed is a probe that did not run)."""
        if not isinstance(seen, dict):
            return cls(failure=f"the probe reported {type(seen).__name__}, not its observations")
        try:
            uid, euid = int(seen["uid"]), int(seen["euid"])
            capabilities = int(seen["capabilities"])
            return cls(host_files_visible=bool(seen["canary"]),
                       own_proc=bool(seen["proc_self"]) and not seen["grader_listed"] and not seen["shares_pid_namespace"],
                       uid=uid if uid == euid else 0, grader_uid=int(seen["grader_uid"]), capabilities=capabilities != 0,
                       writable=tuple(str(p) for p in seen["writable"]),
                       network=tuple(str(i) for i in seen["interfaces"] if i != "lo"))
        except (KeyError, TypeError, ValueError) as error:
            return cls(failure=f"the probe's report was incomplete ({type(error).__name__}: {error})")


@dataclass
class Canary:
    """A file only the grader may see: made fresh for one probe, removed after it."""

    folder: Path
    path: Path

    @classmethod
    def make(cls) -> Canary:
        folder = make_temp_dir("probe")
        path = folder / f"canary-{secrets.token_hex(6)}"
        path.write_text("the grader's own file\n")
        os.chmod(folder, 0o755)
        os.chmod(path, 0o644)      # readable by any uid: only the sandbox's mount namespace may hide it
        return cls(folder, path)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def grader_pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def probe_call(canary: Path) -> str:
    """The Python expression that observes the sandbox from inside it, for the grader's process and `canary`."""
    return (f"observe({str(canary)!r}, {os.getpid()}, {grader_pid_namespace()!r}, {os.geteuid()})")


def script(canary: Path) -> str:
    """The probe as a script that prints its observations as JSON (run under a strategy's command line)."""
    return f"{PROBE_SOURCE}\nimport json\nprint(json.dumps({probe_call(canary)}))\n"


def job_source(canary: Path, name: str) -> str:
    """The probe as the source of a harness job that binds its observations to `name` (run through a runner)."""
    return f"{PROBE_SOURCE}\n{name} = {probe_call(canary)}\n"


def inspect_with(run: Callable[[Path], object]) -> SandboxFacts:
    """Facts from `run(canary)`, which runs the probe in a sandbox and returns its observations (a dict), or raises
    with why it could not run. The canary exists only for that run."""
    canary = Canary.make()
    try:
        try:
            seen = run(canary.path)
        except Exception as error:  # noqa: BLE001 -- a sandbox that cannot run the probe is unusable, whatever failed
            return SandboxFacts(failure=f"{type(error).__name__}: {str(error)[:300]}")
        return SandboxFacts.from_observation(seen)
    finally:
        canary.remove()


def parse_printed(stdout: bytes) -> object:
    """The probe script's JSON line from its output."""
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    if not lines:
        raise RuntimeError("the probe printed nothing")
    return json.loads(lines[-1])
