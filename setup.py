"""Everything about the package is in pyproject.toml; this file only adds otter's import hook to site-packages.

`grader_otter_hook.pth` (one line, run when Python starts) and `grader_otter_hook.py` (a copy of
grader/lms/otter_import_hook.py) go to the top of site-packages, so that after a plain `pip install` (a wheel, or
`pip install -e .`) `otter run` hands assignments that name the sandboxed grader to it. A wheel gets them from
build_lib; an editable install writes them into the wheel setuptools assembles (`install_lib` while editable_mode is
set), since an editable install maps only packages and modules back to the checkout, not .pth files.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HOOK_SOURCE = Path(__file__).resolve().parent / "grader" / "lms" / "otter_import_hook.py"
HOOK_MODULE = "grader_otter_hook"
PTH_LINE = f"import {HOOK_MODULE}; {HOOK_MODULE}.install()\n"


class BuildPyWithOtterHook(build_py):
    def run(self):
        super().run()
        target = Path(self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib)
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{HOOK_MODULE}.py").write_text(HOOK_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")
        (target / f"{HOOK_MODULE}.pth").write_text(PTH_LINE, encoding="utf-8")

    def get_outputs(self, include_bytecode=True):
        extra = [] if self.editable_mode else [str(Path(self.build_lib) / f"{HOOK_MODULE}.{s}") for s in ("py", "pth")]
        return [*super().get_outputs(include_bytecode), *extra]


setup(cmdclass={"build_py": BuildPyWithOtterHook})
