"""The student wheel holds what a student's check needs and nothing the instructor keeps secret.

Unpacked and read: no statement of the solution beyond what the starter already shows, no hidden check (its
function, helpers only it uses, or its id), no `[lms]` table or grading seed; it installs as a wheel (RECORD
hashes), rebuilds byte-identically, and its assignment folder loads on its own with the reference facts."""

import base64
import hashlib
import json
import re
import shutil
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from grader.authoring.starter import render
from grader.authoring.student_wheel import build_wheel_bytes, write_student_wheel
from grader.authoring.visible_subset import visible_checks_source
from grader.config.assignment import load
from grader.config.bundle import PACKAGE, read_bundle
from grader.intake.regions import find_regions

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny_project"
SEED = 424242
HIDDEN_CHECKS = '''

def _secret_helper(value):
    return abs(value - 2.0 * 1.7724538509055159) < 1e-9


def side_is_secretly_right(run, oracle, settings):
    assert _secret_helper(run["side"]), "`side` is not what the secret check wants."
    return "secret passed"
'''
HIDDEN_TOML = f'''
[[checks]]
id = "area.hidden_side"
group = "area"
points = 2
visibility = "hidden"
function = "side_is_secretly_right"
needs = ["side"]

[lms.otter]
seed = {SEED}
'''


@pytest.fixture(scope="module")
def tiny_with_secrets(tmp_path_factory):
    """The tiny assignment plus a hidden check (and a helper only it uses) and a grading seed."""
    root = tmp_path_factory.mktemp("tiny") / "project"
    shutil.copytree(TINY, root)
    folder = root / "assignments" / "tiny"
    toml = (folder / "assignment.toml").read_text().replace("area = { points = 1,", "area = { points = 3,")
    starter = toml.index("[starter]")
    (folder / "assignment.toml").write_text(toml[:starter] + HIDDEN_TOML + "\n" + toml[starter:])
    (folder / "checks.py").write_text((folder / "checks.py").read_text() + HIDDEN_CHECKS)
    (folder / "calibrate.py").write_text("SECRET_CALIBRATION = 'an honest solution lives here'\n")
    return load("tiny", root)


@pytest.fixture(scope="module")
def tiny_wheel(tiny_with_secrets, tmp_path_factory):
    return write_student_wheel(tiny_with_secrets, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def lesson_wheel(tmp_path_factory):
    return write_student_wheel(load("performance-05", ROOT), tmp_path_factory.mktemp("lesson-wheel"))


def texts(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name).decode("utf-8", "replace") for name in archive.namelist()}


def unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    return into / PACKAGE


def test_no_hidden_check_seed_or_extra_file_is_in_the_wheel(tiny_wheel):
    shipped = texts(tiny_wheel)
    everything = "\n".join(shipped.values())
    for secret in ("side_is_secretly_right", "_secret_helper", "area.hidden_side", "secret check", "1.7724538509055159",
                   str(SEED), "SECRET_CALIBRATION"):
        assert secret not in everything, f"{secret!r} is in the student wheel"
    folder = f"{PACKAGE}/assignments/tiny/"
    assert sorted(n[len(folder):] for n in shipped if n.startswith(folder)) == [
        "assignment.toml", "bundle.json", "checks.py", "oracle.py"]
    assert "[lms" not in shipped[folder + "assignment.toml"] and "[starter" not in shipped[folder + "assignment.toml"]


def test_the_bundled_assignment_loads_with_its_visible_checks_and_facts(tiny_wheel, tmp_path):
    root = unpack(tiny_wheel, tmp_path)
    assignment = load("tiny", root)
    visible = [spec for spec in load("tiny", TINY).checks if spec.visibility == "visible"]
    assert [spec.id for spec in assignment.checks] == [spec.id for spec in visible]
    assert assignment.max_score == sum(spec.points for spec in visible)
    assert not assignment.solution_path.exists()
    bundle = read_bundle(assignment.folder)
    assert bundle is not None and bundle.facts == {} and "jax" in bundle.environment
    assert bundle.starter == render(load("tiny", TINY)).python


def test_no_solution_statement_beyond_the_starter_and_the_fact_exercises_is_in_the_lesson_wheel(lesson_wheel):
    """Only `[assignment] fact_exercises` (printed on the lesson page) leave, and only in the facts program."""
    assignment = load("performance-05", ROOT)
    starter = render(assignment).python
    lines = assignment.solution_path.read_text().splitlines()
    facts = set(assignment.config["assignment"]["fact_exercises"])
    kept = {line.strip() for region in find_regions(lines) if region.name in facts for line in region.body(lines)}
    secret = [line.strip() for line in lines if len(line.strip()) >= 16 and line.strip() not in starter]
    assert len(secret) > 10, "the solution should have exercise lines the starter does not show"
    assert kept & set(secret), "the fact exercises' code should be code the starter does not show"
    shipped = texts(lesson_wheel)
    bundle = json.loads(shipped[f"{PACKAGE}/assignments/performance-05/bundle.json"])
    everything = "\n".join([*(text for name, text in shipped.items() if not name.endswith("bundle.json")),
                            json.dumps({key: value for key, value in bundle.items() if key != "fact_source"})])
    leaked = [line for line in secret if line in everything or (line in bundle["fact_source"] and line not in kept)]
    assert not leaked, f"solution lines in the student wheel: {leaked[:5]}"
    assert [line for line in secret if line in kept and line in bundle["fact_source"]], "the facts program lacks them"
    assert not any(name.startswith(("solutions/", "assignments/")) for name in shipped)


