"""The import hook that hands otter's autograder to the sandboxed grader, installed into site-packages by pip.

`pip install` of this package (wheel or editable) puts a copy of this file at the top of site-packages as
`grader_otter_hook.py`, beside `grader_otter_hook.pth`, whose one line runs `install()` when Python starts (see
setup.py). From then on, when otter's `otter.run.run_autograder` module is imported (by `otter run` or on
Gradescope), its `create_runner` hands every config that names the sandboxed grader's plugin to
`grader.lms.otter_runner.sandboxed_runner`; other otter assignments keep otter's own runner. Nothing else is
touched, and nothing of the grader is imported until otter's autograder is: this runs in every Python process of
the environment (sandboxed student runs too), so it uses the standard library only and never fails loudly.
"""

import importlib.abc
import importlib.util
import sys

TARGET = "otter.run.run_autograder"


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            original = module.create_runner
            if getattr(original, "_sandboxed", False):
                return

            def create_runner(otter_config, **kwargs):   # resolved when otter is fully imported
                try:
                    from grader.lms.otter_runner import sandboxed_runner
                except Exception as error:
                    print("grader_otter_hook: the sandboxed grader is not available:", error, file=sys.stderr)
                    return original(otter_config, **kwargs)
                return sandboxed_runner(otter_config, **kwargs) or original(otter_config, **kwargs)

            create_runner._sandboxed = True
            module.create_runner = create_runner

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Put the hook first on sys.meta_path, once per process."""
    if not any(type(finder).__name__ == "_Hook" and type(finder).__module__ == __name__ for finder in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
