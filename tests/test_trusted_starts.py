"""Trusted code starts clean (../shared/DESIGN.md, the trust model): no process the grader starts with its own code
imports from the folder the instructor stood in, none holds a credential, and a cache another user could write is
refused before anything in it is read (grader/common/trusted_start.py, grader/common/private_folder.py). A run's
tag folder never reaches a page a student reads (grader/model/job.py).
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import world_ahead
from grader.cli.batch import grade_folder
from grader.cli.main import main
from grader.common.private_folder import UnsafeFolder, private_folder
from grader.common.trusted_start import import_path, looks_like_credential, trusted_environment
from grader.common.user_cache import CACHE_DIR_ENV
from grader.config.assignment import load
from grader.grading.record_limits import bounded_feedback, bounded_messages, bounded_output, shown_output
from grader.grading.warm_state import WarmState
from grader.model.job import without_run_tags
from grader.runs.jobs import VARIANT_SEED_ENV

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another uid needs root")

# A module a student plants beside their file: imported anywhere outside the sandbox, it leaves a file in a folder
# only the host has (inside the sandbox that folder does not exist, so the write fails there).
PLANTED = """\
import os
with open(os.path.join({marker!r}, {name!r} + "-" + str(os.getpid())), "w") as out:
    out.write(os.getcwd() + "\\n" + "\\n".join(sorted(os.environ)))
