"""The autograder zip on a clean Linux image, run as Gradescope runs it.

    .venv/bin/python scripts/clean_image.py [--suite trixie] [--keep]

1. A minimal Debian root file system from Debian's own packages (`debootstrap --variant=minbase`), cached under
   ~/.cache/jax-course-grader/images/ and built only when missing.
2. A throwaway copy of it (an overlay mount), with /proc, /dev, /sys and the host's cgroups mounted, network as
   the host has it, and `/autograder/source` holding the zip `grader build` writes.
3. As root in it, the zip's `setup.sh` (apt: Python, bubblewrap; pip: the pinned requirements and the grader),
   then, for each submission, `/autograder/run_autograder` with the file in `/autograder/submission`; the
   `results.json` it writes is checked against the corpus' expected scores.

It prints the figures (image build, setup, time per submission) and the isolation each run recorded, and exits
non-zero when a score differs. Needs root (as root: `.venv/bin/python scripts/clean_image.py`; otherwise with
sudo), debootstrap (Debian's package) and network to Debian's archive and PyPI. It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.common.user_cache import user_cache_dir  # noqa: E402
from grader.config.assignment import load  # noqa: E402
from grader.lms.autograder_zip import write_autograder_zip  # noqa: E402

MIRROR = "http://deb.debian.org/debian"
ASSIGNMENT = "performance-05"
CORPUS = ROOT / "tests" / "assignments" / ASSIGNMENT / "corpus"     # the cases, and their expected scores
CASES = ["reference.py", "forward_difference.py", "notebook_reference.ipynb", "gradescope_extra_file", "broken_notebook.ipynb"]


def image(suite: str) -> tuple[Path, float]:
    """The cached root file system for `suite` (built now if missing), and the seconds building it took."""
    key = hashlib.sha256(f"{suite} minbase {MIRROR}".encode()).hexdigest()[:10]
    folder = user_cache_dir() / "images" / f"{suite}-{key}"
    if (folder / "rootfs" / "usr" / "bin" / "apt-get").exists():
        return folder / "rootfs", 0.0
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="rootfs-", dir=folder))
    started = time.monotonic()
    subprocess.run(["debootstrap", "--variant=minbase", suite, str(staging), MIRROR], check=True,
                   stdout=subprocess.DEVNULL)
    staging.rename(folder / "rootfs")
    return folder / "rootfs", time.monotonic() - started


HOST_CERTIFICATES = "/etc/ssl/certs/ca-certificates.crt"
HOST_CERTIFICATES_INSIDE = "/etc/ssl/certs/host-ca-certificates.crt"


def in_image(root: Path, command: str, timeout: int, environment: dict | None = None) -> subprocess.CompletedProcess:
    """Run `command` (bash) as root inside the image, in a private mount namespace."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
           "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8",
           "SSL_CERT_FILE": HOST_CERTIFICATES_INSIDE, "PIP_CERT": HOST_CERTIFICATES_INSIDE,
           "REQUESTS_CA_BUNDLE": HOST_CERTIFICATES_INSIDE, **(environment or {})}
    return subprocess.run(["chroot", str(root), "/bin/bash", "-c", command], env=env, capture_output=True,
                          text=True, timeout=timeout)


def mount_all(base: Path, work: Path) -> Path:
    """An overlay of the cached image with the host's kernel interfaces mounted in it; returns its root."""
    upper, scratch, merged = work / "upper", work / "scratch", work / "root"
    for folder in (upper, scratch, merged):
        folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={base},upperdir={upper},workdir={scratch}", str(merged)], check=True)
    for source, target, options in (("/proc", "proc", ["--rbind"]), ("/dev", "dev", ["--rbind"]),
                                    ("/sys", "sys", ["--rbind"])):
        subprocess.run(["mount", *options, source, str(merged / target)], check=True)
    shutil.copy("/etc/resolv.conf", merged / "etc" / "resolv.conf")
    # The network as the host has it, trust store included (a proxy may present its own certificate authority).
    (merged / "etc" / "ssl" / "certs").mkdir(parents=True, exist_ok=True)
    shutil.copy(HOST_CERTIFICATES, merged / HOST_CERTIFICATES_INSIDE.lstrip("/"))
    return merged


def expected_score(case: str) -> float:
    stem = case.rsplit(".", 1)[0] if not (CORPUS / case).is_dir() else case
    expected = tomllib.loads((CORPUS / f"{stem}.expected.toml").read_text())
    return float(sum(expected["groups"].values()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="trixie")
    parser.add_argument("--keep", action="store_true", help="keep the throwaway copy (for a look inside)")
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        print("clean image: needs root and debootstrap (apt-get install debootstrap)", file=sys.stderr)
        return 2
    # A private mount namespace: every mount below vanishes with this process, whatever happens.
    if os.environ.get("CLEAN_IMAGE_NAMESPACE") != "1":
        os.environ["CLEAN_IMAGE_NAMESPACE"] = "1"
        return subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, *sys.argv]).returncode
    base, built_seconds = image(args.suite)
    assignment = load(ASSIGNMENT, ROOT)
    work = Path(tempfile.mkdtemp(prefix="clean-image-"))
    failures = []
    try:
        root = mount_all(base, work)
        autograder = root / "autograder"
        zip_path = write_autograder_zip(assignment, work / "build")
        (autograder / "source").mkdir(parents=True)
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(autograder / "source")
        for name in ("setup.sh", "run_autograder"):
            os.chmod(autograder / "source" / name, 0o755)
        shutil.copy(autograder / "source" / "run_autograder", autograder / "run_autograder")
        started = time.monotonic()
        setup = in_image(root, "cd /autograder/source && ./setup.sh", timeout=2400)
        setup_seconds = time.monotonic() - started
        if setup.returncode != 0:
            print(setup.stdout[-3000:], setup.stderr[-3000:], file=sys.stderr)
            print(f"clean image: setup.sh failed after {setup_seconds:.0f} s", file=sys.stderr)
            return 1
        report = {"suite": args.suite, "image_build_seconds": round(built_seconds, 1),
                  "setup_seconds": round(setup_seconds, 1), "submissions": {}}
        for case in CASES:
            source = CORPUS / case
            submission, results = autograder / "submission", autograder / "results"
            for folder in (submission, results):
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
            if source.is_dir():
                shutil.copytree(source, submission, dirs_exist_ok=True)
            else:
                shutil.copy(source, submission / source.name)
            (autograder / "submission_metadata.json").write_text("{}")
            started = time.monotonic()
            run = in_image(root, "/autograder/run_autograder", timeout=900)
            seconds = time.monotonic() - started
            try:
                results_json = json.loads((results / "results.json").read_text())
            except (OSError, ValueError):
                failures.append(f"{case}: no results.json ({run.stderr[-500:]})")
                continue
            isolation = next((line for line in results_json.get("output", "").splitlines() if "Isolation used" in line), "")
            wanted = expected_score(case)
            report["submissions"][case] = {"score": results_json["score"], "expected": wanted,
                                           "seconds": round(seconds, 1), "isolation": isolation.strip("- ")}
            if abs(results_json["score"] - wanted) > 1e-6:
                output = results_json.get("output", "")[:800]
                failures.append(f"{case}: scored {results_json['score']}, expected {wanted}\n{output}\n{run.stdout[-2500:]}")
        print(json.dumps(report, indent=2))
    finally:
        if not args.keep:
            subprocess.run(["umount", "-R", str(work / "root")], stderr=subprocess.DEVNULL)
            shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(f"clean image: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
