"""Command line: `grader grade DIR` for a class, `grader check FILE` for one student's immediate feedback,
`grader build` to regenerate the student starters from the reference solution, `grader validate` to check an
assignment's configuration and that its reference solution scores full marks, `grader new LESSON` to start a
lesson from a working skeleton; `grader adjust` records an instructor's decision about a score (applied by every
`grader grade`) and `grader explain` says what each check compared in each world; `grader release` puts each
student's feedback page where that student sees it (Canvas).

Every command that grades or builds takes the assignment explicitly (an id, or the path of its folder) or infers
it when exactly one exists under `<root>/assignments/`; with several, it stops and lists them."""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

from grader import __version__
from grader.authoring.build import BuildError, build
from grader.authoring.new_lesson import NewLessonError, new_lesson
from grader.cli.adjust import add_commands, adjust_command, explain_command
from grader.cli.batch import grade_folder
from grader.cli.release import add_release_command, release_command
from grader.cli.similar import add_similarity_options, options_from, own_class_among, similar_command
from grader.cli.trial import trial_grading
from grader.cli.worlds import add_worlds_arguments, worlds_command
from grader.common.jax_range import unsupported as unsupported_jax
from grader.common.last_results import remember as remember_results
from grader.common.private_folder import UnsafeFolder
from grader.common.safe_text import visible_terminal
from grader.common.user_cache import CACHE_DIR_ENV, private_cache_dir, use_cache_dir
from grader.config.assignment import ConfigError, available, every_problem, find_root, load
from grader.lms.canvas import DEFAULT_ROSTER_KEY, ROSTER_KEYS
from grader.model.verdicts import grader_fault
from grader.outputs.summary import summary_table
from grader.sandbox.isolation import WEAK_OPTION_HELP, WeakIsolation, isolation_for_command
from grader.student.terminal import add_check_arguments, check_command, unrecognized


