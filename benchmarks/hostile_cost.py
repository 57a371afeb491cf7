"""Benchmark: what one hostile file costs the grading process, beside what an honest file costs it, same run.

    .venv/bin/python benchmarks/hostile_cost.py [--copies 4] [--kinds output_flood channel_flood ...]

Each measurement is a fresh interpreter that grades one folder through the real batch path (fork server, both
scenarios, a fixed variant seed, the warm state kept between them) and reports the grading process's own CPU
seconds (`RUSAGE_SELF`: its threads that pump output, parse frames, check values and write records; not the runs,
which the sandbox charges to their own cgroups) and its peak resident memory. Folders:

- `base`: the reference alone (the batch's fixed costs: warm-up, the world's verdict, class files);
- `honest`: the reference and N distinct honest copies;
- one per kind: the reference and N copies of that threat (tests/assignments/performance-05/threats/).

The cost of a file is (folder - base) / N; the report gives each kind's CPU per file and peak memory beside the
honest ones, and the ratios issue 36 bounds (at most 2x an honest file's CPU, at most 64 MiB more peak memory).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THREATS = ROOT / "tests" / "assignments" / "performance-05" / "threats"
sys.path.insert(0, str(ROOT / "tests"))

from test_threats import with_solution  # noqa: E402

KINDS = ["output_flood", "channel_flood", "feedback_amplifier", "marker_bomb", "memory_channel_values",
         "forged_huge_numbers"]
SEED = 4242
MEASURE = """
import json, resource, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from grader.cli.batch import grade_folder
from grader.config.assignment import load
grade_folder(load("performance-05", Path({root!r})), Path(sys.argv[1]), Path(sys.argv[2]), workers=2, regrade=True,
             variant_seed={seed}, progress=lambda line: None)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"cpu": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024}}))
"""


def measure(folder: Path, out: Path) -> dict:
    script = MEASURE.format(root=str(ROOT), seed=SEED)
    done = subprocess.run([sys.executable, "-c", script, str(folder), str(out)], capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"grading {folder.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def folder_of(scratch: Path, name: str, files: dict[str, str]) -> Path:
    folder = scratch / name
    folder.mkdir()
    for file, text in files.items():
        (folder / file).write_text(text, encoding="utf-8")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--kinds", nargs="+", default=KINDS)
    args = parser.parse_args()
    solution = (ROOT / "solutions" / "performance-05.py").read_text(encoding="utf-8")
    reference = {"reference.py": solution}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        measure(folder_of(scratch, "warm", reference), scratch / "warm-out")   # warm state and world kept
        base = measure(folder_of(scratch, "base", reference), scratch / "base-out")
        honest_files = {f"honest{i}.py": f"# copy {i}\n{solution}" for i in range(args.copies)}
        honest = measure(folder_of(scratch, "honest", {**reference, **honest_files}), scratch / "honest-out")
        per_honest = (honest["cpu"] - base["cpu"]) / args.copies
        print(f"base (reference alone): {base['cpu']:.2f} CPU-s, peak {base['peak_mib']:.0f} MiB")
        print(f"honest: {per_honest:.3f} CPU-s per file, peak {honest['peak_mib']:.0f} MiB")
        print(f"{'kind':24} {'CPU-s/file':>10} {'x honest':>9} {'peak MiB':>9} {'+MiB':>6}")
        for kind in args.kinds:
            text = with_solution(solution, (THREATS / f"{kind}.py").read_text(encoding="utf-8"))
            files = {f"{kind}{i}.py": f"# copy {i}\n{text}" for i in range(args.copies)}
            result = measure(folder_of(scratch, kind, {**reference, **files}), scratch / f"{kind}-out")
            per_file = (result["cpu"] - base["cpu"]) / args.copies
            print(f"{kind:24} {per_file:10.3f} {per_file / per_honest:9.2f} {result['peak_mib']:9.0f} "
                  f"{result['peak_mib'] - honest['peak_mib']:6.0f}", flush=True)


if __name__ == "__main__":
    main()
