"""Benchmark: `grader grade` against running the same files bare, one after another, side by side in one run.

    .venv/bin/python benchmarks/throughput.py [--class-size 60] [--sizes 20 100 400] [--bare 60] [--workers N]
                                              [--held-out tests/assignments/performance-05/corpus]

Files: distinct honest submissions, the reference solution written other ways (every combination of how the
memory entry is built, how `automatic` is computed, the step, the HVP's direction and method is a different
file; 672 exist, taken in a fixed shuffled order), so no two share a hash or a way of writing every exercise.

Measured, in this order, in one process:
1. first use on a machine: the warm state measured from nothing (the reference solution's facts and the public
   starter's compiled programs, with the method sampler's when the class is large enough to use it), in a fresh
   cache folder, and the next batch's world, which a first batch of that size leaves compiling after it returns
   (cli/world_ahead.py); every later command reuses it;
2. the class (`--class-size` files): bare `python file.py` on each of `--bare` of them (all, by default), one after
   another, half before and half after `grade_folder` grades the whole class with a fresh variant seed (taken
   from the stock as `grader grade` takes it); the ratio is bare seconds per file over grading seconds per
   submission;
3. a no-op re-run of the class through the real command (`python -m grader.cli.main grade`): seconds to its first
   progress line and to its end;
4. each of `--sizes` as a class of its own (a fresh seed each): seconds per submission, flat when time is linear;
5. with `--held-out FOLDER`: a class of honest files nobody wrote for this benchmark (the test corpus's honest
   solutions, written by other hands): bare runs as in 2, the class graded as a first batch (a fresh cache folder,
   the warm-up inside the batch) and then again with the cache warm, both ratios printed.

CPU seconds per submission are split into inside the runs (the runs' own, from the records) and outside them
(the grader process, the fork server and its supervisors, the warm-up's reference and starter runs), with cgroup v1 cpuacct
where the host has it (see cpu_meter.py); the grader process's own share is given apart. Each line says whether the
batch found its world compiled before it, and what compiling the next batch's world cost after it returned: that
is awaited before anything else is timed (it would share the machine with the bare runs) and is not in the batch's
seconds or CPU, since the command had returned with every result written.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpu_meter import CpuMeter, process_seconds  # noqa: E402

from grader.authoring.starter import public_code  # noqa: E402
from grader.cli import world_ahead  # noqa: E402
from grader.cli.batch import grade_folder  # noqa: E402
from grader.common.user_cache import CACHE_DIR_ENV, use_cache_dir  # noqa: E402
from grader.config.assignment import load  # noqa: E402
from grader.grading.warm_state import WarmState  # noqa: E402

FIELDS = "('argument_size_in_bytes','output_size_in_bytes','temp_size_in_bytes','alias_size_in_bytes')"
MEMORY = {
    "comprehension": None,   # the solution's own line
    "loop": ("    if analysis is None:\n        entry=None\n    else:\n        entry={}\n        for field in %s:\n"
             "            entry[field]=getattr(analysis,field)\n    memory.append(entry)") % FIELDS,
    "zip": "    memory.append(dict(zip(%s,(getattr(analysis,f) for f in %s))) if analysis is not None else None)"
           % (FIELDS, FIELDS),
}
AUTOMATIC = {"grad dot": None, "jvp": "automatic=float(jax.jvp(plain,(x,),(direction,))[1])"}
EPS = [".001", ".002", ".0005", "1e-3", "2e-3", "5e-4", "0.0015"]
DIRECTIONS = ["jnp.linspace(-1.,1.,len(x))", "jnp.arange(len(x),dtype=jnp.float32)/len(x)-.4",
              "jnp.asarray(np.random.default_rng(7).normal(size=len(x)).astype(np.float32))",
              "jnp.cos(jnp.arange(16.))"]
HVPS = {"jvp of grad": None,
        "hessian": "hvp_plain=jax.hessian(plain)(x)@direction\nhvp_remat=jax.hessian(remat)(x)@direction",
        "linearize": "hvp_plain=jax.linearize(jax.grad(plain),x)[1](direction)\n"
                     "hvp_remat=jax.linearize(jax.grad(remat),x)[1](direction)",
        "vjp of grad": "(hvp_plain,)=jax.vjp(jax.grad(plain),x)[1](direction)\n"
                       "(hvp_remat,)=jax.vjp(jax.grad(remat),x)[1](direction)"}


def ways() -> list[tuple]:
    combos = list(itertools.product(MEMORY, AUTOMATIC, EPS, DIRECTIONS, HVPS))
    random.Random(5).shuffle(combos)
    return combos


def honest_variant(solution: str, index: int) -> str:
    """The `index`-th way of writing the exercises (distinct for every index below len(ways()))."""
    memory, automatic, eps, direction, hvp = ways()[index]
    text = solution.replace("eps=.001", f"eps={eps}")
    text = text.replace("direction=jnp.linspace(-1.,1.,len(x))", f"direction={direction}")
    if MEMORY[memory]:
        start = text.index("    memory.append(None if analysis is None")
        text = text[:start] + MEMORY[memory] + text[text.index("\n", start):]
    if AUTOMATIC[automatic]:
        text = text.replace("automatic=float(jnp.vdot(jax.grad(plain)(x),direction))", AUTOMATIC[automatic])
    if HVPS[hvp]:
        start = text.index("_,hvp_plain=jax.jvp")
        text = text[:start] + HVPS[hvp] + text[text.index("\n", text.index("_,hvp_remat=jax.jvp")):]
    return f"# student {index:04d}: memory {memory}, automatic {automatic}, eps {eps}, hvp {hvp}\n" + text


def held_out_files(folder: Path, count: int) -> list[Path]:
    """Up to `count` honest `.py` files of another class: every one in `folder`, or where a `NAME.expected.toml`
    sits beside it (the test corpus), only those it calls honest; a fixed shuffle picks them."""
    chosen = []
    for path in sorted(folder.resolve().glob("*.py")):
        expected = path.with_suffix(".expected.toml")
        if not expected.exists() or tomllib.loads(expected.read_text()).get("why", "").startswith("honest"):
            chosen.append(path)
    random.Random(7).shuffle(chosen)
    return sorted(chosen[:count])


def bare_seconds(files: list[Path], cwd: Path) -> tuple[list[float], int]:
    """Seconds of `python file.py` for each file, one after another, and how many of them failed."""
    seconds, failed = [], 0
    for path in files:
        started = time.perf_counter()
        failed += subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True).returncode != 0
        seconds.append(time.perf_counter() - started)
    return seconds, failed


def measure_class(label: str, klass: list[Path], scratch: Path, folder: Path, assignment, args, meter: CpuMeter) -> float:
    """Bare runs of half the sample before grading the class and of the other half after it (a machine that
    speeds up or slows down during the benchmark moves both sides of the ratio alike), then the ratio; returns the
    bare seconds per file."""
    sample = klass[:: max(1, len(klass) // (args.bare or len(klass)))][: args.bare or len(klass)]
    cpu = meter.seconds()
    before, failed_before = bare_seconds(sample[0::2], scratch)
    result = grade_class(assignment, klass, folder, args.workers, meter)
    after, failed_after = bare_seconds(sample[1::2], scratch)
    bare = before + after
    bare_per_file = statistics.mean(bare)
    bare_cpu = (meter.seconds() - cpu - result["cpu"] * result["n"]) / len(bare)
    print(f"{label}: bare `python file.py`, sequential, {len(bare)} files: {bare_per_file:.3f} s per file "
          f"({statistics.mean(before):.3f} before grading, {statistics.mean(after):.3f} after; min {min(bare):.2f}, "
          f"max {max(bare):.2f}; {failed_before + failed_after} ended in an error), {bare_cpu:.2f} CPU s per file")
    print(line(label, result, bare_per_file, meter.whole_tree))
    return bare_per_file


def measure_held_out(label: str, klass: list[Path], scratch: Path, assignment, args, meter: CpuMeter) -> None:
    """Both figures of one class in one run: a first batch (a fresh cache folder: the warm state built inside the
    batch, as on a new machine) and, after it, the same class graded again with the cache warm (a fresh variant
    seed, its own folder); half the bare runs before, half after."""
    sample = klass[:: max(1, len(klass) // (args.bare or len(klass)))][: args.bare or len(klass)]
    cpu = meter.seconds()
    before, failed_before = bare_seconds(sample[0::2], scratch)
    bare_cpu_before = meter.seconds() - cpu
    use_cache_dir(scratch / "cache-first-batch")
    first = grade_class(assignment, klass, scratch / "held-out-first", args.workers, meter)
    warm = grade_class(assignment, klass, scratch / "held-out-warm", args.workers, meter)
    cpu = meter.seconds()
    after, failed_after = bare_seconds(sample[1::2], scratch)
    bare = before + after
    bare_per_file = statistics.mean(bare)
    bare_cpu = (bare_cpu_before + meter.seconds() - cpu) / len(bare)
    print(f"{label}: bare `python file.py`, sequential, {len(bare)} files: {bare_per_file:.3f} s per file "
          f"({statistics.mean(before):.3f} before grading, {statistics.mean(after):.3f} after; "
          f"{failed_before + failed_after} ended in an error), {bare_cpu:.2f} CPU s per file")
    print(line(f"{label}, first batch (cache from nothing)", first, bare_per_file, meter.whole_tree))
    print(line(f"{label}, cache warm", warm, bare_per_file, meter.whole_tree))


def grade_class(assignment, files: list[Path], folder: Path, workers: int | None, meter: CpuMeter) -> dict:
    folder.mkdir()
    for path in files:
        (folder / path.name).write_bytes(path.read_bytes())
    cpu, own, started = meter.seconds(), process_seconds(), time.perf_counter()
    # the seed drawn as `grader grade` draws it (a fresh one per batch, taken from the stock an earlier batch drew)
    notes: list[str] = []
    result = grade_folder(assignment, folder, folder.with_name(folder.name + "-out"), workers=workers,
                          progress=notes.append)
    wall = time.perf_counter() - started
    batch_cpu, batch_own = meter.seconds() - cpu, process_seconds() - own
    # the next batch's world, which the batch leaves compiling after it returns (cli/world_ahead.py): awaited
    # here, so that nothing measured next shares the machine with it, and its cost is said apart
    prepared = None
    if result.preparing is not None:
        before, waited = meter.seconds(), time.perf_counter()
        status = result.preparing.wait()
        prepared = (time.perf_counter() - waited, meter.seconds() - before, status)
    runs = [run for record in result.records for run in record.get("runs", {}).values()]
    inside = sum(run.get("cpu_seconds") or 0 for run in runs)
    n = len(files)
    return {"n": n, "wall": wall, "per": wall / n, "cpu": batch_cpu / n, "inside": inside / n,
            "grader": batch_own / n, "rss": max((run.get("max_rss_bytes") or 0 for run in runs), default=0),
            "full": sum(1 for r in result.records if r["score"] == r["max_score"]),
            "one_run": sum(1 for r in result.records if len(r.get("runs", {})) == 1),
            "prepared": prepared, "world_ahead": any("were built before this command" in note for note in notes)}


def rerun(folder: Path) -> tuple[float, float]:
    """(seconds to the first progress line, seconds to the end) of `grader grade` on a graded folder."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "grader.cli.main", "grade", str(folder), "--out",
                                str(folder.with_name(folder.name + "-out"))], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    process.stderr.readline()
    first = time.perf_counter() - started
    process.communicate()
    return first, time.perf_counter() - started


