"""Hostile submissions (tests/assignments/<id>/threats/, per assignment) graded by the real batch grader in the
real sandbox, as assignment <id> (the folder's name).

Each threat is `<case>.py` (or a notebook, `<case>.ipynb`, graded as it is) plus `<case>.expected.toml` (the
corpus format, see case_expectations.py): the scores it may get and the messages/output it must produce. A threat whose first line is `# prepend: solution` is graded as
the reference solution followed by its own lines (a correct file that turns hostile at the end; lines after
`# inside: NAME` go at the end of that exercise's region instead); the token
`__LISTENER_PORT__` is replaced by the port of a TCP listener this test opens on the host's loopback.

Beyond per-case scores, the batch as a whole must leave no trace: no file outside the sandbox created or changed
(the threats name everything they write `pwned*` or append `pwned`), no process, cgroup, mount or temporary folder
left behind, no connection received, and every result written by the grader, never by a student. No run may cost
a fork server restart or a second try in a fresh interpreter: the server is started once per batch. No threat earns
an excuse or fails its record, the grading process stays under 1.5 GiB (its VmHWM over the batch; `# copies: N`
grades N copies of a case side by side), and run text stays inert in every output. Some threats also go through the
LMS path (`otter run` and Gradescope's entry point), which must agree with the batch.
"""

from __future__ import annotations

import ast
import csv
import functools
import hashlib
import json
import os
import resource
import select
import socket
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from case_expectations import (
    EXPECTED,
    case_folders,
    case_names,
    project_root,
    record_problems,
    shape_problems,
    summary,
)
from leftovers import mounts, run_groups, temp_dirs_of
from live_processes import processes_with
from lms_paths import gradescope_run, otter_run
from seeded_zip import SEED, with_seed
from test_markdown_inert import RENDERERS, inert_problems
from test_paths_agree import messages, output_messages

import grader.cli.batch
import grader.config.assignment
from grader.grading.record_limits import RECORD_BYTES
from grader.intake.discovery import entry_id, safe_filename
from grader.lms.autograder_zip import write_autograder_zip
from grader.outputs.results_folder import OWNER_FILE
from grader.sandbox.fork_server import ForkServer
from grader.sandbox.isolation import Bubblewrap, strongest_available
from grader.sandbox.process import shared_tree
from grader.sandbox.seccomp import filter_program

THREATS = case_folders("threats")     # assignment id -> its threats folder
PREPEND = "# prepend: solution"
INSIDE = "# inside: "                 # in a prepended threat: the lines after it go at the end of that exercise's region
FILE_NAME = "# file-name: "          # a header line: the bytes literal of the name the case is saved under
COPIES = "# copies: "                # a header line: grade N copies of the case side by side (the first is checked)
LEFTOVER_TOKENS = ("63.1415", "64.1414")       # command lines of processes the threats start
MARKER = "pwned"


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(os.fsencode(str(path.relative_to(folder))))
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _marked_files(roots: list[Path], since: float) -> list[str]:
    """Files named pwned*, or text files a threat appended `pwned` to, changed since `since`."""
    found = []
    skip = {".venv", ".git", "__pycache__", ".pytest_cache", "proc", "sys", "dev"}
    for root in roots:
        if not root.is_dir():
            continue
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in skip]
            for name in files:
                path = Path(top) / name
                try:
                    stat = path.lstat()
                    if stat.st_mtime < since:
                        continue
                    if name.startswith(MARKER) or (name.endswith((".json", ".csv", ".toml", ".md")) and stat.st_size
                                                   and path.read_bytes()[-len(MARKER):] == MARKER.encode()):
                        found.append(str(path))
                except OSError:
                    continue
    return found


# Tighter time limits than a class gets: the attacks that run to their limits (a CPU starver, ignored signals, a
# hundred queueing processes, a megabyte of markers) are stopped at 15 s (plus at most 8 s of waiting for a busy
# machine) instead of 30 + 60 s. The runs that finish took up to 9.4 s each under the full suite's load on a fast
# 2-core host, with no waiting allowance (fork_bomb, memory_channel_values); on a slower host the allowance covers
# what they wait for a CPU. Under the suite's load every runaway run earns the whole allowance (it waits for the other
# worker's batch half the time), so the cap sets what the five runaway files cost: 20 s of allowance made each of
# their ten runs last 35 s, most of the batch's CPU. The LMS threats (test_threats_lms.py) use the same limits.
TIGHT_LIMITS = {"wall_seconds": 15, "soft_seconds": 10, "cpu_wait_allowance_seconds": 8}


