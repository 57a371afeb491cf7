"""Grade on one Python and JAX of the supported range and compare with what the course's JAX gives (scripts/jax-range).

Run with the interpreter of a virtualenv that has the grader and one JAX installed:

    python scripts/jax_range_grade.py REFERENCE_RESULTS OUT [WHEEL_GRADER]

- the bundled examples must score what REFERENCE_RESULTS (the same examples graded on the course's JAX in this CI
  run) records for each, submission by submission;
- a sample of the corpus (every SAMPLE_EVERY-th labelled case) must grade as labelled in its `.expected.toml`;
  both are graded as one class, into OUT/graded (one batch: one world drawn and warmed up, not two);
- `grader check` of the reference solution must give every visible check full marks, from the checkout and, with
  WHEEL_GRADER (the `grader` of a virtualenv holding only the student wheel, built on the course's JAX, and this
  JAX), as a student runs it: that check measures the reference facts on this JAX with the bundle's facts program.
Exits non-zero, naming each difference, when any of these fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "assignments" / "performance-05" / "corpus"
SAMPLE_EVERY = 40
GRADER = Path(sys.executable).parent / "grader"


def grade(submissions: Path, out: Path) -> dict[str, dict]:
    subprocess.run([str(GRADER), "grade", str(submissions), "--out", str(out), "--regrade"], check=False,
                   stdout=subprocess.DEVNULL)
    records = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json") if p.stem not in {"summary", "results"}}
    return {name: record for name, record in records.items() if isinstance(record, dict) and "submission" in record}


def examples_agree(reference: Path, theirs: dict[str, dict]) -> list[str]:
    ours = {p.stem: json.loads(p.read_text()) for p in reference.glob("*.json")}
    ours = {name: record for name, record in ours.items() if "submission" in record}
    problems = [f"examples: {name} scored {theirs.get(name, {}).get('score')} here, {record['score']} on the course's JAX"
                for name, record in sorted(ours.items()) if theirs.get(name, {}).get("score") != record["score"]]
    return problems if ours else ["examples: no reference results to compare with"]


def sample_labels() -> list[Path]:
    return sorted(CORPUS.glob("*.expected.toml"))[::SAMPLE_EVERY]


def graded_class(out: Path) -> dict[str, dict]:
    """The examples and the corpus sample, graded as one class (their names differ: a clash stops the script)."""
    folder = out / "class"
    shutil.copytree(ROOT / "examples" / "submissions", folder)
    for label in sample_labels():
        name = label.name[: -len(".expected.toml")]
        for source in CORPUS.glob(name + ".*"):   # whatever kind of file the case is (.py, .ipynb, .txt, ...)
            if source.is_file() and not source.name.endswith(".expected.toml"):
                assert not (folder / source.name).exists(), f"{source.name}: an example has this name too"
                shutil.copy(source, folder / source.name)
        if (CORPUS / name).is_dir():   # a case handed in as a folder (the Gradescope layout)
            assert not (folder / name).exists(), f"{name}: an example has this name too"
            shutil.copytree(CORPUS / name, folder / name)
    return grade(folder, out / "graded")


def corpus_sample_as_labelled(records: dict[str, dict]) -> list[str]:
    labels = sample_labels()
    problems = []
    for label in labels:
        name = label.name[: -len(".expected.toml")]
        expected = tomllib.loads(label.read_text())
        record = records.get(name) or next((r for r in records.values()   # a file with another suffix: notes.txt
                                            if str(r.get("file", "")).rpartition(".")[0] == name), None)
        if record is None:
            problems.append(f"corpus {name}: no record")
            continue
        if record["status"] != expected.get("status", "graded"):
            problems.append(f"corpus {name}: status {record['status']}, labelled {expected.get('status')}")
        for group, score in expected.get("groups", {}).items():
            got = record["groups"].get(group, {}).get("score")
            allowed = score if isinstance(score, list) else [score]   # a list: the world decides (`varies`)
            if got is None or all(abs(got - one) > 1e-9 for one in allowed):
                problems.append(f"corpus {name}: {group} {got}, labelled {score}")
    print(f"corpus sample: {len(labels)} labelled cases graded")
    return problems


def reference_checks_full(grader: Path, where: str, cwd: Path) -> list[str]:
    done = subprocess.run([str(grader), "check", str(ROOT / "solutions" / "performance-05.py")],
                          capture_output=True, text=True, cwd=str(cwd))
    last = [line for line in done.stdout.splitlines() if line.startswith("Visible checks:")]
    print(f"grader check of the reference ({where}): {last[-1] if last else 'no result'}")
    if done.returncode != 0 or not last or "(all visible checks pass)" not in last[-1]:
        return [f"grader check of the reference ({where}): " + (last[-1] if last else (done.stdout + done.stderr)[-400:])]
    return []


def main() -> int:
    reference, out = Path(sys.argv[1]), Path(sys.argv[2])
    os.environ["GRADER_CACHE_DIR"] = str(out / "cache")
    import jax  # the JAX this interpreter grades with

    print(f"Python {sys.version.split()[0]}, JAX {jax.__version__}")
    records = graded_class(out)
    problems = examples_agree(reference, records) + corpus_sample_as_labelled(records) + \
        reference_checks_full(GRADER, "the checkout", ROOT)
    if len(sys.argv) > 3:   # outside the checkout, so only the installed bundle is found
        problems += reference_checks_full(Path(sys.argv[3]), "the student wheel", out)
    for problem in problems:
        print("  DIFFERS " + problem)
    print("agrees with the course's JAX" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