def line(label: str, r: dict, bare_per_file: float, whole_tree: bool) -> str:
    outside = f"{r['cpu'] - r['inside']:.2f}" if whole_tree else "n/a"
    world = ("its world compiled before it (by the command before)" if r["world_ahead"]
             else "its world compiled inside it")
    after = ""
    if r["prepared"] is not None:
        seconds, cpu, status = r["prepared"]
        after = (f"; then the next batch's world compiled after it returned (not counted above): {seconds:.1f} s, "
                 f"{cpu:.1f} CPU s ({cpu / r['n']:.2f} per submission), exit {status}")
    return (f"{label}: {r['wall']:6.1f} s, {r['per']:.3f} s per submission, {60 / r['per']:6.1f} submissions/min, "
            f"ratio to bare sequential {bare_per_file / r['per']:.2f}x; CPU s per submission: {r['cpu']:.2f} in all, "
            f"{r['inside']:.2f} inside the runs, {outside} outside ({r['grader']:.3f} the grader process); peak run "
            f"memory {r['rss'] / 2**20:.0f} MiB; {r['full']}/{r['n']} at full marks, {r['one_run']} graded from one run; "
            f"{world}{after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--class-size", type=int, default=60)
    parser.add_argument("--sizes", type=int, nargs="*", default=[20, 100, 400])
    parser.add_argument("--bare", type=int, default=None, help="files of the class run bare (default: all)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--held-out", type=Path, default=None,
                        help="also grade a class of honest files from this folder (e.g. the test corpus) the same way")
    args = parser.parse_args()
    assignment = load("performance-05", ROOT)
    solution = assignment.solution_path.read_text()
    meter = CpuMeter()
    try:
        with tempfile.TemporaryDirectory() as scratch_name:
            scratch = Path(scratch_name)
            use_cache_dir(scratch / "cache")   # a fresh cache folder: first use on a machine, measured below
            print(f"{CACHE_DIR_ENV}={scratch / 'cache'}; CPU counted "
                  f"{'for the whole process tree (cgroup cpuacct)' if meter.whole_tree else 'for this process and reaped children only'}")
            pool = scratch / "all"
            pool.mkdir()
            for index in range(max([args.class_size, *args.sizes])):
                (pool / f"s{index:04d}.py").write_text(honest_variant(solution, index))
            files = sorted(pool.iterdir())

            cpu, started = meter.seconds(), time.perf_counter()
            # The warm state a class of this size uses (with the method sampler from its threshold on), as a first
            # `grader grade` of such a class leaves it for every later command.
            sampler = args.class_size >= assignment.method_sampler_min_submissions
            state = WarmState(assignment, public_source=public_code(assignment, with_sampler=sampler))
            state.reference()
            state.starter()
            if sampler:   # and the next batch's world, which a first batch of this size leaves compiling after it
                preparation = world_ahead.start(assignment, None, with_sampler=True)
                if preparation is not None:
                    preparation.wait()
            print(f"first use on a machine (warm state from nothing): {time.perf_counter() - started:.1f} s, "
                  f"{meter.seconds() - cpu:.1f} CPU s; reused by every later command")

            klass = files[: args.class_size]
            bare_per_file = measure_class(f"class of {len(klass)}", klass, scratch, scratch / "class", assignment, args,
                                          meter)
            first, whole = rerun(scratch / "class")
            print(f"no-op re-run of the class (`grader grade`, nothing changed): first line after {first:.2f} s, "
                  f"done in {whole:.2f} s")
            for size in args.sizes:
                result = grade_class(assignment, files[:size], scratch / f"size-{size}", args.workers, meter)
                print(line(f"N={size:>4}", result, bare_per_file, meter.whole_tree))
            if args.held_out:
                others = held_out_files(args.held_out, args.class_size)
                measure_held_out(f"held-out class of {len(others)} ({args.held_out})", others, scratch, assignment,
                                 args, meter)
    finally:
        meter.close()


if __name__ == "__main__":
    main()