@dataclass
class Batch:
    folder: Path
    submissions: Path
    records: dict[str, dict]
    out: Path
    groups: list[str]
    check_ids: set[str]
    marked: list[str]
    leftovers: list[int]
    connections: int
    submissions_unchanged: bool
    seconds: float
    grader_peak_bytes: int
    variant_seed: int
    entries: int
    launches: int                 # fork server generations started during the batch (1: no restart)
    run_groups_left: list[Path]   # run cgroups still there after the batch
    temp_dirs_left: list[Path]    # this grader's temporary folders still there after the batch
    mounts_added: set[str]        # mounts on the host that were not there before the batch


def with_solution(solution: str, text: str) -> str:
    """A `# prepend: solution` threat as graded: the solution, then the threat's lines. Lines after `# inside: NAME`
    go just before the solution's `# END EXERCISE NAME` instead, so they change the binding the exercise reports
    (the grader grades that one, not a later rebinding); `# inside: end` goes back to the end of the file."""
    if not text.startswith(PREPEND):
        return text
    tail, sections, current = [], {}, None
    for line in text.splitlines():
        if line.startswith(INSIDE):
            name = line[len(INSIDE):].strip()
            current = tail if name == "end" else sections.setdefault(name, [])
        else:
            (tail if current is None else current).append(line)
    for exercise, lines in sections.items():
        end = f"# END EXERCISE {exercise}"
        assert solution.count(end) == 1, f"the solution has no single `{end}`"
        solution = solution.replace(end, "\n".join(lines) + "\n" + end)
    return solution + "\n" + "\n".join(tail) + "\n"


def file_name(text: str) -> bytes | None:
    for line in text.splitlines()[:3]:
        if line.startswith(FILE_NAME):
            value = ast.literal_eval(line[len(FILE_NAME):])
            assert isinstance(value, bytes)
            return value
    return None


def copies(text: str) -> int:
    return next((int(line[len(COPIES):]) for line in text.splitlines()[:3] if line.startswith(COPIES)), 1)


def reset_peak_memory() -> bool:
    """Start this process's peak resident size (VmHWM) afresh, so the batch is measured, not earlier tests."""
    try:
        with open("/proc/self/clear_refs", "w") as stream:
            stream.write("5")
        return True
    except OSError:
        return False


def peak_memory(reset: bool) -> int:
    """Bytes: VmHWM since the reset (else the process's lifetime peak, an upper bound)."""
    if reset:
        with open("/proc/self/status") as stream:
            for line in stream:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> Callable[[str], Batch]:
    """Assignment id -> its threats graded in one batch, on first use, kept for the module."""
    return functools.cache(lambda assignment_id: grade_threats(assignment_id, tmp_path_factory))