"""
SECRETS = {"CANVAS_TOKEN": "canvas-secret", "GRADER_CANVAS_TOKEN": "grader-secret", "AWS_SECRET_ACCESS_KEY": "aws"}


def _plant(folder: Path, marker: Path) -> None:
    for name in ("argparse", "json", "runpy", "site", "encodings"):
        (folder / f"{name}.py").write_text(PLANTED.format(marker=str(marker), name=name))
    package = folder / "grader"
    package.mkdir()
    (package / "__init__.py").write_text(PLANTED.format(marker=str(marker), name="grader"))
    (package / "cli").mkdir()
    (package / "cli" / "__init__.py").write_text(PLANTED.format(marker=str(marker), name="grader.cli"))


def _is_python(word: str) -> bool:
    return Path(word).name.startswith("python") or word == sys.executable


def _starts_clean(argv: list[str], env: dict | None, cwd, inside: Path) -> list[str]:
    """What is wrong with one recorded process start (nothing: [])."""
    wrong = []
    if env is None:
        wrong.append("inherits the grader's whole environment")
    else:
        wrong += [f"is given {name}" for name in env if looks_like_credential(name)]
        path = env.get("PYTHONPATH", "")
        wrong += [f"has {entry!r} on PYTHONPATH" for entry in path.split(os.pathsep)
                  if entry and (not os.path.isabs(entry) or Path(entry).resolve().is_relative_to(inside))]
    pythons = [index for index, word in enumerate(argv) if _is_python(word)]
    if pythons and (cwd is None or Path(cwd).resolve().is_relative_to(inside)):   # (a tool such as ldconfig: no)
        wrong.append(f"starts Python in {cwd or 'the folder the grader was started in'}")
    for index in pythons:
        if not {"-I", "-P"} & set(argv[index + 1:index + 3]):
            wrong.append("runs Python with the working folder first on sys.path")
    return wrong


@pytest.mark.slow
def test_a_batch_started_inside_the_submissions_folder_runs_nothing_planted_there(tmp_path, monkeypatch):
    """`grader grade .` from inside the class folder, which holds argparse.py, json.py and a `grader/` package, with
    credentials in the environment: every process the grader starts (the sandbox's probe, the fork server, each
    run, the detached next-world step) starts elsewhere, with no credential, and imports nothing planted; the planted
    files are graded as submissions, in the sandbox. A student-facing page never shows the run's tag."""
    assignment = load("performance-05")
    assignment.config["assignment"]["method_sampler_min_submissions"] = 1   # one file is a large batch
    monkeypatch.setenv(world_ahead.ENABLED_ENV, "1")
    monkeypatch.delenv(VARIANT_SEED_ENV, raising=False)   # a drawn seed: the batch leaves the next world's step
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    marker = tmp_path / "ran-outside-the-sandbox"
    marker.mkdir()
    folder = tmp_path / "class"
    folder.mkdir()
    _plant(folder, marker)
    source = assignment.solution_path.read_text()
    # the reference, which also prints the names the run compiled its code under (its tag folder)
    (folder / "tagged.py").write_text(source + "\nimport traceback\nprint((lambda: 0).__code__.co_filename)\n"
                                      "traceback.print_stack()\nraise RuntimeError((lambda: 0).__code__.co_filename)\n")
    monkeypatch.chdir(folder)

    starts: list[tuple[list[str], dict | None, object]] = []
    real_popen = subprocess.Popen

    class Recorded(real_popen):   # type: ignore[valid-type,misc]
        def __init__(self, args, *more, **options):
            starts.append(([str(a) for a in args], options.get("env"), options.get("cwd")))
            super().__init__(args, *more, **options)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    result = grade_folder(assignment, Path("."), tmp_path / "out", regrade=True)
    seen_alive = None
    if result.preparing is not None:
        pid = result.preparing.process.pid
        try:   # the detached process as the kernel sees it, while it runs
            seen_alive = (Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"), os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            seen_alive = None
        assert result.preparing.wait(timeout=600) is not None
    monkeypatch.setattr(subprocess, "Popen", real_popen)

    assert result.preparing is not None, "a large batch leaves the next world's step: it is part of what is checked"
    assert starts, "the batch started processes of its own"
    assert not list(marker.iterdir()), [p.name + ': ' + p.read_text()[:200] for p in marker.iterdir()]
    problems = {" ".join(argv)[:160]: wrong for argv, env, cwd in starts
                if (wrong := _starts_clean(argv, env, cwd, folder.resolve()))}
    assert not problems, problems
    if seen_alive is not None:
        names = {entry.split(b"=", 1)[0].decode() for entry in seen_alive[0] if entry}
        assert not names & set(SECRETS), names & set(SECRETS)
        assert not Path(seen_alive[1]).resolve().is_relative_to(folder.resolve())

    by_id = {record["submission"]: record for record in result.records}
    assert by_id["tagged"]["status"] == "graded"
    for planted in ("argparse", "json"):
        assert by_id[planted]["status"] == "graded", "a planted module is a submission like any other, run in the sandbox"
    out = tmp_path / "out"   # what a student reads: the feedback pages and Gradescope's results.json
    pages = [*out.glob("*.feedback.*"), *(out / "gradescope").glob("*.json")]
    assert len(pages) >= 3 * len(result.records)
    shown = [p.name for p in pages if "/run-" in p.read_text(encoding="utf-8", errors="replace")]
    assert not shown, f"a run's tag folder reached {shown}"


def test_trusted_environment_keeps_what_python_needs_and_no_credential(monkeypatch, tmp_path):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", ".", "relative/lib", str(tmp_path / "lib"), os.getcwd()]))
    environment = trusted_environment()
    assert not set(SECRETS) & set(environment)
    assert environment["GRADER_CACHE_DIR"] == str(tmp_path) and environment["JAX_ENABLE_X64"] == "1"
    assert environment["PATH"] == os.environ["PATH"]
    entries = environment["PYTHONPATH"].split(os.pathsep)
    assert entries == import_path() and str(tmp_path / "lib") in entries
    assert all(os.path.isabs(entry) for entry in entries), "an empty or relative entry is the working folder"
    assert os.path.realpath(os.getcwd()) not in [os.path.realpath(e) for e in entries[1:]]


# ---- caches -------------------------------------------------------------------------------------------------


def test_a_missing_cache_is_made_the_users_alone(tmp_path):
    folder = private_folder(tmp_path / "a" / "b" / "cache")
    for made in (folder, folder.parent, folder.parent.parent):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made


@pytest.mark.parametrize("mode, who", [(0o770, "its group"), (0o707, "every user"), (0o777, "its group and every user")])
def test_a_cache_others_can_write_is_refused(tmp_path, mode, who):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(mode)
    with pytest.raises(UnsafeFolder, match=f"writable by {who}.*chmod 700"):
        private_folder(cache)


def test_a_cache_inside_a_folder_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)   # no sticky bit: anyone may rename the cache away and put theirs in its place
    with pytest.raises(UnsafeFolder, match="can write, so they could replace it"):
        private_folder(shared / "cache")