def main(argv: list[str] | None = None) -> int:
    """The `grader` command: whatever it prints passes through visible_terminal (no raw control character a
    student's file supplied reaches the instructor's terminal)."""
    with visible_terminal():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__)
    parser.add_argument("--version", action="version", version=f"grader {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    grade_cmd = commands.add_parser("grade", help="grade every submission in a folder", description=GRADE_IO)
    grade_cmd.add_argument("submissions", type=Path, help="folder of <id>.py / <id>.ipynb files or <id>/ folders")
    grade_cmd.add_argument("--out", type=Path, help="results folder (default: SUBMISSIONS/../results)")
    grade_cmd.add_argument("--assignment", help=ASSIGNMENT_HELP)
    grade_cmd.add_argument("--root", type=Path, help=ROOT_HELP)
    grade_cmd.add_argument("--workers", type=int, default=None,
                           help="submissions graded at once (default: the number of cores; with --scheduler, the workers' threads)")
    grade_cmd.add_argument("--regrade", action="store_true", help="grade again even where an up-to-date result exists")
    grade_cmd.add_argument("--all-runs", action="store_true",
                           help="run every scenario for every file, for a full record (default: a file that passes "
                                "every check in the primary scenario is graded from that run alone; the setting "
                                "[assignment] all_scenarios = true does the same)")
    grade_cmd.add_argument("--variant-seed", type=int, default=None, help="fix the variant scenario's seed (default: random)")
    grade_cmd.add_argument("--roster", type=Path, help="a Canvas gradebook export (CSV) whose students fill canvas.csv")
    grade_cmd.add_argument("--roster-key", choices=ROSTER_KEYS, default=DEFAULT_ROSTER_KEY, metavar="FIELD",
                           help=f"the --roster column a submission not named by Canvas's download (a plain id such as alice) is matched "
                           f"against: {', '.join(repr(k) for k in ROSTER_KEYS)} (default: {DEFAULT_ROSTER_KEY!r}); a "
                           "download name (<name>_<userid>_<subid>_<file>) matches by its Canvas user id")
    grade_cmd.add_argument("--times", type=Path, metavar="FILE", help="when each was submitted, for the [late] policy "
                           "of assignment.toml: a CSV with the columns submission (id, folder name or Canvas user id) "
                           "and submitted_at (ISO 8601 with offset), or a Gradescope export's submission_metadata.yml "
                           "(default: SUBMISSIONS/submission_metadata.yml when there)")
    grade_cmd.add_argument("--cache-dir", type=Path, help=CACHE_HELP)
    grade_cmd.add_argument("--allow-weak-isolation", action="store_true", help=WEAK_OPTION_HELP)
    grade_cmd.add_argument("--scheduler", metavar="ADDRESS", help="grade on the Dask cluster whose scheduler is at ADDRESS "
                           "(tcp://host:8786; needs the [cluster] extra); records and class files are still written here")
    add_similarity_options(grade_cmd, on_grade=True)

    similar_cmd = commands.add_parser("similar", description=SIMILAR_IO, help="the instructor's similarity report of a results folder, "
                                      "without grading again (report.html section and similarity.csv)")
    similar_cmd.add_argument("out", type=Path, help="the results folder `grader grade` wrote")
    similar_cmd.add_argument("--assignment", help=ASSIGNMENT_HELP)
    similar_cmd.add_argument("--root", type=Path, help=ROOT_HELP)
    add_similarity_options(similar_cmd, on_grade=False)

    check_cmd = commands.add_parser("check", help="grade one file and print its visible feedback (exit 0 at full marks)",
                                    description=CHECK_IO)
    add_check_arguments(check_cmd)
    check_cmd.add_argument("--root", type=Path, help=ROOT_HELP)
    check_cmd.add_argument("--cache-dir", type=Path, help=CACHE_HELP)

    build_cmd = commands.add_parser("build", description=BUILD_IO, help="render the student starters (.py and .ipynb) from the reference "
                                    "solution, and write the autograder zip and the students' wheel for `grader check`")
    build_cmd.add_argument("assignment", nargs="?", help=ASSIGNMENT_HELP)
    build_cmd.add_argument("--out", type=Path, help="output folder for everything (default: starters in <project root>/"
                           "student_templates, the autograder zip, which holds the solution, in <project root>/build)")
    build_cmd.add_argument("--root", type=Path, help=ROOT_HELP)

    new_cmd = commands.add_parser("new", help="create a working lesson skeleton: assignments/LESSON/ and solutions/LESSON.py",
                                  description=NEW_IO)
    new_cmd.add_argument("lesson", help="the new lesson's id (its folder name and the file students submit)")
    new_cmd.add_argument("--title", help="the lesson's title (default: made from the id)")
    new_cmd.add_argument("--root", type=Path, help="project root to create it in (default: the nearest folder above "
                         "the current one holding assignments/, else the current folder)")

    validate_cmd = commands.add_parser("validate", description=VALIDATE_IO, help="check an assignment's configuration and trial-grade its "
                                       "reference solution (exit 0: ready to grade)")
    validate_cmd.add_argument("assignment", nargs="?",
                              help="assignment id, or the path of an assignment folder (default: the only one under assignments/)")
    validate_cmd.add_argument("--root", type=Path, help="project root holding assignments/ (default: found from the current folder)")
    validate_cmd.add_argument("--cache-dir", type=Path, help=CACHE_HELP)
    validate_cmd.add_argument("--allow-weak-isolation", action="store_true", help=WEAK_OPTION_HELP)

    worlds_cmd = commands.add_parser("worlds", description=WORLDS_IO, help="grade the reference solution in drawn batch worlds, as `grade` "
                                     "draws them (exit 0: full marks in every one)")
    worlds_cmd.add_argument("assignment", nargs="?", help=ASSIGNMENT_HELP)
    worlds_cmd.add_argument("--root", type=Path, help=ROOT_HELP)
    worlds_cmd.add_argument("--cache-dir", type=Path, help=CACHE_HELP)
    worlds_cmd.add_argument("--allow-weak-isolation", action="store_true", help=WEAK_OPTION_HELP)
    add_worlds_arguments(worlds_cmd)

    add_commands(commands)   # adjust, explain: the instructor's, on a results folder (no assignment, no grading)
    add_release_command(commands)   # release: each student's page to the LMS, from a results folder

    args, extras = parser.parse_known_args(argv)
    if extras:   # said by the subcommand's parser, with its usage and the closest flag (argparse's would be the top's)
        unrecognized(commands.choices.get(args.command, parser), extras)
    if getattr(args, "cache_dir", None):
        use_cache_dir(args.cache_dir)     # for this command and every command it starts
    if args.command in CACHE_COMMANDS:    # a cache another user could write is refused before anything is read
        try:
            private_cache_dir()
        except UnsafeFolder as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
    if args.command == "new":
        return _new(args)
    if args.command in ("adjust", "explain"):
        return adjust_command(args) if args.command == "adjust" else explain_command(args)
    if args.command == "release":
        return release_command(args)
    try:
        which = _which_assignment(args)
    except ConfigError as error:   # which assignment is a usage question, for every command: exit 2
        print(f"grader: {error}", file=sys.stderr)
        return 2
    try:
        assignment = load(*which)
    except ConfigError as error:
        if args.command == "validate":   # every stage that can run, not only the first that stopped loading
            problems = every_problem(*which) or error.problems
            print(f"FAILED: the configuration is not valid: {len(problems)} problem(s) to fix\n"
                  + "\n".join(f"- {problem}" for problem in problems) + "\n(building and the trial grading of the "
                  "reference solution run once the configuration loads)", file=sys.stderr)
            return 1
        print(f"grader: {error}", file=sys.stderr)
        return 2
    if args.command == "grade" and args.scheduler:   # no student code runs here: each worker sandboxes or refuses
        print("Sandbox: on the cluster's workers (a worker that cannot sandbox refuses its tasks).", file=sys.stderr)
    elif args.command in ("validate", "grade", "worlds"):   # `check` does the same in check_command (the student wheel's too)
        try:
            print(isolation_for_command(args.allow_weak_isolation), file=sys.stderr, flush=True)
        except WeakIsolation as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
    if args.command == "validate":
        return trial_grading(assignment)
    if args.command == "worlds":
        return worlds_command(assignment, args)
    if args.command == "grade":
        return _grade(assignment, args)
    if args.command == "build":
        return _build(assignment, args)
    if args.command == "similar":
        return similar_command(assignment, args)
    return _check(assignment, args)


# What each command reads and writes, and where (its --help says it first).
GRADE_IO = ("Grade every submission in SUBMISSIONS (<id>.py, <id>.ipynb or <id>/ folders), each in its own sandbox. "
            "Reads: SUBMISSIONS, the assignment (<root>/assignments/<id>/ and solutions/<id>.py), --roster and "
            "--times when given, the warm state in the user cache. Writes: the results folder (--out, default "
            "SUBMISSIONS/../results): <id>.json, <id>.feedback.md and <id>.feedback.html per student, grades.csv, "
            "final_grades.csv, canvas.csv and canvas-warnings.txt, gradescope/, report.html, similarity.csv and "
            "similarity/; and the warm state in the user cache. A re-run reuses every unchanged record.")
SIMILAR_IO = ("The similarity report of a results folder, without grading again. Reads: OUT's records and "
              "similarity/ sidecars (and --earlier DIR's). Writes: OUT/similarity.csv and the similarity section of "
              "OUT/report.html.")
CHECK_IO = ("Grade one file on this machine and print its visible feedback. Reads: FILE and the assignment (the "
            "project's, or the one bundled in the installed student wheel). Writes: nothing but the terminal and the "
            "warm state in the user cache.")
BUILD_IO = ("Render the starters from the reference solution and package the assignment. Reads: the assignment "
            "folder and solutions/<id>.py. Writes: student_templates/<id>.py and <id>.ipynb, and into build/ the "
            "autograder zip (which holds the solution: never hand it out) and the students' wheel for `grader "
            "check`; with --out, everything into that folder.")
NEW_IO = ("Start a lesson from a working skeleton. Reads nothing. Writes: <root>/assignments/LESSON/ and "
          "<root>/solutions/LESSON.py (refused when either exists). Next: `grader validate LESSON`.")
VALIDATE_IO = ("Check an assignment's configuration and trial-grade its reference solution in a sandbox (exit 0: "
               "ready to grade). Reads: the assignment and its solution. Writes: only the warm state in the user "
               "cache.")
WORLDS_IO = ("Grade the reference solution in drawn batch worlds, as `grade` draws them (exit 0: full marks in "
             "every one). Reads: the assignment and its solution. Writes: only the warm state in the user cache.")
ASSIGNMENT_HELP = ("assignment id, or the path of its folder assignments/<id>/ "
                   "(default: the only assignment under <root>/assignments/)")
ROOT_HELP = "project root holding assignments/ (default: found from the current folder)"
CACHE_HELP = (f"folder for the warm state kept between commands: reference facts, compiled programs (default: "
              f"${CACHE_DIR_ENV} when set, else the user's cache folder, ~/.cache/jax-course-grader)")
CACHE_COMMANDS = ("grade", "check", "validate", "worlds", "build")   # the commands that read or write the warm state
NAMED_BY = {"grade": "--assignment ID", "check": "--assignment ID", "build": "`grader build ID`",
            "validate": "`grader validate ID`", "similar": "--assignment ID", "worlds": "`grader worlds ID`"}


def _which_assignment(args) -> tuple[str, Path]:
    """(id, project root), the same way for every command: the id or folder given, else the only assignment."""
    name, root = args.assignment, args.root
    if name and (os.sep in name or name.startswith(".")):
        folder = Path(name).resolve()
        if not (folder / "assignment.toml").is_file() or folder.parent.name != "assignments":
            raise ConfigError(f"{name} is not an assignment folder (assignments/<id>/ with an assignment.toml)")
        return folder.name, folder.parent.parent
    root = root.resolve() if root else find_root()
    if name:
        return name, root
    names = available(root) if (root / "assignments").is_dir() else []
    if not names:
        raise ConfigError(f"no assignment under {root / 'assignments'}; create one with `grader new LESSON`")
    if len(names) > 1:
        chosen = _by_submission_names(root, names, args)
        if chosen:
            return chosen, root
        raise ConfigError(f"several assignments under {root / 'assignments'} ({', '.join(names)}): "
                          f"name one with {NAMED_BY[args.command]}")
    return names[0], root


def _by_submission_names(root: Path, names: list[str], args) -> str | None:
    """The one assignment whose `submission_filename` the submissions carry (a file of that name, or a folder holding
    one: the Gradescope and otter layouts), when exactly one assignment is so named; says which was chosen."""
    if args.command == "grade":
        folder: Path = args.submissions
        entries = list(folder.iterdir()) if folder.is_dir() else []
        seen = [p.name for e in entries for p in ([e] if e.is_file() else _listed(e))]
    elif args.command == "check":
        seen = [Path(args.file).name]
    else:
        return None
    stems = {name: _submission_stem(root, name) for name in names}
    counts = {name: sum(1 for file in seen if Path(file).stem == stem and Path(file).suffix in (".py", ".ipynb"))
              for name, stem in stems.items()}
    matching = [name for name, count in counts.items() if count]
    if len(matching) != 1:
        return None
    chosen = matching[0]
    print(f"grader: several assignments under {root / 'assignments'}; using {chosen}: {counts[chosen]} of the "
          f"submission file(s) are named {stems[chosen]}.py/.ipynb, as its submission_filename says (name another "
          f"with {NAMED_BY[args.command]})", file=sys.stderr)
    return chosen


def _listed(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_file()][:50] if folder.is_dir() else []
    except OSError:
        return []


def _submission_stem(root: Path, name: str) -> str:
    try:
        config = tomllib.loads((root / "assignments" / name / "assignment.toml").read_text(encoding="utf-8"))
        filename = config.get("assignment", {}).get("submission_filename", f"{name}.py")
    except (OSError, ValueError, AttributeError):
        filename = f"{name}.py"
    return Path(str(filename)).stem


def _new(args) -> int:
    root = args.root.resolve() if args.root else _project_root_or_here()
    try:
        paths = new_lesson(args.lesson, root, args.title)
    except NewLessonError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    print(f"Next: `grader validate {args.lesson}` (it checks the configuration and grades the reference solution), "
          f"then `grader build {args.lesson}`; replace the example exercise with yours.")
    return 0


def _project_root_or_here() -> Path:
    here = Path.cwd().resolve()
    return next((folder for folder in [here, *here.parents] if (folder / "assignments").is_dir()), here)


def _build(assignment, args) -> int:
    out = args.out or assignment.root / "student_templates"
    package_out = args.out or assignment.root / "build"
    try:
        paths = build(assignment, out, package_out)
    except BuildError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _grade(assignment, args) -> int:
    folder = args.submissions
    if not folder.is_dir():
        print(f"grader: {folder} is not a folder (give the folder that holds the submissions)", file=sys.stderr)
        return 2
    if args.roster is not None and not args.roster.is_file():
        print(f"grader: the roster {args.roster} is not a file", file=sys.stderr)
        return 2
    if args.times is not None and not args.times.is_file():
        print(f"grader: the times file {args.times} is not a file", file=sys.stderr)
        return 2
    out = args.out or folder.resolve().parent / "results"
    refused = unsupported_jax() or own_class_among(args.earlier, out, folder)
    if refused:
        print(f"grader: {refused}", file=sys.stderr)
        return 2
    assignment.all_scenarios = assignment.all_scenarios or args.all_runs
    try:
        result = grade_folder(assignment, folder, out, args.workers, args.regrade, args.variant_seed,
                              roster=args.roster, similarity=options_from(args), scheduler=args.scheduler,
                              times=args.times, roster_key=args.roster_key)
    except ConfigError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    remember_results(out)   # where `grader adjust` and `grader explain` look next, unless told --out
    failed = [r["submission"] for r in result.records if grader_fault(r)]
    graded = [r for r in result.records if r["status"] == "graded"]
    print(f"{len(result.records)} record(s) in {out} ({len(graded)} graded, "
          f"{len(result.records) - len(graded) - len(failed)} error, {len(failed)} not graded through the grader's fault, "
          f"{result.reused} reused) in {result.seconds:.1f} s; class grades in {out / 'grades.csv'}")
    print(summary_table(result.records, assignment.groups))
    for line in result.adjustments.lines():   # the instructor's adjustments: applied, and those held back
        print(f"adjustments: {line}")
    for warning in result.warnings:   # the late policy's and Canvas's (canvas.csv's roster matching), each headed
        print(_headed(warning))
    for note in result.notes:
        print(f"grader: {note}", file=sys.stderr)
    if result.preparing is not None:
        print("grader: the next batch's world is being compiled and checked in the background (a few seconds of one "
              "core), so that the next `grader grade` starts at once; GRADER_PREPARE_AHEAD=0 turns this off.",
              file=sys.stderr)
    if failed:
        print(f"grader: the grader itself failed on {len(failed)} submission(s) ({', '.join(failed[:10])}); "
              "their records say so, no gradebook file gives them a score, and a re-run grades them again.",
              file=sys.stderr)
    broken = sorted({check for r in result.records for check in (r.get("check_errors") or {})})
    if broken:
        print(f"grader: check(s) {', '.join(broken)} raised something other than an assertion (where the reference "
              "solution's run raises alike, a bug in checks.py: that record is not graded; where only a submission's "
              "values lead there, charged to it); the tracebacks are under check_errors in the records and in "
              "report.html.", file=sys.stderr)
    for problem in result.problems:
        print(f"grader: {problem}; the other class files are complete.", file=sys.stderr)
    return 1 if failed or broken or result.problems else 0


def _headed(warning: str) -> str:
    """A class warning under its own heading: `late policy:` (lms/late.py's, which may begin so already) or
    `canvas:` (canvas.csv's: who matched no roster student, who has no submission, rows left empty)."""
    if warning.startswith("late policy:"):
        return warning
    return f"late policy: {warning}" if "late policy" in warning else f"canvas: {warning}"


def _check(assignment, args) -> int:
    return check_command(assignment, args)   # the student's check (grader/student/terminal.py)


if __name__ == "__main__":
    sys.exit(main())
