"""A student's `grader check` scores the same however the student wheel was installed: `pip install --user`, `pip
install --target` with PYTHONPATH, or a virtualenv, by a user who is not root and has no bubblewrap, unshare or
setpriv on PATH (a student's laptop or a shared login node).

Why: the check runs each file in a child Python started with `-I` (isolated mode: no PYTHONPATH, no user
site-packages), so where JAX is reachable only through ~/.local or PYTHONPATH the child cannot import it: the check
gives up ("the course bundle's facts program did not run cleanly ... No module named 'numpy'", exit 2) or, past
that, scores even the reference 0. A virtualenv hides it, since its site-packages is the interpreter's own.

Each way installs with Debian's system Python (`/usr/bin/python3.11`, not a venv, so `--user` means something),
offline from a wheelhouse of the versions this checkout runs (the course's pins, so the scores compare), as a
plain user (`gradercheck`, made when the suite runs as root) whose PATH holds only python3, sh and what the way
installed. Every way checks the reference (100 / 100); the untouched starter .py and .ipynb (the visible scores
`grader grade` gives them) and the reference as a notebook (100 / 100) are each checked in one of the ways (CHECKED);
none of the output may say the instructor has been told, which no student-facing check should ever say."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from grader.authoring.student_wheel import write_student_wheel
from grader.common import jax_range
from grader.common.user_cache import user_cache_dir
from grader.config.assignment import load

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "assignments" / "performance-05" / "corpus"
SYSTEM_PYTHON = Path("/usr/bin/python3.11")   # Debian's: no venv, pip 23 (PEP 668: --break-system-packages)
STUDENT = "gradercheck"
PINNED = ["jax", "jaxlib", "numpy", "ml_dtypes", "scipy", "opt_einsum"]   # JAX and its imports, as this checkout runs
NO_SANDBOX_TOOLS = ["bwrap", "unshare", "setpriv"]
WAYS = ["user", "pythonpath", "venv"]
# case: (the file copied, the name it is checked under, what it should score)
CASES = {
    "reference": (ROOT / "solutions" / "performance-05.py", "performance-05.py", "full"),
    "starter": (ROOT / "student_templates" / "performance-05.py", "performance-05.py", "as graded"),
    "starter_notebook": (ROOT / "student_templates" / "performance-05.ipynb", "performance-05.ipynb", "as graded"),
    "reference_notebook": (CORPUS / "notebook_reference.ipynb", "performance-05.ipynb", "full"),
}
# What a way of installing can break is whether the check's child Python reaches JAX and the wheel at all (it starts
# with -I); that shows in any file, so every way checks the reference, and each other case is checked in one way
# (each notebook in a different way): the scores of a starter or a notebook do not depend on where the packages lie,
# and checking all four cases in all three ways ran the same runs three times (test_student_check compares the check
# with the batch on more cases, from the wheel alone).
CHECKED = [(way, "reference") for way in WAYS] + [
    ("user", "starter"), ("pythonpath", "starter_notebook"), ("venv", "reference_notebook")]

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="installs as a plain Linux user")]


@pytest.fixture(scope="module", autouse=True)
def system_python():
    """Debian's Python with pip and venv (scripts/install-test-tools installs them), else a skip saying so; in CI
    (`CI=true`), where they are installed on purpose, their absence fails instead of hiding these tests."""
    ready = SYSTEM_PYTHON.is_file() and subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import pip, venv, ensurepip"], capture_output=True, timeout=60).returncode == 0
    if not ready:
        message = f"needs Debian's {SYSTEM_PYTHON} with pip and venv: run scripts/install-test-tools"
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(message + "; CI installs them, so here they must be present.")
        pytest.skip(message)


@dataclass
class Student:
    uid: int
    gid: int
    home: Path        # this session's folder for the student, owned by them: one home per way below it


def student_account() -> tuple[int, int, Path]:
    """The plain user the student's commands run as: this one, or `gradercheck` (made once) when the suite is root."""
    if os.geteuid() != 0:
        return os.geteuid(), os.getegid(), Path(tempfile.gettempdir())
    try:
        entry = pwd.getpwnam(STUDENT)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        made = subprocess.run([useradd, "-m", "-s", "/bin/sh", STUDENT], capture_output=True, text=True, timeout=60,
                              check=False)
        try:
            entry = pwd.getpwnam(STUDENT)     # made now, or by a run beside this one (then useradd said it exists)
        except KeyError:
            pytest.fail(f"could not make the user {STUDENT}: {made.stdout}{made.stderr}")
    return entry.pw_uid, entry.pw_gid, Path(entry.pw_dir)


