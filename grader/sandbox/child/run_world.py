"""What a run's process is given before the student's first statement, INSIDE the sandbox: its output streams, the
JAX settings the file sets before importing JAX, and the run's tag in JAX's residual printing (harness.py calls
these; like every child module, it imports nothing of the grader package).
"""

import os
import sys
import types

OUTPUT_BUFFER_BYTES = 1 << 18


def buffered_output():
    """The run's stdout and stderr, as `python file.py > file` has them: block-buffered (not a write per line, which
    made a file printing millions of lines spend its time in writes), and both through one buffer so that what
    they print keeps its order in the one pipe the grader reads. Flushed after every top-level statement, before the
    run ends, and by the file's own `flush()`; a kill at the wall limit loses at most the buffer's unflushed part."""
    import io

    raw = io.FileIO(1, "w", closefd=False)
    shared = io.BufferedWriter(raw, OUTPUT_BUFFER_BYTES)
    for name in ("stdout", "stderr"):
        stream = io.TextIOWrapper(shared, encoding="utf-8", errors="backslashreplace", write_through=True)
        setattr(sys, name, stream)
        setattr(sys, "__%s__" % name, stream)
    return shared


def flush_output():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:   # a stream the file replaced or closed: what it held is the file's business
            pass


TRUE_WORDS = ("1", "true", "t", "yes", "y", "on")


def apply_import_settings(names, started_with):
    """What `python file.py` does with JAX settings the file put in os.environ before importing JAX: JAX reads them
    when it is imported, and this run's JAX was imported before the file began, so each of `names` the file changed
    since then is applied now, as the file's first import of JAX runs (`jax.config.update`, parsed as JAX parses its
    environment). A value JAX refuses is left as it was (JAX would have refused it at import too)."""
    changed = [name for name in names if os.environ.get(name) != started_with.get(name)]
    if not changed:
        return
    try:
        import jax
    except ImportError:
        return
    for name in changed:
        option = name.lower()
        holder = getattr(jax.config, "_value_holders", {}).get(option)
        if holder is None:
            continue
        text = os.environ.get(name)
        current = getattr(holder, "value", None)
        if text is None:
            continue
        value = text.strip().lower() in TRUE_WORDS if isinstance(current, bool) else text
        try:
            jax.config.update(option, value)
        except Exception:
            pass


def tag_residual_sources(tag, shown_names):
    """JAX's residual printing (print_saved_residuals, and saved_residuals it calls) names the file's source positions
    inside a folder named by this run's secret tag (`/run-<tag>/<file>.py:92:20`), and nothing else of the
    run does (not a traceback, a warning, `__code__` or `__file__`): a residual report that names the tag was printed
    by JAX's residual printing in this run, and one typed in cannot know it. Installed at JAX's own function before
    the probes take theirs, so the grader's probe and the file's calls print alike."""
    if not tag:
        return
    try:
        import importlib

        from jax_internals import LOCATIONS, find

        find("exclude_from_tracebacks")(__file__)   # a student's traceback shows JAX's frames here, not ours
        module_name, attribute = LOCATIONS["saved_residuals"][0].split(":")
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)
    except BaseException:   # no JAX, or none with residual printing: nothing names a position to tag
        return
    marks = [("from %s:" % name, "from /run-%s/%s:" % (tag, name)) for name in shown_names]

    def saved_residuals(f, *args, **kwargs):
        found = original(f, *args, **kwargs)
        tagged = []
        for aval, source in found:
            if isinstance(source, str):
                for plain, marked in marks:
                    source = source.replace(plain, marked)
            tagged.append((aval, source))
        return tagged

    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(saved_residuals, name, getattr(original, name, None))
    setattr(module, attribute, saved_residuals)


def quiet_self_check():
    """A student's `from grader.student import check; check()` cell does nothing in a run (the grader may not be
    importable here, and must not grade from inside one): a stand-in answers, so no mark is lost for it."""
    package, student = types.ModuleType("grader"), types.ModuleType("grader.student")
    package.__path__, package.student = [], student
    student.check = lambda *_, **__: print("check(): skipped while the grader runs this file.")
    sys.modules.update({"grader": package, "grader.student": student})


def set_own_limits(rlimits):
    """The portable strategy's limits (no prlimit binary there): set by the run on itself, before any student code.
    A limit this OS does not know, or refuses, is left as it is (the parent still keeps the wall limit). None: the
    parent sets none (a system without rlimits: Windows)."""
    if not rlimits:
        return
    try:
        import resource
    except ImportError:
        return
    for name, value in (rlimits or {}).items():
        number = getattr(resource, "RLIMIT_" + str(name).upper(), None)
        if number is None:
            continue
        try:
            resource.setrlimit(number, (value, value))
        except (ValueError, OSError):
            pass