def test_a_cache_under_a_sticky_shared_folder_needs_a_per_user_part(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(UnsafeFolder, match="no per-user part"):
        private_folder(shared / "grader-cache")
    user = pwd.getpwuid(os.geteuid()).pw_name
    assert private_folder(shared / f"grader-cache-{user}") == shared / f"grader-cache-{user}"
    assert private_folder(shared / f"{os.geteuid()}" / "grader") == shared / f"{os.geteuid()}" / "grader"
    with pytest.raises(UnsafeFolder, match="no per-user part"):     # a shared name the grader would make now
        private_folder(shared / "course" / "cache")
    assert not (shared / "course").exists()   # and not left behind, for the next command to take as the user's own


def test_a_checkout_of_ones_own_in_a_sticky_shared_folder_may_hold_its_cache(tmp_path):
    """`/tmp/course` made by the user, writable by no one else (a clone in /tmp): the cache in its build folder is
    the user's; the name of a folder the user already owns proves nothing more."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    checkout = shared / "course"
    checkout.mkdir(mode=0o755)
    assert private_folder(checkout / "build" / "cache") == checkout / "build" / "cache"
    checkout.chmod(0o777)   # but not one others can write: they could swap the build folder
    with pytest.raises(UnsafeFolder, match="can write, so they could replace it"):
        private_folder(checkout / "build" / "cache2")


@ROOT_ONLY
def test_a_foreign_owned_cache_is_refused_and_nothing_in_it_is_read(tmp_path, monkeypatch):
    """Another user's warm state with a planted world: `grader grade` and `grader check` stop (exit 2) naming the
    owner and the fix, and open nothing under it; WarmState refuses it too."""
    # `--cache-dir` names the folder in $GRADER_CACHE_DIR for the commands it starts: put the session's back after
    monkeypatch.setenv(CACHE_DIR_ENV, os.environ.get(CACHE_DIR_ENV, str(tmp_path / "session-cache")))
    cache = tmp_path / "cache"
    planted = cache / "warm" / "planted"
    planted.mkdir(parents=True)
    (planted / "variant-seeds.json").write_text("[12345]")
    for path in (cache, cache / "warm", planted, planted / "variant-seeds.json"):
        os.chown(path, 54321, 54321)
    cache.chmod(0o755)
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text("x = 1\n")
    opened: list[str] = []
    listening = [True]

    def audit(event: str, args: tuple) -> None:
        if listening[0] and event in ("open", "os.listdir", "os.scandir") and args and \
                str(args[0]).startswith(str(cache)) and str(args[0]) != str(cache):
            opened.append(str(args[0]))

    sys.addaudithook(audit)
    try:
        for command in (["grade", str(folder), "--out", str(tmp_path / "out")], ["check", str(folder / "alice.py")]):
            with _Captured() as captured:
                status = main([*command, "--cache-dir", str(cache)])
            assert status == 2, (command, captured.text)
            assert "belongs to uid 54321" in captured.text and "--cache-dir" in captured.text, captured.text
            assert captured.text.count("\n") == 1, "one sentence"
    finally:
        listening[0] = False
    assert not opened, opened
    assert not (tmp_path / "out").exists()
    with pytest.raises(UnsafeFolder, match="belongs to uid 54321"):
        WarmState(load("performance-05"), cache)


class _Captured:
    """What `main` printed on stderr."""

    def __enter__(self):
        import io
        self._saved, self._stream = sys.stderr, io.StringIO()
        sys.stderr = self._stream
        return self

    def __exit__(self, *exc):
        sys.stderr = self._saved
        self.text = self._stream.getvalue()


# ---- the run's tag ------------------------------------------------------------------------------------------


def test_no_text_a_student_reads_keeps_a_run_tag():
    shown = 'File "/run-0123456789abcdef/performance-05.py", line 3, in <module>'
    assert without_run_tags(shown) == 'File "performance-05.py", line 3, in <module>'
    assert "/run-" not in bounded_feedback(shown) and "/run-" not in bounded_messages([shown])[0]
    assert all("/run-" not in text for text in shown_output(*bounded_output(shown, shown, omitted=True)))
    assert without_run_tags("/run-notatag/x.py") == "/run-notatag/x.py"


def test_the_autograder_image_warms_with_no_working_folder_on_sys_path():
    from grader.lms.autograder_zip import RUN_AUTOGRADER, SETUP_SH
    assert "python -P /autograder/source/run_otter.py" in RUN_AUTOGRADER
    assert '"$VENV/bin/python" -P -m grader.lms.otter_plugin warm' in SETUP_SH