def grade_threats(assignment_id: str, tmp_path_factory: pytest.TempPathFactory) -> Batch:
    threats = THREATS[assignment_id]
    root = tmp_path_factory.mktemp(f"threats-{assignment_id}")
    submissions, out = root / "submissions", root / "results"
    submissions.mkdir()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    assignment = grader.config.assignment.load(assignment_id, project_root(assignment_id))
    assignment = replace(assignment, limits=replace(assignment.limits, **TIGHT_LIMITS))
    solution = assignment.solution_path.read_text(encoding="utf-8")
    ids = {}
    for case in case_names(threats):
        notebook = threats / f"{case}.ipynb"
        if notebook.is_file():     # a notebook case is graded as it is (no header lines, no prepended solution)
            (submissions / notebook.name).write_bytes(notebook.read_bytes())
            expected = tomllib.loads((threats / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
            ids[case] = expected.get("submission") or entry_id(notebook.name)
            continue
        text = (threats / f"{case}.py").read_text(encoding="utf-8").replace("__LISTENER_PORT__", str(port))
        name = file_name(text) or f"{case}.py".encode()
        extra = copies(text)
        text = with_solution(solution, text)
        with open(os.path.join(os.fsencode(submissions), name), "wb") as stream:
            stream.write(text.encode("utf-8"))
        for number in range(2, extra + 1):
            (submissions / f"{case}_copy{number}.py").write_text(text, encoding="utf-8")
        expected = tomllib.loads((threats / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
        ids[case] = expected.get("submission") or entry_id(os.fsdecode(name))
    before = _tree_digest(submissions)
    started = time.time()
    mounted = mounts()
    launches: list[int] = []
    launch = ForkServer._launch

    def counted(server: ForkServer):
        launches.append(1)
        return launch(server)

    reset = reset_peak_memory()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ForkServer, "_launch", counted)
        result = grader.cli.batch.grade_folder(assignment, submissions, out, workers=2, regrade=True, variant_seed=SEED)
    seconds = time.time() - started
    tree = shared_tree()
    groups_left = run_groups(sorted(set(tree.batch.values()))) if tree is not None else []
    peak = peak_memory(reset)
    time.sleep(4)  # the daemon threat wakes after 3 s: give it the chance to act if it survived
    readable, _, _ = select.select([listener], [], [], 0)
    connections = len(readable)
    listener.close()
    project = assignment.root
    roots = [Path("/tmp"), project, Path.home(), Path("/autograder")]
    records = {}
    for path in out.glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        records[record["submission"]] = record
    records = {case: records[ids[case]] for case in ids if ids[case] in records}
    leftovers = processes_with(*LEFTOVER_TOKENS)
    for pid in leftovers:  # never leave strays, even when the assertion below fails
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return Batch(folder=threats, submissions=submissions, records=records, out=out, groups=list(assignment.groups), check_ids={c.id for c in assignment.checks},
                 marked=_marked_files(roots, started - 1), leftovers=leftovers, connections=connections,
                 submissions_unchanged=_tree_digest(submissions) == before, seconds=seconds,
                 grader_peak_bytes=peak, variant_seed=result.variant_seed, entries=len(ids), launches=len(launches),
                 run_groups_left=groups_left, temp_dirs_left=temp_dirs_of(os.getpid()),
                 mounts_added=mounts() - mounted)


CASES = [pytest.param(assignment_id, case, id=f"{assignment_id}/{case}")
         for assignment_id, folder in THREATS.items() for case in case_names(folder)]
ASSIGNMENTS = sorted(THREATS)


def having(case: str) -> list[str]:
    """The assignments whose threats include `case` (a test about one particular attack runs for those)."""
    return [a for a in ASSIGNMENTS if (THREATS[a] / f"{case}{EXPECTED}").is_file()]


@pytest.fixture(params=ASSIGNMENTS)
def batch(request, batches) -> Batch:
    return batches(request.param)


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id, case", CASES)
def test_threat_gets_no_undeserved_credit(assignment_id: str, case: str, batches: Callable[[str], Batch]) -> None:
    batch = batches(assignment_id)
    expected = tomllib.loads((batch.folder / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
    shape = shape_problems(case, expected, batch.groups, batch.check_ids)
    assert not shape, "; ".join(shape)
    assert case in batch.records, f"{case} has no result record (records: {sorted(batch.records)})"
    record = batch.records[case]
    problems = record_problems(record, expected)
    if problems:
        pytest.fail(f"{case} ({expected['why']}):\n  " + "\n  ".join(problems) + f"\n\n{summary(record)}", pytrace=False)


@pytest.mark.slow
def test_nothing_outside_the_sandbox_was_written(batch: Batch) -> None:
    assert batch.marked == []
    assert not Path("/tmp/pwned-unpickled").exists(), "something unpickled a planted payload"
    assert batch.submissions_unchanged


@pytest.mark.slow
def test_only_the_grader_writes_results(batch: Batch) -> None:
    for path in batch.out.rglob("*"):
        if path.is_file():
            assert MARKER not in path.name and (not path.name.startswith(".") or path.name == OWNER_FILE), path
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))  # every one whole, none torn
    for case, record in batch.records.items():
        assert record["sha256"], case
    assert len({record["submission"] for record in batch.records.values()}) == len(batch.records), "two entries share an id"


@pytest.mark.slow
def test_no_process_outlives_grading(batch: Batch) -> None:
    assert batch.leftovers == []


@pytest.mark.slow
def test_no_cgroup_mount_or_temporary_folder_outlives_its_run(batch: Batch) -> None:
    assert batch.run_groups_left == []
    assert batch.temp_dirs_left == []
    assert batch.mounts_added == set()


@pytest.mark.slow
def test_no_run_caused_a_restart_or_a_second_try(batch: Batch) -> None:
    """One fork server for the whole batch, and every graded run was its run (a retry in a fresh interpreter would
    name another isolation)."""
    assert batch.launches == 1, f"the fork server was started {batch.launches} times"
    for case, record in batch.records.items():
        if record["status"] == "graded":
            used = next(m for m in record["messages"] if m.startswith("Isolation used:"))
            assert "fork server" in used and used.count("bubblewrap") == 1, (case, used)


@pytest.mark.slow
def test_no_connection_reached_the_host(batch: Batch) -> None:
    assert batch.connections == 0


@pytest.mark.slow
def test_every_result_names_the_isolation(batch: Batch) -> None:
    isolation = strongest_available()
    assert isinstance(isolation, Bubblewrap), "bubblewrap is part of the setup (README, .ci/run); it is missing here"
    kernel = [part for part, present in (("a cgroup of its own", shared_tree() is not None),
                                         ("a syscall filter", filter_program() is not None)) if present]
    for case, record in batch.records.items():
        used = next((m for m in record["messages"] if m.startswith("Isolation used: bubblewrap")), None)
        assert used is not None, case
        if record["status"] == "graded":
            assert all(part in used for part in kernel), (case, used)


@pytest.mark.slow
def test_every_entry_has_a_record_and_a_row_in_every_csv(batch: Batch) -> None:
    assert len(batch.records) == batch.entries
    for name in ("grades.csv", "final_grades.csv", "canvas.csv"):
        with open(batch.out / name, newline="", encoding="utf-8") as stream:
            rows = list(csv.reader(stream))
        assert len(rows) >= batch.entries, name
        for row in rows:   # OWASP: no cell a spreadsheet would run as a formula
            for cell in row:
                assert not cell.startswith(("=", "+", "@")) and not (cell.startswith("-") and cell != "--"), (name, cell)


@pytest.mark.slow
def test_every_file_of_a_record_stays_small(batch: Batch) -> None:
    """Whatever a run sends (floods, huge values a check quotes, huge figure data), each file of its record is at
    most RECORD_BYTES; a record whose texts were cut says what (`capped`), and the summary would name it."""
    for case, record in batch.records.items():
        name = safe_filename(record["submission"])
        files = [batch.out / f"{name}{suffix}" for suffix in (".json", ".feedback.md", ".feedback.html")]
        files.append(batch.out / "gradescope" / f"{name}.json")
        assert files[0].exists(), (case, files[0])
        for path in files:
            if path.exists():
                assert path.stat().st_size <= RECORD_BYTES, (case, path.name, path.stat().st_size)
    amplified = [batch.records[case] for case in ("feedback_amplifier", "output_flood") if case in batch.records]
    for record in amplified:
        assert record.get("capped"), record["submission"]


@pytest.mark.slow
def test_the_grader_stays_within_its_memory(batch: Batch) -> None:
    assert batch.grader_peak_bytes < 1.5 * 2**30, f"the grader process peaked at {batch.grader_peak_bytes >> 20} MiB"


@pytest.mark.slow
def test_victims_beside_attacks_keep_full_marks(batch: Batch) -> None:
    victims = [case for case in batch.records if case.endswith(("_victim", "_lower"))]
    assert len(victims) >= 3
    for case in victims:
        record = batch.records[case]
        assert record["score"] == record["max_score"], (case, [c["feedback"] for c in record["checks"] if c["score"] < c["max_score"]])
        assert not record.get("grader_faults")


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", having("backtick_breakout"))
def test_a_printed_fence_stays_inside_the_feedback_files_fence(assignment_id: str, batches) -> None:
    batch = batches(assignment_id)
    text = (batch.out / "backtick_breakout.feedback.md").read_text(encoding="utf-8")
    head, _, output = text.partition("## Your output (baseline run)")
    assert "100 / 100" not in head.replace(f"{batch.records['backtick_breakout']['score']:g} / 100", "")
    opener = output.strip().splitlines()[0]
    fence = opener[: len(opener) - len(opener.lstrip("`"))]
    assert len(fence) > 5 and output.rstrip().endswith(fence)
    assert output.count(fence) == 2, "the output fence was closed early"


def allowance_problems(attack: dict, control: dict, margin: float = 4.0) -> list[str]:
    """Where a run that queues behind its own processes was allowed more time for waiting than an honest runaway
    loop graded beside it (one process that wants a CPU all the time). Both wait alike for the machine's other work,
    and the loop wants more CPU than the attack: if the attack is allowed more, waiting it caused itself was counted
    (the old measure, its processes' waits added up, gave it the whole cap while the loop beside it got little)."""
    problems = []
    for scenario, run in attack["runs"].items():
        mine, theirs = run["cpu_wait_allowance_seconds"], control["runs"][scenario]["cpu_wait_allowance_seconds"]
        if mine > theirs + margin:
            problems.append(f"{scenario}: allowed {mine:g} s for waiting, the runaway loop beside it {theirs:g} s")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", having("self_queueing"))
def test_a_run_queueing_behind_its_own_processes_earns_no_extra_time(assignment_id: str, batches) -> None:
    batch = batches(assignment_id)
    problems = allowance_problems(batch.records["self_queueing"], batch.records["self_queueing_control"])
    assert not problems, problems


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", having("peeks_at_neighbours"))
def test_the_batch_seed_is_nowhere_a_run_can_see(assignment_id: str, batches) -> None:
    batch = batches(assignment_id)
    record = batch.records["peeks_at_neighbours"]
    output = record["output"]["head"] + record["output"]["tail"]
    assert "LISTED" in output and str(batch.variant_seed) not in output


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_every_threat_case_is_well_formed(assignment_id: str) -> None:
    """Without grading (what `-m "not slow"` checks of the threats): a file per case, well-formed expectations."""
    folder = THREATS[assignment_id]
    assignment = grader.config.assignment.load(assignment_id, project_root(assignment_id))
    problems = []
    for case in case_names(folder):
        if not (folder / f"{case}.py").is_file() and not (folder / f"{case}.ipynb").is_file():
            problems.append(f"{case}: no {case}.py (or {case}.ipynb) beside its {EXPECTED}")
        expected = tomllib.loads((folder / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
        problems += shape_problems(case, expected, list(assignment.groups), {c.id for c in assignment.checks})
    assert case_names(folder) and not problems, "\n".join(problems)


@pytest.mark.slow
def test_no_threat_makes_a_check_or_the_grader_fail(batch: Batch) -> None:
    """No value a run sends leaves a check unjudged or fails the record: every check answered with a verdict."""
    for case, record in batch.records.items():
        assert not record.get("grader_error"), (case, record.get("grader_error"))
        assert not record.get("check_errors"), (case, record.get("check_errors"))
        unjudged = [c["id"] for c in record["checks"] if c["feedback"].startswith("Not judged")]
        assert not unjudged, (case, unjudged)


INERT_CASES = ("markdown_injection", "name_newline_heading")


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id, case", [(a, c) for c in INERT_CASES for a in having(c)])
def test_run_text_stays_inert_in_every_output(assignment_id: str, case: str, batches) -> None:
    """Rendered by real Markdown renderers, the feedback file and the Gradescope outputs hold only the grader's own
    structure; the HTML page holds no link or image of the run's."""
    batch = batches(assignment_id)
    name = safe_filename(batch.records[case]["submission"])
    feedback = (batch.out / f"{name}.feedback.md").read_text(encoding="utf-8")
    results = json.loads((batch.out / "gradescope" / f"{name}.json").read_text(encoding="utf-8"))
    page = (batch.out / f"{name}.feedback.html").read_text(encoding="utf-8")
    for render in RENDERERS.values():
        assert inert_problems(render(feedback), headings={"h1": 1, "h2": len(batch.groups) + 2}, tables=1) == []
        for test in results["tests"]:
            assert inert_problems(render(test["output"])) == [], test["name"]
    assert 'href="http' not in page and 'src="http' not in page and "<b onmouseover" not in page


# ---- the LMS path: `otter run` and Gradescope's entry point on some of the same threats -------------------------

LMS_CASES = ("forged_huge_numbers", "markdown_injection", "memory_channel_scalars")


@pytest.fixture(scope="module")
def lms_zip(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("threats-lms")
    assignment = grader.config.assignment.load("performance-05")
    return with_seed(write_autograder_zip(assignment, work / "build"), work / "seeded.zip")


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in LMS_CASES if "performance-05" in having(c)])
def test_a_threat_grades_alike_on_the_lms_paths(case: str, batches, lms_zip: Path, tmp_path: Path) -> None:
    """The same file, as Gradescope and `otter run` get it: the same scores and notes as the batch, outputs that stay
    inert, and the grading process within its memory. `otter run` takes the one whose text is built to break a
    renderer (markdown_injection); the others' results.json is written by the same otter code on both paths."""
    batch = batches("performance-05")
    record = batch.records[case]
    entry = tmp_path / "entry" / "performance-05.py"        # the name the assignment asks for, as a student submits
    entry.parent.mkdir()
    entry.write_bytes((batch.submissions / f"{case}.py").read_bytes())
    peak = tmp_path / "peak"
    gradescope = gradescope_run(lms_zip, entry, tmp_path / "gradescope", peak=peak)   # the session's warm state
    paths = [gradescope.results]
    if case == "markdown_injection":
        paths.append(otter_run(lms_zip, entry, tmp_path / "otter").results)
    expected = [check["score"] for check in record["checks"]]
    for results in paths:
        assert [t["score"] for t in results["tests"] if t["name"] != "Public Tests"] == expected
        assert messages(output_messages(results), case) == messages(record["messages"], case)
        for test in results["tests"]:
            for render in RENDERERS.values():
                assert inert_problems(render(test["output"])) == [], test["name"]
    assert int(peak.read_text().split()[1]) * 1024 < 1.5 * 2**30, peak.read_text()
