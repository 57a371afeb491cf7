"""The two LMS paths, driven as an LMS drives them: `otter run -a ZIP FILE` and Gradescope's entry point on an
`/autograder` layout. Each is a process of its own; its pid is kept, so a test can look for what it left behind.
Both inherit `$GRADER_CACHE_DIR` (tests/conftest.py): they find the session's warm state as any command does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

OTTER = Path(sys.executable).with_name("otter")


@dataclass
class LmsRun:
    results: dict              # results.json
    pid: int                   # the grading process (otter's, or the Gradescope entry point's)
    record: dict | None        # the grader's record, where the path leaves it (Gradescope: results/record.json)


def _run(argv: list[str], cwd: Path | str, env: dict[str, str] | None = None) -> int:
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=900)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.pid


def otter_run(zip_path: Path, entry: Path, work: Path) -> LmsRun:
    """`otter run -a ZIP FILE`; a folder is handed over as a zip of its contents, as otter takes folders."""
    work.mkdir(parents=True)
    submission = entry
    if entry.is_dir():
        submission = work / f"{entry.name}.zip"
        with zipfile.ZipFile(submission, "w") as archive:
            for path in sorted(entry.rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(entry).as_posix())
    env = {**os.environ, "PATH": f"{OTTER.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    pid = _run([str(OTTER), "run", "-a", str(zip_path), str(submission), "--no-logo"], work, env)
    return LmsRun(json.loads((work / "results.json").read_text()), pid, None)


# Gradescope's entry point, writing the process's peak resident size (its VmHWM line) to argv[1] as it exits.
PEAK_WRAPPER = """import atexit, runpy, sys
peak, folder = sys.argv[1:3]
def record():
    with open('/proc/self/status') as status, open(peak, 'w') as out:
        out.write(next(line for line in status if line.startswith('VmHWM')))
atexit.register(record)
sys.argv = ['otter_runner', 'gradescope', folder]
runpy.run_module('grader.lms.otter_runner', run_name='__main__', alter_sys=True)
"""


def gradescope_run(zip_path: Path, entry: Path, work: Path, peak: Path | None = None) -> LmsRun:
    """Gradescope's `/autograder` layout in a folder: source/ (the zip), submission/ (the files), results/. With
    `peak`, the grading process's peak memory is written there (a VmHWM line)."""
    for name in ("source", "submission", "results"):
        (work / name).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(work / "source")
    if entry.is_dir():
        shutil.copytree(entry, work / "submission", dirs_exist_ok=True)
    else:
        shutil.copy(entry, work / "submission" / entry.name)
    (work / "submission_metadata.json").write_text("{}")
    command = [sys.executable, "-c", PEAK_WRAPPER, str(peak)] if peak else [sys.executable, "-m", "grader.lms.otter_runner",
                                                                            "gradescope"]
    pid = _run([*command, str(work)], "/")
    record = work / "results" / "record.json"
    return LmsRun(json.loads((work / "results" / "results.json").read_text()), pid,
                  json.loads(record.read_text()) if record.is_file() else None)