def hand_over(path: Path, student: Student) -> None:
    """Give `path` and everything below it to the student (a no-op when they are this user)."""
    if (student.uid, student.gid) == (os.geteuid(), os.getegid()):
        return
    os.chown(path, student.uid, student.gid)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), student.uid, student.gid, follow_symlinks=False)


def as_student(student: Student, argv: list[str], env: dict, cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    switch = {} if student.uid == os.geteuid() else {"user": student.uid, "group": student.gid, "extra_groups": []}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
                          **switch)


def requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        meta = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        return [line.split(":", 1)[1].strip() for line in archive.read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]


def _download(wheel: Path, folder: Path, pins: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--dest", str(folder),
                           "--only-binary=:all:", "--python-version", "3.11", str(wheel), *pins],
                          capture_output=True, text=True, timeout=1800, check=False)


def wheelhouse(wheel: Path) -> Path:
    """The wheel's dependencies at this checkout's versions, for CPython 3.11 (the student's Python here), downloaded
    once per set of pins and requirements (the student wheel itself is built fresh each session and not kept here).
    Where this checkout's JAX has no wheel for 3.11 (JAX 0.11 and later need Python 3.12), the student gets what a
    student with 3.11 gets: the newest JAX of the supported range that installs there, and what it needs."""
    pins = [f"{name}=={metadata.version(name)}" for name in PINNED]
    key = hashlib.sha256(json.dumps([pins, requirements(wheel), "cp311"]).encode()).hexdigest()[:12]
    house = user_cache_dir() / f"student-wheelhouse-{key}"
    if (house / ".complete").is_file():
        return house
    house.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{house.name}.", dir=house.parent))
    done = _download(wheel, building, pins)
    if done.returncode != 0 and "jax==" in done.stderr and "Requires-Python" in done.stderr:
        pins = [f"jax{jax_range.PIP_RANGE}", f"jaxlib{jax_range.PIP_RANGE}"]
        done = _download(wheel, building, pins)
    assert done.returncode == 0, done.stdout + done.stderr
    (building / wheel.name).unlink(missing_ok=True)
    (building / ".complete").write_text("\n".join(pins) + "\n")
    try:
        building.rename(house)
    except OSError:                                   # a run beside this one finished first: use its folder
        shutil.rmtree(building, ignore_errors=True)
    return house


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The student's folder for this session, with the fresh wheel and the wheelhouse copied where they can read."""
    wheel = write_student_wheel(load("performance-05", ROOT), tmp_path_factory.mktemp("dist"))
    house = wheelhouse(wheel)
    uid, gid, home = student_account()
    folder = Path(tempfile.mkdtemp(prefix="check-everywhere-", dir=home))
    student = Student(uid, gid, folder)
    shutil.copytree(house, folder / "wheelhouse")
    shutil.copy(wheel, folder / "wheelhouse" / wheel.name)
    bin_dir = folder / "bin"                  # the commands a student's PATH gives: no /usr/bin, /bin or sbin
    bin_dir.mkdir()
    for name, target in [("python3", SYSTEM_PYTHON), ("python3.11", SYSTEM_PYTHON), ("sh", Path("/bin/sh"))]:
        (bin_dir / name).symlink_to(target)
    hand_over(folder, student)
    yield student, folder / "wheelhouse" / wheel.name
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def installs(session):
    """Each way installed once (lazily, as the student), memoized: the way's environment and its check command."""
    student, wheel = session
    made: dict[str, tuple[dict, list[str]] | str] = {}

    def install(way: str) -> tuple[dict, list[str]]:
        if way not in made:
            start = time.monotonic()
            try:
                made[way] = install_one(student, wheel, way)
                print(f"installed the '{way}' way in {time.monotonic() - start:.0f} s")
            except AssertionError as error:
                made[way] = f"installing the '{way}' way failed: {error}"
        assert not isinstance(made[way], str), made[way]
        return made[way]

    return student, install


