"""Only real isolation counts (grader/sandbox/isolation.py, inspection.py): a strategy is strong only when a probe run
under it saw none of the machine's files, its own /proc and a uid of its own. Anything weaker is refused by
`grader grade`, `grader check`, the otter/Gradescope runner and every run unless asked for by name, and student code
never runs as root, even when asked. Each command says on the terminal, before anything runs, what a run can reach.

The strategies are the machine's own, really probed: a failing or pass-through bubblewrap is a stub script, and a
machine without a strong sandbox is simulated by making the strongest strategy `ProcessGroup` (weak, as its probe
shows); nothing here starts JAX."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import grader.sandbox.isolation as isolation
import grader.sandbox.process as process
from grader.cli.main import main
from grader.sandbox.isolation import (
    WEAK_ISOLATION_ENV,
    Bubblewrap,
    ProcessGroup,
    Unshare,
    WeakIsolation,
    require_isolation,
)
from tests.python_for_others import WHY, needs_python_others_can_start

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_namespaces(monkeypatch):
    """This machine as one without a working bubblewrap or unshare, and with no opt-in yet."""
    monkeypatch.setattr(isolation, "strongest_available", ProcessGroup)
    monkeypatch.delenv(WEAK_ISOLATION_ENV, raising=False)
    monkeypatch.setattr(isolation, "_weak_allowed", False)


def one_submission(tmp_path: Path) -> Path:
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "alice.py").write_text("print('hello')\n")
    return folder


@needs_python_others_can_start
def test_a_strong_sandbox_is_used_without_asking_and_a_weak_one_is_not(monkeypatch):
    monkeypatch.delenv(WEAK_ISOLATION_ENV, raising=False)
    monkeypatch.setattr(isolation, "_weak_allowed", False)
    strong = Bubblewrap()
    assert strong.facts.strong and isinstance(require_isolation(strong), Bubblewrap)
    weak = Unshare()   # pid and network namespaces, but the machine's files and /proc: weak, as its probe sees
    assert weak.facts.ran and weak.facts.host_files_visible and not weak.facts.own_proc and not weak.facts.strong
    with pytest.raises(WeakIsolation, match="unshare: the machine's files are visible"):
        require_isolation(weak)
    assert require_isolation(weak, allow_weak=True) is weak


def stub(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_bubblewrap_that_fails_or_passes_through_is_not_strong(tmp_path):
    failing = Bubblewrap()
    failing.bwrap = stub(tmp_path, "bwrap-failing", "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1")
    assert not failing.facts.ran and "Permission denied" in failing.facts.failure and not failing.works()
    # a bwrap that runs the command without any namespace (an AppArmor-confined or fake one): the probe sees through it.
    # It also drops the uid switch (setpriv ... --) that follows: as another uid the probe would need a Python other
    # users can start, which a Python under a 0700 /root is not; what is judged here is the namespaces' absence.
    through = Bubblewrap()
    through.bwrap = stub(tmp_path, "bwrap-through", 'while [ "$1" != "--" ]; do shift; done; shift; '
                         'case "$1" in */setpriv) while [ "$1" != "--" ]; do shift; done; shift;; esac; exec "$@"')
    facts = through.facts
    assert facts.ran and facts.host_files_visible and not facts.own_proc and not facts.strong
    with pytest.raises(WeakIsolation):
        require_isolation(through, allow_weak=False)


def test_student_code_never_runs_as_root_even_when_weak_isolation_is_asked_for(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root: the case is a grader running as root without a way to drop privileges")
    rooted = ProcessGroup()
    rooted.setpriv = None          # no setpriv: the run would keep the grader's root
    assert rooted.facts.ran and rooted.facts.as_root
    with pytest.raises(WeakIsolation, match="never runs as root"):
        require_isolation(rooted, allow_weak=True)


@needs_python_others_can_start
def test_without_a_strong_sandbox_nothing_runs_unless_asked_for_by_name(no_namespaces, monkeypatch):
    with pytest.raises(WeakIsolation, match="bubblewrap") as refused:
        require_isolation()
    assert "--allow-weak-isolation" in str(refused.value) and WEAK_ISOLATION_ENV in str(refused.value)
    with pytest.raises(WeakIsolation):     # the bottom layer refuses too: no entry point can forget to ask
        process.run_job({"source": "x = 1\n"}, process.Limits())
    monkeypatch.setenv(WEAK_ISOLATION_ENV, "1")
    assert isinstance(require_isolation(), ProcessGroup)


def test_grade_refuses_with_exit_2_and_writes_nothing(no_namespaces, tmp_path, capsys):
    folder, out = one_submission(tmp_path), tmp_path / "results"
    code = main(["grade", str(folder), "--out", str(out), "--root", str(ROOT), "--assignment", "performance-05"])
    err = capsys.readouterr().err
    fix = "apt-get install bubblewrap" if WHY is None else WHY   # where a run's uid cannot start this Python: that
    assert code == 2 and "refusing to grade" in err and fix in err
    assert not out.exists()


def test_check_refuses_with_exit_2(no_namespaces, tmp_path, capsys):
    submission = one_submission(tmp_path) / "alice.py"
    code = main(["check", str(submission), "--root", str(ROOT), "--assignment", "performance-05"])
    captured = capsys.readouterr()
    assert code == 2 and "refusing to grade" in captured.err and captured.out == ""


@needs_python_others_can_start
def test_the_opt_in_is_taken_and_the_terminal_says_the_run_is_not_sandboxed(no_namespaces, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(["grade", str(empty), "--out", str(tmp_path / "results"), "--root", str(ROOT),
                 "--assignment", "performance-05", "--allow-weak-isolation"])
    err = capsys.readouterr().err
    assert code == 2 and "no submissions" in err      # it went on: the empty folder stopped it, not the sandbox
    first = err.splitlines()[0]
    assert first.startswith("Sandbox: WEAK, used because it was asked for by name: NOT sandboxed")
    assert "read this machine's files" in first


def test_the_terminal_says_what_a_run_can_reach_before_anything_runs(tmp_path, capsys):
    assert isinstance(isolation.strongest_available(), Bubblewrap), "bubblewrap is part of the setup here"
    code = main(["grade", str(tmp_path / "missing"), "--root", str(ROOT), "--assignment", "performance-05"])
    first = capsys.readouterr().err.splitlines()[0]
    assert code == 2 and first.startswith("Sandbox: bubblewrap: no network") and "no grader or instructor file" in first


def test_the_lms_runner_refuses_unless_the_assignment_or_the_environment_allows(no_namespaces, tmp_path, monkeypatch):
    from otter.run.run_autograder.utils import OtterRuntimeError

    from grader.lms.autograder_zip import PLUGIN_NAME, otter_config
    from grader.lms.otter_runner import sandboxed_runner

    monkeypatch.chdir(tmp_path)
    runner = sandboxed_runner({"plugins": [{PLUGIN_NAME: {"assignment": "performance-05"}}]})
    assert runner is not None
    with pytest.raises(OtterRuntimeError, match="could not prepare"):
        runner.run()
    # The instructor's opt-in travels in the zip's otter_config.json: [lms] allow_weak_isolation = true
    from dataclasses import replace

    from grader.config.assignment import load
    assignment = load("performance-05", ROOT)
    allowed = replace(assignment, config={**assignment.config, "lms": {**assignment.config.get("lms", {}),
                                                                       "allow_weak_isolation": True}})
    [plugin] = otter_config(allowed)["plugins"]
    assert plugin[PLUGIN_NAME]["allow_weak_isolation"] is True
    assert "allow_weak_isolation" not in otter_config(assignment)["plugins"][0][PLUGIN_NAME]
    assert os.environ.get(WEAK_ISOLATION_ENV) is None
