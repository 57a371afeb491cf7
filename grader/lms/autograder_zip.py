"""The Gradescope / otter autograder zip: `<assignment id>-autograder.zip`, built byte-for-byte reproducibly.

Layout (otter's, from `otter generate`, at the zip root = `/autograder/source` on Gradescope):

    run_autograder      Gradescope's entry point: otter's `run_autograder.main("/autograder")` via run_otter.py
    run_otter.py        as otter generates it, pointing at our virtualenv's Python
    setup.sh            installs Python, bubblewrap and the pinned requirements on a clean Ubuntu image
    otter_config.json   lists our plugin (`grader.lms.otter_plugin.SandboxedGrader`) with the assignment id
    requirements.txt    the project's dependencies pinned to the versions this zip was built with
    tests/              empty: otter requires the folder; every check lives in the assignment
    pyproject.toml, setup.py, README.md, grader/      our package (setup.sh installs it, with otter's import hook)
    assignments/<id>/, <solution>           the assignment and its reference solution (instructor-only;
                                            students never see the zip, and the sandbox hides it)

`otter run -a ZIP FILE` extracts the zip and calls otter's entry point in-process: it runs neither
setup.sh nor run_autograder, so it grades with the `grader` package installed where otter runs (as
otter documents: "the user's environment will need to have everything pre-installed") and with the
assignment, solution and config from the zip. On Gradescope, setup.sh installs that same package from
the zip. Every entry has a fixed timestamp and mode, names are sorted: a rebuild is byte-identical.
"""

from __future__ import annotations

import io
import json
import re
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

from grader import PACKAGE_DIR
from grader.common.files import atomic_write
from grader.config.assignment import Assignment

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
PLUGIN_NAME = "grader.lms.otter_plugin.SandboxedGrader"   # = grader.lms.otter_plugin.PLUGIN_NAME (not imported: it loads otter)
VENV = "/opt/jax-course-grader/venv"
EXCLUDED_PARTS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
# otter's Python runner starts a Jupyter kernel (for its own setup cells only): its `grading` extra brings one.
RUNNER_EXTRAS = {"otter-grader": "grading"}

RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this for every submission. It is otter's own entry point; the plugin listed in
# otter_config.json grades /autograder/submission with the sandboxed grader and otter writes
# /autograder/results/results.json. (`otter run -a` calls the same entry point in-process.)
set -uo pipefail
cd /autograder
exec {VENV}/bin/python -P /autograder/source/run_otter.py   # -P: import the installed grader, not source/
"""

RUN_OTTER = """\"\"\"Runs Otter-Grader's autograding process; grader.lms.otter_runner grades in the sandbox and always
leaves /autograder/results/results.json.\"\"\"

from grader.lms.otter_runner import run_gradescope

if __name__ == "__main__":
    run_gradescope("/autograder")
"""

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, on a clean Ubuntu image (22.04 or 24.04) when the zip is uploaded.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SOURCE=/autograder/source
VENV={VENV}

apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap util-linux ca-certificates
PYTHON=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    apt-get install -y --no-install-recommends python3.11 python3.11-venv   # Ubuntu 22.04 ships 3.10
    PYTHON=python3.11
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install -r "$SOURCE/requirements.txt"
"$VENV/bin/python" -m pip install --no-deps "$SOURCE"   # with otter's import hook: `otter run` here grades in the sandbox too

# Measure the reference solution's version-dependent facts now, once, instead of for every submission.
(cd / && "$VENV/bin/python" -P -m grader.lms.otter_plugin warm /autograder) \\
    || echo "setup.sh: could not measure the reference facts now; each submission will measure them"

# The solution and checks are root's alone: where the container refuses namespaces and the sandbox cannot
# hide them, student code still runs under a uid of its own that cannot read them.
chmod -R go-rwx "$SOURCE"
"""


def zip_name(assignment: Assignment) -> str:
    return f"{assignment.id}-autograder.zip"


# otter's options that the sandboxed grader honours (OtterSettings and the variant seed), and those with no
# meaning here, refused at build time with the reason instead of being silently ignored.
APPLIED_OPTIONS = {"points_possible", "score_threshold", "show_stdout", "show_hidden", "show_all_public",
                   "force_public_test_summary", "seed", "logo", "print_summary", "print_score", "log_level"}
REFUSED_OPTIONS = {
    "seed_variable": "the grader replaces the lesson's own seed in its variant run; use `seed` to fix that run's seed",
    "grade_from_log": "the grader never reads (or unpickles) a student's log; every submission runs in its sandbox",
    "serialized_variables": "the grader never deserializes a student's variables",
    "pdf": "PDF export of notebooks is not supported", "token": "PDF upload is not supported",
    "course_id": "PDF upload is not supported", "assignment_id": "PDF upload is not supported",
    "filtering": "PDF export is not supported", "pagebreaks": "PDF export is not supported",
    "warn_missing_pdf": "PDF export is not supported", "use_submission_pdf": "PDF export is not supported",
    "submit_blank_pdf_on_export_failure": "PDF export is not supported", "pdf_via_html": "PDF export is not supported",
    "zips": "a zip submission is not unpacked; students submit the .py or .ipynb file",
    "assignment_name": "notebook metadata is not checked; the grader grades the file it finds",
    "debug": "otter's kernel never runs; the grader's own output is in the autograder log",
    "lang": "only Python is graded", "plugins": "the grader's own plugin entry is written by `grader build`",
    "autograder_dir": "set by otter and Gradescope", "miniconda_path": "the grader runs in its own virtualenv",
}


