"""A student's error as plain data, INSIDE the sandbox: their frames only, and whether the grader raised it.

The grader's own frames (this folder's modules, the scenario setup, the probes) are cut from the traceback the
student reads; an error whose innermost frame is the setup or a probe is the grader's fault, never the student's.
"""

import os
import traceback

from jax_internals import raised_in_grader_rule

MAX_TRACEBACK = 6000
SETUP_FILE = "<grader: scenario setup>"
PROBES_FILE = "<grader: probes>"
HERE = os.path.dirname(os.path.abspath(__file__))
# Every module beside this one is the grader's code run in the child (harness, recorder, encoding, ...): the
# folder holds nothing else (grader/sandbox/process.py copies exactly these into it).
GRADER_FILES = {SETUP_FILE, PROBES_FILE} | {os.path.join(HERE, name) for name in os.listdir(HERE) if name.endswith(".py")}


def compiled_name(shown, tag):
    """The name a student's statements are compiled under: the shown name, which tracebacks, warnings, `__code__` and
    JAX's source information show as they are. The run's secret tag is never in it: only JAX's residual printing
    names it (run_world.tag_residual_sources), so a file learns it by calling print_saved_residuals or by reaching
    into the grader's own objects (a closure, the harness's job), which is flagged for review.
    `student_files` below maps each compiled name to its shown one."""
    return shown


def format_error(error, student_files):
    """The error as plain data: the student's frames only, where it happened, and whether the grader raised it.
    `student_files` maps each name the student's code was compiled under to the name the student reads (the file's
    own, or `<cell N>`): the record and the traceback show the latter.

    `grader_fault` is set when the innermost frame is the grader's own code (a scenario replacement or a probe):
    that is never the student's doing (unless baseline, which has no replacements, fails the same way).
    `through_setup` says a scenario replacement was on the way."""
    frames = traceback.extract_tb(error.__traceback__)
    student_frames = [frame for frame in frames if frame.filename in student_files]
    last = student_frames[-1] if student_frames else None
    # Drop the harness's own frames: the student sees their file (and library frames below it).
    first = next((i for i, f in enumerate(frames) if f.filename in student_files), 0)
    keep = [_shown(frame, student_files) for frame in frames[first:] if frame.filename not in GRADER_FILES
            or (frame is frames[-1] and frame.filename in (SETUP_FILE, PROBES_FILE))]
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(keep))
    text += "".join(traceback.format_exception_only(type(error), error))
    if len(text) > MAX_TRACEBACK:
        text = text[:1000] + "\n...\n" + text[-(MAX_TRACEBACK - 1000):]
    try:
        message = str(error)[:2000]
    except BaseException:
        message = "(unprintable)"
    innermost = frames[-1].filename if frames else ""
    # The recorder's wrappers only pass calls through (their own failures never propagate), so an error leaving
    # them is the wrapped function's; only code that acts on its own (a scenario replacement, a probe) can fault.
    return {"type": type(error).__name__, "message": message, "line": last.lineno if last else None,
            "file": student_files[last.filename] if last else None, "traceback": text,
            "grader_fault": innermost in (SETUP_FILE, PROBES_FILE) or raised_in_grader_rule(error, student_files),
            "through_setup": any(frame.filename == SETUP_FILE for frame in frames)}


def _shown(frame, student_files):
    """The frame under the name the student reads (its source line read again under that name, the run's copy)."""
    if frame.filename not in student_files:
        return frame
    return traceback.FrameSummary(student_files[frame.filename], frame.lineno, frame.name)