def install_one(student: Student, wheel: Path, way: str) -> tuple[dict, list[str]]:
    home = student.home / way
    home.mkdir()
    hand_over(home, student)
    private_bin = student.home / "bin"
    env = {"HOME": str(home), "PATH": str(private_bin), "LANG": "C.UTF-8"}
    pip_env = {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    offline = ["--no-index", "--find-links", str(wheel.parent), str(wheel)]
    if way == "user":
        argv = ["python3.11", "-m", "pip", "install", "--user", "--break-system-packages", *offline]
        env["PATH"] = f"{home / '.local' / 'bin'}:{private_bin}"
    elif way == "pythonpath":
        argv = ["python3.11", "-m", "pip", "install", "--target", str(home / "pp"), *offline]
        env["PYTHONPATH"] = str(home / "pp")
    else:
        made = as_student(student, [str(private_bin / "python3.11"), "-m", "venv", str(home / "venv")], env, home, 300)
        assert made.returncode == 0, made.stdout + made.stderr
        argv = [str(home / "venv" / "bin" / "python"), "-m", "pip", "install", *offline]
        env["PATH"] = f"{home / 'venv' / 'bin'}:{private_bin}"
    if argv[0] == "python3.11":
        argv[0] = str(private_bin / "python3.11")
    done = as_student(student, argv, pip_env, home, 900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for tool in NO_SANDBOX_TOOLS:
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the student's PATH {env['PATH']}"
    if way == "pythonpath":
        command = [str(private_bin / "python3.11"), "-m", "grader.student.terminal", "check"]
    else:
        grader = shutil.which("grader", path=env["PATH"])
        assert grader and Path(grader).parent == Path(env["PATH"].split(":")[0]), (grader, env["PATH"])
        command = [grader, "check"]
    return env, command


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict[str, float]]:
    """The starters' visible scores by the instructor's `grader grade`, per check id."""
    base = tmp_path_factory.mktemp("graded")
    submissions = base / "submissions"
    submissions.mkdir()
    names = {case: f"{case}{source.suffix}" for case, (source, _, expect) in CASES.items() if expect == "as graded"}
    for case, name in names.items():
        shutil.copy(CASES[case][0], submissions / name)
    done = subprocess.run([sys.executable, "-m", "grader.cli.main", "grade", str(submissions),
                           "--out", str(base / "results")], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    scores = {}
    for case, name in names.items():
        record = json.loads((base / "results" / f"{Path(name).stem}.json").read_text())
        scores[case] = {c["id"]: c["score"] for c in record["checks"] if c["visibility"] == "visible"}
    return scores


def summary(done: subprocess.CompletedProcess, result: dict | None) -> str:
    lines = [f"exit {done.returncode}"]
    if result is not None:
        lines.append(f"score {result.get('score')} / {result.get('max_score')}, full_marks {result.get('full_marks')}")
        lines += [f"message: {m}" for m in result.get("messages", [])]
        lines += [f"{c['id']}: {c['score']} / {c['max_score']}: {str(c.get('feedback', ''))[:300]}"
                  for c in result.get("checks", []) if c["score"] < c["max_score"]][:5]
    else:
        lines.append(f"stdout: {done.stdout[-3000:]}")
    lines.append(f"stderr: {done.stderr[-3000:]}")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize(("way", "case"), CHECKED)
def test_student_check_everywhere(installs, graded, way, case):
    student, install = installs
    env, command = install(way)
    source, name, expect = CASES[case]
    work = student.home / way / "files" / case
    work.mkdir(parents=True)
    shutil.copy(source, work / name)
    hand_over(work.parent, student)
    done = as_student(student, [*command, name, "--json"], env, work, 900)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = None
    report = f"[{way}] {case}:\n{summary(done, result)}"
    assert "instructor has been told" not in (done.stdout + done.stderr).lower(), report
    assert result is not None and done.returncode in (0, 1), report
    # no sandbox tool on PATH: the portable strategy, said in one line before anything runs
    assert "Runs: plain subprocesses of your own Python" in done.stderr, report
    mine = {c["id"]: c["score"] for c in result["checks"]}
    if expect == "full":
        got = (done.returncode, result["score"], result["max_score"], result["full_marks"])
        assert got == (0, 100, 100, True), report
    else:
        assert mine == graded[case], report
        assert result["score"] == pytest.approx(sum(graded[case].values())), report
        assert done.returncode == (0 if result["full_marks"] else 1), report


RUN_NOTEBOOK = r"""
import json, sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
notebook = nbformat.read(path, as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell(
    "from grader.student import check\nresult = check(show=False)\nprint('SCORE', result.score, result.max_score)"))
nbformat.write(notebook, path)                       # check() grades the notebook as saved
NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
print(json.dumps(notebook.cells[-1].get("outputs", [])))
"""


@pytest.mark.slow
def test_check_in_a_jupyter_kernel_whose_packages_are_in_the_user_site(installs, graded):
    """`check()` in a notebook kernel whose Python found the wheel and JAX only in the user site (`%pip install
    --user`): the kernel's own Python runs the notebook's runs, and the starter notebook scores as graded."""
    student, install = installs
    env, _ = install("user")
    work = student.home / "user" / "files" / "kernel"
    work.mkdir(parents=True)
    shutil.copy(CASES["starter_notebook"][0], work / "performance-05.ipynb")
    (work / "run.py").write_text(RUN_NOTEBOOK)
    hand_over(work.parent, student)
    done = as_student(student, [str(student.home / "bin" / "python3.11"), "run.py", str(work / "performance-05.ipynb"),
                                str(work)], env, work, 1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    expected = sum(graded["starter_notebook"].values())
    assert f"SCORE {expected:.1f} 100.0" in text, (text, outputs)