def test_the_facts_program_measures_the_bundled_facts_again(lesson_wheel, tmp_path):
    """On the course's JAX, the facts a student's check measures equal those measured from the solution."""
    from grader.grading.warm_state import WarmState

    root = unpack(lesson_wheel, tmp_path / "site")
    assignment = load("performance-05", root)
    bundle = read_bundle(assignment.folder)
    assert bundle is not None and bundle.fact_source and not assignment.solution_path.exists()
    measured = WarmState(assignment, tmp_path / "cache", fact_source=bundle.fact_source).encoded_facts()
    assert set(measured) == {"reports", "memory"} and measured["memory"] == bundle.facts["memory"]

    def without_positions(facts: dict) -> str:   # residual lines cite source lines, which the two programs number apart
        return re.sub(r"performance-05\.py:\d+:\d+", "<line>", json.dumps(facts["reports"], sort_keys=True))
    assert without_positions(measured) == without_positions(bundle.facts)
    assert "<line>" in without_positions(measured)


def test_a_facts_program_that_fails_before_its_facts_is_refused(lesson_wheel, tmp_path):
    from grader.config.assignment import ConfigError
    from grader.grading.warm_state import WarmState

    root = unpack(lesson_wheel, tmp_path / "site")
    assignment = load("performance-05", root)
    bundle = read_bundle(assignment.folder)
    broken = bundle.fact_source.replace("reports=[", "raise RuntimeError('facts program broken')\nreports=[", 1)
    with pytest.raises(ConfigError, match="facts program did not run cleanly"):
        WarmState(assignment, tmp_path / "cache", fact_source=broken).encoded_facts()


def test_the_wheel_record_matches_its_files_and_a_rebuild_is_identical(tiny_with_secrets, tiny_wheel):
    shipped = zipfile.ZipFile(tiny_wheel)
    (record,) = [n for n in shipped.namelist() if n.endswith(".dist-info/RECORD")]
    for line in shipped.read(record).decode().splitlines():
        name, digest, size = line.rsplit(",", 2)
        if name == record:
            continue
        content = shipped.read(name)
        expected = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}" and int(size) == len(content), name
    assert set(shipped.namelist()) == {line.rsplit(",", 2)[0] for line in shipped.read(record).decode().splitlines()}
    assert re.fullmatch(r"tiny_student-[\d.]+-py3-none-any\.whl", tiny_wheel.name)
    assert build_wheel_bytes(tiny_with_secrets, None) == tiny_wheel.read_bytes()


def test_kept_checks_keep_their_line_numbers_and_text():
    source = (ROOT / "assignments" / "performance-05" / "checks.py").read_text()
    kept = visible_checks_source(source, ["eps_is_a_sensible_step"])
    assert len(kept.splitlines()) == len(source.splitlines())
    lines, original = kept.splitlines(), source.splitlines()
    start = next(i for i, line in enumerate(original) if line.startswith("def eps_is_a_sensible_step"))
    assert lines[start] == original[start]
    assert "def hvp_plain_matches_oracle" not in kept and "def no_statement_failed" not in kept
    compile(kept, "checks.py", "exec")


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux-only")
def test_pip_installs_the_wheel(tiny_wheel, tmp_path):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                           str(tmp_path / "site"), str(tiny_wheel)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / PACKAGE / "assignments" / "tiny" / "bundle.json").is_file()
    assert (tmp_path / "site" / "grader" / "student" / "terminal.py").is_file()


def test_a_different_jax_is_named_with_the_checks_it_may_affect():
    from grader.common.environment import environment
    from grader.config.bundle import Bundle
    from grader.student.session import version_note

    assignment = load("performance-05", ROOT)
    same = Bundle(environment=dict(environment()), facts={}, starter="")
    assert version_note(assignment, same, assignment.checks) is None
    older = Bundle(environment={**environment(), "jax": "0.4.1", "jaxlib": "0.4.1"}, facts={}, starter="")
    note = version_note(assignment, older, assignment.checks)
    assert f"jax {environment()['jax']} (the course uses 0.4.1)" in note and "pip install jax==0.4.1 jaxlib==0.4.1" in note
    affected = [spec.id for spec in assignment.checks if {"reports", "memory"} & set(spec.needs)]
    assert "residuals.counts_match_live" in affected and all(check_id in note for check_id in affected)
    assert "directional.automatic" not in note
    measured_here = Bundle(environment=older.environment, facts={}, starter="", fact_source="x = 1\n")
    assert version_note(assignment, measured_here, assignment.checks) is None, "facts measured here: nothing differs"


def test_the_wheel_installs_what_runs_the_starter_notebook_and_its_check_cell(tiny_wheel):
    """The starter notebook ends with a check() cell; running it (Jupyter, nbconvert --execute) needs a kernel
    and nbclient, which the wheel must bring."""
    metadata = next(text for name, text in texts(tiny_wheel).items() if name.endswith(".dist-info/METADATA"))
    required = {line.split(":", 1)[1].strip().split(">")[0].split("=")[0].split("<")[0].lower()
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")}
    assert {"nbclient", "ipykernel", "ipython", "jax", "numpy"} <= required, required
    # the project's bound on ml_dtypes travels with the wheel (a student's checks import JAX, and pay for 0.7.0's import)
    bound = next(spec for spec in tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
                 ["project"]["dependencies"] if spec.startswith("ml_dtypes"))
    assert "<" in bound and f"Requires-Dist: {bound}" in metadata, metadata