class OtterConfigError(ValueError):
    """An `[lms.otter]` option the grader cannot honour."""


def otter_options(assignment: Assignment) -> dict:
    """`[lms.otter]` of assignment.toml, checked: every option is applied or refused here, with the reason."""
    options = dict(assignment.config.get("lms", {}).get("otter", {}))
    problems = []
    for key, value in options.items():
        if key in REFUSED_OPTIONS:
            problems.append(f"{key}: {REFUSED_OPTIONS[key]}")
        elif key not in APPLIED_OPTIONS:
            problems.append(f"{key}: not an otter option the grader knows (it applies {', '.join(sorted(APPLIED_OPTIONS))})")
        elif key in ("points_possible", "score_threshold") and not (isinstance(value, (int, float)) and value >= 0):
            problems.append(f"{key}: a number >= 0")
        elif key.startswith(("show_", "force_", "print_")) or key == "logo":
            if not isinstance(value, bool):
                problems.append(f"{key}: true or false")
        elif key == "seed" and not (isinstance(value, int) and value != assignment.lesson_seed):
            problems.append(f"seed: an integer other than the lesson's own seed {assignment.lesson_seed}")
    if problems:
        raise OtterConfigError(f"{assignment.folder / 'assignment.toml'} [lms.otter]: " + "; ".join(problems))
    return options


def otter_config(assignment: Assignment) -> dict:
    options = otter_options(assignment)
    plugin: dict[str, object] = {"assignment": assignment.id}
    if "seed" in options:
        plugin["variant_seed"] = options["seed"]
    if assignment.config.get("lms", {}).get("allow_weak_isolation") is True:   # an LMS host without namespaces
        plugin["allow_weak_isolation"] = True
    return {**options, "lang": "python", "plugins": [{PLUGIN_NAME: plugin}]}


def requirements(root: Path) -> str:
    """The project's dependencies (pyproject.toml), pinned to the installed versions where installed."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    lines = []
    for spec in project.get("dependencies", []):
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?", spec)
        if match is None:
            raise ValueError(f"pyproject.toml: dependency {spec!r} does not start with a package name")
        name, extras = match.group(1), {e.strip() for e in (match.group(2) or "[]")[1:-1].split(",") if e.strip()}
        if name.lower() in RUNNER_EXTRAS:
            extras.add(RUNNER_EXTRAS[name.lower()])
        extra_text = f"[{','.join(sorted(extras))}]" if extras else ""
        try:
            lines.append(f"{name}{extra_text}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            lines.append(f"{name}{extra_text}{spec[match.end():].strip()}")
    return "# The versions this autograder was built and tested with.\n" + "\n".join(lines) + "\n"


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()
            and not any(part in EXCLUDED_PARTS or part.startswith(".") for part in p.relative_to(folder).parts)
            and not p.name.endswith(EXCLUDED_SUFFIXES)]


def members(assignment: Assignment) -> dict[str, tuple[bytes, int]]:
    """Archive name -> (content, mode) for every file of the zip (directories: name ends with '/')."""
    root = assignment.root
    project = PACKAGE_DIR.parent     # where the grader package itself comes from
    if not (project / "pyproject.toml").is_file():
        raise FileNotFoundError(f"{project / 'pyproject.toml'} is missing: build the zip from a checkout of the grader")
    entries: dict[str, tuple[bytes, int]] = {
        "run_autograder": (RUN_AUTOGRADER.encode(), 0o755),
        "run_otter.py": (RUN_OTTER.encode(), 0o644),
        "setup.sh": (SETUP_SH.encode(), 0o755),
        "otter_config.json": ((json.dumps(otter_config(assignment), indent=2, sort_keys=True) + "\n").encode(), 0o644),
        "requirements.txt": (requirements(project).encode(), 0o644),
        "tests/": (b"", 0o755),
    }
    package = PACKAGE_DIR
    sources = [(path, path.name) for path in (project / "pyproject.toml", project / "setup.py", project / "README.md")
               if path.is_file()]
    sources.append((assignment.solution_path, assignment.solution_path.relative_to(root).as_posix()))
    sources += [(path, "grader/" + path.relative_to(package).as_posix()) for path in _files_under(package)]
    sources += [(path, path.relative_to(root).as_posix()) for path in _files_under(assignment.folder)]
    for path, name in sources:
        entries[name] = (path.read_bytes(), 0o644)
    return entries


def build_zip_bytes(assignment: Assignment) -> bytes:
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        for name, (content, mode) in sorted(members(assignment).items()):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.create_system = 3  # unix, so the modes below are honoured by unzip and Python
            if name.endswith("/"):
                info.external_attr = (0o040000 | mode) << 16 | 0x10
                archive.writestr(info, b"")
            else:
                info.external_attr = (0o100000 | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, content)
    return stream.getvalue()


def write_autograder_zip(assignment: Assignment, out_dir: Path) -> Path:
    """Write `out_dir/<id>-autograder.zip` atomically; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / zip_name(assignment)
    atomic_write(path, build_zip_bytes(assignment), mode=0o644)
    return path
