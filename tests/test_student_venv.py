"""Done when: in a fresh virtualenv holding only the student wheel and the course's packages, the starter
notebook with `check()` cells runs through nbclient, and `grader check` scores the starter and the solution.

The virtualenv (no system site-packages) is made once per set of versions under the user cache folder, with
the versions this checkout runs (the course's pins) from the package index; the wheel is reinstalled each time.
Real sandbox, real JAX, no checkout on the path: the run starts in a folder with no `assignments/` above it."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from grader.authoring.student_wheel import write_student_wheel
from grader.common.user_cache import user_cache_dir
from grader.config.assignment import load

ROOT = Path(__file__).resolve().parent.parent
COURSE = ["jax", "jaxlib", "ml_dtypes", "numpy", "pytest", "nbclient", "ipykernel", "nbformat"]

RUN_NOTEBOOK = r"""
import json, sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
notebook = nbformat.read(path, as_version=4)
for source in ["from grader.student import check", "result = check()",
               "print('SCORE', result.score, result.max_score, result.notebook, result.file)",
               "group = check('gradients')", "print('GROUP', group.score, group.max_score)"]:
    notebook.cells.append(nbformat.v4.new_code_cell(source))
nbformat.write(notebook, path)                       # check() grades the notebook as saved
NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True,  # the starter has TODOs
               resources={"metadata": {"path": sys.argv[2]}}).execute()
outputs = [o for cell in notebook.cells[-5:] for o in cell.get("outputs", [])]
print(json.dumps(outputs))
"""


def has_uv() -> bool:
    """uv beside this checkout's Python (scripts/install puts it there; its cache already holds the course's wheels)."""
    return subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True, timeout=60).returncode == 0


def course_venv() -> Path:
    """A virtualenv holding exactly the course's packages, made once per set of versions. With uv (seconds, from the
    wheels `scripts/install` fetched) where this checkout has it, else pip (about a minute): either way a plain
    virtualenv without system site-packages; how it was filled is not what this test is about."""
    pins = [f"{name}=={metadata.version(name)}" for name in COURSE]
    key = hashlib.sha256(json.dumps([sys.version, pins]).encode()).hexdigest()[:12]
    venv = user_cache_dir() / f"student-venv-{key}"
    python = venv / "bin" / "python"
    if (venv / ".complete").is_file():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    if has_uv():
        subprocess.run([sys.executable, "-m", "uv", "venv", "--quiet", "--python", base, str(venv)], check=True,
                       timeout=300)
        subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(python), *pins],
                       check=True, timeout=1800)
    else:
        subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True, timeout=1800)
    (venv / ".complete").write_text("\n".join(pins) + "\n")
    return venv


def install_wheel(venv: Path, wheel: Path) -> subprocess.CompletedProcess:
    """The student wheel into the virtualenv (again each time), then whether its requirements are met there."""
    python = venv / "bin" / "python"
    if (venv / "bin" / "pip").exists():
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--force-reinstall", "--no-deps",
                        str(wheel)], check=True, timeout=300)
        return subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=120,
                              check=False)
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(python), "--no-index",
                    "--reinstall", "--no-deps", str(wheel)], check=True, timeout=300)
    return subprocess.run([sys.executable, "-m", "uv", "pip", "check", "--python", str(python)], capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.slow
def test_fresh_virtualenv_notebook_and_terminal_checks(tmp_path):
    venv = course_venv()
    python = venv / "bin" / "python"
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    wheel = write_student_wheel(load("performance-05", ROOT), tmp_path / "dist")
    deps = install_wheel(venv, wheel)
    assert deps.returncode == 0, deps.stdout      # the wheel's Requires-Dist is met by the course's packages
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment["PATH"] = f"{venv / 'bin'}:{environment.get('PATH', '')}"

    work = tmp_path / "student"
    work.mkdir()
    shutil.copy(ROOT / "student_templates" / "performance-05.ipynb", work / "performance-05.ipynb")
    ran = subprocess.run([str(python), "-c", RUN_NOTEBOOK, str(work / "performance-05.ipynb"), str(work)], cwd=work,
                         env=environment, capture_output=True, text=True, timeout=1200, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    outputs = json.loads(ran.stdout.strip().splitlines()[-1])
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs if o.get("output_type") == "display_data")
    assert f"SCORE 25.0 100.0 True {work / 'performance-05.ipynb'}" in text, text
    assert "GROUP 10.0 10.0" in text, text
    assert "checked <code>" in html and "25 / 100" in html and "In [" in html     # cells cited as Jupyter shows them

    grader = str(venv / "bin" / "grader")
    shutil.copy(ROOT / "student_templates" / "performance-05.py", work / "performance-05.py")
    starter = subprocess.run([grader, "check", "performance-05.py"], cwd=work, env=environment, capture_output=True,
                             text=True, timeout=600, check=False)
    assert starter.returncode == 1 and "Visible checks: 25 / 100" in starter.stdout, starter.stdout + starter.stderr
    solved = tmp_path / "solved"
    solved.mkdir()
    shutil.copy(ROOT / "solutions" / "performance-05.py", solved / "performance-05.py")
    solution = subprocess.run([grader, "check", "performance-05.py", "--json"], cwd=solved, env=environment,
                              capture_output=True, text=True, timeout=600, check=False)
    assert solution.returncode == 0, solution.stdout + solution.stderr
    result = json.loads(solution.stdout)
    assert result["score"] == result["max_score"] == 100 and result["version_note"] is None
