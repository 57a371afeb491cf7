"""The installed package is the one Gradescope and students run: it must hold every module and template.

An editable install reads the checkout, so only a built wheel shows a subpackage or template left out."""

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_every_module_and_template_of_the_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "grader"
    wanted = {str(path.relative_to(ROOT)) for path in package.rglob("*")
              if path.is_file() and path.suffix in (".py", ".j2", ".toml") and "__pycache__" not in path.parts}
    assert wanted, "no package files found"
    assert not wanted - shipped, f"missing from the wheel: {sorted(wanted - shipped)}"
    # otter's import hook, at the top of site-packages: `otter run` grades in the sandbox after a plain pip install
    archive = zipfile.ZipFile(wheel)
    assert archive.read("grader_otter_hook.pth") == b"import grader_otter_hook; grader_otter_hook.install()\n"
    assert archive.read("grader_otter_hook.py") == (package / "lms" / "otter_import_hook.py").read_bytes()


HOOK_INSTALLED = ("import sys, grader_otter_hook; "
                  "print(any(type(f).__name__ == '_Hook' and type(f).__module__ == 'grader_otter_hook' for f in sys.meta_path))")


@pytest.mark.slow
def test_an_editable_pip_install_alone_installs_otters_import_hook(tmp_path):
    """`pip install -e .` (how scripts/install installs the checkout) needs no extra step for `otter run`."""
    venv.create(tmp_path / "env", with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "-q", "-e", str(ROOT)], check=True,
                   capture_output=True, cwd=tmp_path)
    started = subprocess.run([str(python), "-c", HOOK_INSTALLED], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert started.stdout.strip() == "True" and started.stderr == ""
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "jax-course-grader"], check=True,
                   capture_output=True, cwd=tmp_path)
    site = next((tmp_path / "env" / "lib").glob("python3*/site-packages"))
    assert not list(site.glob("grader_otter_hook*"))          # and pip uninstall takes it away
