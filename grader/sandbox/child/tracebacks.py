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


def format_error(error, student_files):
    """The error as plain data: the student's frames only, where it happened, and whether the grader raised it.

    `grader_fault` is set when the innermost frame is the grader's own code (a scenario replacement or a probe):
    that is never the student's doing (unless baseline, which has no replacements, fails the same way).
    `through_setup` says a scenario replacement was on the way."""
    frames = traceback.extract_tb(error.__traceback__)
    student_frames = [frame for frame in frames if frame.filename in student_files]
    last = student_frames[-1] if student_frames else None
    # Drop the harness's own frames: the student sees their file (and library frames below it).
    first = next((i for i, f in enumerate(frames) if f.filename in student_files), 0)
    keep = [frame for frame in frames[first:] if frame.filename not in GRADER_FILES
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
            "file": last.filename if last else None, "traceback": text,
            "grader_fault": innermost in (SETUP_FILE, PROBES_FILE) or raised_in_grader_rule(error, student_files),
            "through_setup": any(frame.filename == SETUP_FILE for frame in frames)}
