"""`grader new LESSON`: a working skeleton of a lesson, so an instructor starts from something that grades.

It writes `assignments/<id>/` (assignment.toml, oracle.py, checks.py, scenario_setup.py) and `solutions/<id>.py`
from the templates in grader/authoring/skeleton/: a tiny real exercise (the gradient of a small loss with JAX,
against a NumPy float64 oracle, in the lesson's world and in a variant with a fresh seed) that loads, builds and
grades its own solution at full marks. The instructor then replaces the exercise with the lesson's. Nothing is
ever overwritten: an existing lesson or solution stops it before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from grader.common.files import atomic_write

SKELETON = Path(__file__).resolve().parent / "skeleton"
LESSON_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# template -> where it goes, relative to the project root
FILES = {"assignment.toml.j2": "assignments/{id}/assignment.toml", "oracle.py.j2": "assignments/{id}/oracle.py",
         "checks.py.j2": "assignments/{id}/checks.py", "scenario_setup.py.j2": "assignments/{id}/scenario_setup.py",
         "solution.py.j2": "solutions/{id}.py"}


class NewLessonError(Exception):
    """The lesson cannot be created (a bad name, or it would overwrite something)."""


def new_lesson(lesson_id: str, root: Path, title: str | None = None) -> list[Path]:
    """Write the skeleton of `lesson_id` under `root`; return the paths written."""
    if not LESSON_ID.fullmatch(lesson_id) or lesson_id.endswith("."):
        raise NewLessonError(f"{lesson_id!r} is not a lesson id: use letters, digits, '-', '_' and '.' "
                             "(it names a folder and the file students submit)")
    targets = {template: root / target.format(id=lesson_id) for template, target in FILES.items()}
    folder = root / "assignments" / lesson_id
    existing = [str(path) for path in (folder, targets["solution.py.j2"]) if path.exists()]
    if existing:
        raise NewLessonError(f"lesson {lesson_id!r} already exists ({', '.join(existing)}); nothing was written. "
                             "Choose another name or remove it first.")
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(SKELETON), undefined=jinja2.StrictUndefined,
                                     keep_trailing_newline=True, autoescape=False)
    context = {"id": lesson_id, "title": title or lesson_id.replace("-", " ").replace("_", " ").capitalize()}
    rendered = {template: environment.get_template(template).render(context) for template in FILES}
    for template, path in targets.items():
        atomic_write(path, rendered[template], mode=0o644)
    return list(targets.values())
