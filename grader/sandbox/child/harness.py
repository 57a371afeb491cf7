"""The in-sandbox harness: runs one student file, statement by statement, and streams plain data out.

This file runs INSIDE the untrusted child process, as a standalone script (stdlib + numpy, and JAX when the
assignment records method evidence; no import of the `grader` package), beside the modules it imports by plain
name: statements.py (what a statement binds and reads), timer.py (the soft limit), tracebacks.py (errors as
data), channel.py (the output frames), encoding.py (values), recorder.py (method evidence), startup.py (syscall
filter, compilation cache). It reads one JSON job from stdin and writes length-prefixed JSON frames to the
channel fd:

  {"type": "statement", ...}   after every top-level statement: where it is (cell, line), what it bound, read
                               and mutated, and how it ended (an error carries its traceback, and says when the
                               grader's own code raised it)
  {"type": "value", ...}       a contract name whose value changed, encoded as plain data
  {"type": "probe", ...}       a probe result (the assignment's code called on the student's objects)
  {"type": "evaluation", ...}  method evidence: a call of student code (or of a jitted function) with concrete
                               arrays, its arguments and results (see recorder.py)
  {"type": "sighting", ...}    method evidence: a small array a student expression produced
  {"type": "replay", ...}      a replay's captured values, or why it could not run (see `run_replays`)
  {"type": "done", ...}        the file ended, or called sys.exit

Set-up is reported (before any student code) on a control pipe then closed; in portable runs (`stdio_channel`:
stdin, stdout, stderr only) the channel is stdout, prints go to stderr, the report is the first `setup` frame.

Files run as Python runs them: `from __future__` flags carry from statement to statement, `__file__` is a
readable copy of the submission, and a notebook runs cell by cell (a cell with a syntax error is skipped and the
next one runs, as in Jupyter), each statement compiled with the cell as its file name so tracebacks and feedback
cite cell and line. Everything is streamed as it happens so that os._exit, a crash, or the parent's hard kill
still leaves what was computed before it. The parent trusts none of it beyond its schema.
"""

import __future__

import ast
import base64
import hashlib
import inspect
import json
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # -I leaves the script's folder off sys.path
import import_paths
from channel import Channel
from encoding import EXACT_ENCODINGS, IMMUTABLE_TYPES, SoftTimeLimit, array_types, encode_value
from recorder import OBSERVE_NAME, SEEN_NAME, Recorder, residual_api
from replay import run_replays
from run_world import (
    apply_import_settings,
    buffered_output,
    flush_output,
    quiet_self_check,
    set_own_limits,
    tag_residual_sources,
)
from startup import install_syscall_filter, use_compilation_cache
from statements import (
    Observe,
    bound_names,
    holds_placeholder,
    imports_module,
    mutated_names,
    parse_prefix,
    read_names,
)
from timer import Timer
from tracebacks import PROBES_FILE, SETUP_FILE, compiled_name, format_error


def capture_trusted():
    """The real JAX transformations, or None where JAX is not installed (an assignment without JAX)."""
    try:
        import jax
    except ImportError:
        return None
    return types.SimpleNamespace(**{name: getattr(jax, name) for name in ("grad", "jvp", "vjp", "jit", "hessian")},
                                 stop_gradient=jax.lax.stop_gradient, **residual_api())


def notebook_display(*objects, **_):
    """Stand-in for IPython's `display` in a graded notebook: print what would have been shown."""
    for item in objects:
        print(item)


class Harness:
    def __init__(self, job, channel):
        self.job = job
        self.channel = channel
        self.filename = job["filename"]
        self.contract = job["contract"]
        self.max_value_bytes = job["value_max_bytes"]
        self.sent = {}
        self.sent_at = {}        # contract name -> the statement whose value of it was last sent
        self.probe_inputs = {}
        self.probes = {}
        self.failed_probes = set()
        self.future_flags = 0
        self.timer = Timer(job["soft_seconds"], job["statement_grace_seconds"], job.get("cpu_wait_allowance_seconds", 0),
                           lambda code: code.co_filename in self.student_files,
                           thread_alarm=job.get("soft_timer") == "thread")
        self.notebook = bool(job.get("notebook"))
        self.import_settings = list(job.get("import_settings") or [])
        self.settings_at_start = {name: os.environ.get(name) for name in self.import_settings}
        self.jax_imported = False   # by the file's own statements (this run's JAX was imported before them)
        self.units = job.get("cells") or [{"number": None, "source": job["source"]}]
        self.code_tag = str(job.get("code_tag") or "")
        self.student_files = {self.code_filename(unit): self.unit_filename(unit) for unit in self.units}
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        if self.notebook:
            self.namespace["display"] = notebook_display  # IPython's builtin, used freely in notebooks
        else:
            self.namespace["__file__"] = os.path.abspath(self.filename)   # written once set-up is over
        evidence = job.get("evidence") or {}
        self.recorder = Recorder(channel.send, **{k: v for k, v in evidence.items() if k.startswith("max_")})
        self.evidence = bool(evidence)
        self.trusted = None
        self.probe_module = {}
        self.encoded_object = {}   # contract name -> the immutable object last encoded for it (else self: none)
        self.exact = {}            # contract name -> its last encoding holds the whole value (content decides it)
        self.immutable_types = IMMUTABLE_TYPES

    def report_setup(self, problem):
        """Tell the grader, on the control pipe, whether the run is set up, then close it: from here on student code
        runs, and nothing it writes anywhere can pass for the grader's own report."""
        report = {"setup": "failed", "message": problem[:1000]} if problem else {"setup": "ok"}
        if self.job.get("stdio_channel"):   # the portable strategy: no control pipe, the channel's `setup` frame
            self.channel.send({"type": "setup", "report": report})
            return
        fd = self.job.get("control_fd")
        if fd is None:
            return
        try:
            os.write(fd, json.dumps(report).encode() + b"\n")
        except OSError:
            pass
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    def unit_filename(self, unit):
        return self.filename if unit["number"] is None else "<cell %d>" % unit["number"]

    def code_filename(self, unit):
        return compiled_name(self.unit_filename(unit), self.code_tag)

    def write_submission_copy(self):
        """`__file__` names a readable copy of the submission (its original bytes), as when Python runs a file.

        Written only once set-up is over and the control pipe closed, into the working directory, which is never on
        sys.path: nothing imported during set-up (JAX, NumPy and the standard library import modules lazily) can
        find the student's file, and a file named `copy.py` or `numpy.py` is never imported as that module later
        either, so it runs exactly as it would under the name the assignment asks for."""
        if self.notebook:
            return
        path = self.namespace["__file__"]
        try:
            data = base64.b64decode(self.job.get("file_b64") or "") or self.job["source"].encode("utf-8")
            if not os.path.exists(path):
                with open(path, "wb") as stream:
                    stream.write(data)
                os.chmod(path, 0o444)
        except OSError:
            pass

    def guarded(self, function, *args):
        """Run `function` under the soft timer; return (result, error dict or None, timed out)."""
        self.timer.arm()
        try:
            return function(*args), None, False
        except SoftTimeLimit as error:
            return None, format_error(error, self.student_files), True
        finally:
            self.timer.disarm()

    def install_evidence(self):
        """Keep the real JAX transformations for the probes and, when the assignment records method evidence,
        wrap the public ones; both before any student code runs, so a student's patch reaches neither."""
        self.immutable_types = IMMUTABLE_TYPES | array_types()
        if not self.evidence:
            self.trusted = capture_trusted()
            return
        try:
            real = self.recorder.install()
        except BaseException as error:   # no JAX here: the evidence is simply absent, and the parent says so
            self.channel.send({"type": "evidence_problem", "message": "%s: %s" % (type(error).__name__, str(error)[:200])})
            return
        self.trusted = types.SimpleNamespace(**real)
        self.namespace[OBSERVE_NAME] = self.recorder.observe
        self.namespace[SEEN_NAME] = self.recorder.seen
        self.channel.send({"type": "evidence_installed"})

    def end_evidence(self):
        """The statement's evidence flushed (compiled programs' callbacks awaited, within the grace budget); the
        counts of evaluations and sightings left out at the bounds."""
        self.timer.arm(self.timer.grace)
        try:
            return self.recorder.end_statement()
        except SoftTimeLimit:
            return 0, 0
        finally:
            self.timer.disarm()

    def run_setup(self):
        module = {"__name__": "scenario_setup", "__builtins__": __builtins__}
        exec(compile(self.job["setup_source"], SETUP_FILE, "exec", dont_inherit=True), module)
        for name, params in self.job["setup_calls"]:
            module[name](**params)
        probes = {"__name__": "probes", "__builtins__": __builtins__, "trusted": self.trusted, "run_secret": self.code_tag}
        exec(compile(self.job["probes_source"], PROBES_FILE, "exec", dont_inherit=True), probes)
        self.probe_module = probes
        for name, value in probes.items():
            if inspect.isfunction(value) and value.__module__ == "probes" and not name.startswith("_"):
                self.probes[name] = (value, list(inspect.signature(value).parameters))

    def stream_values(self, index):
        """Send each contract name whose value changed. A value of an immutable type (`immutable_types`, exact types:
        no student class passes) that is the very object last encoded is unchanged without encoding it again; the
        object is kept referenced, so its id cannot be reused by another."""
        with self.recorder.paused():
            for name in self.contract:
                if name in self.namespace:
                    value = self.namespace[name]
                    if type(value) in self.immutable_types and self.encoded_object.get(name, self) is value:
                        continue
                    self.timer.arm(self.timer.grace)  # a student __repr__/__array__ that never returns
                    try:
                        encoded = encode_value(value, self.max_value_bytes)
                    finally:
                        self.timer.disarm()
                    digest = hashlib.sha256(json.dumps(encoded, sort_keys=True).encode()).hexdigest()
                    self.encoded_object[name] = value if type(value) in self.immutable_types else self
                    self.exact[name] = encoded.get("t") in EXACT_ENCODINGS and not encoded.get("truncated")
                    if self.sent.get(name) != digest:
                        self.sent[name] = digest
                        self.sent_at[name] = index
                        self.channel.send({"type": "value", "name": name, "stmt": index, "value": encoded})
                elif name in self.sent:
                    del self.sent[name]
                    self.encoded_object.pop(name, None)
                    self.sent_at[name] = index
                    self.channel.send({"type": "value", "name": name, "stmt": index, "deleted": True})

    def probe_key(self, params):
        """What a probe's inputs are: a contract value encoded exactly (an array, a number, a string) by its content
        alone, so rebinding a name to an equal value (the lesson's code run twice) does not call the probe again;
        anything else (a function, a container) also by identity."""
        return tuple((p, self.sent.get(p)) if self.exact.get(p) and p in self.sent
                     else (p, id(self.namespace[p]), self.sent.get(p)) for p in params)

    def run_probes(self, index, retry_failed=False):
        """Call each probe whose inputs changed; at the end, retry those that failed (a helper defined later)."""
        with self.recorder.paused():
            for name, (function, params) in self.probes.items():
                if not all(p in self.namespace and self.namespace[p] is not Ellipsis for p in params):
                    continue
                key = self.probe_key(params)
                if self.probe_inputs.get(name) == key and not (retry_failed and name in self.failed_probes):
                    continue
                self.probe_inputs[name] = key
                inputs = {p: self.sent_at.get(p, -1) for p in params}
                self.run_probe(index, name, function, [self.namespace[p] for p in params], inputs)

    def run_probe(self, index, name, function, args, inputs):
        def call():
            try:
                return function(*args), None
            except SoftTimeLimit:
                raise
            except BaseException as error:  # the student's function failed (even sys.exit) under the probe
                return None, format_error(error, self.student_files)

        outcome, error, timed_out = self.guarded(call)
        message = {"type": "probe", "name": name, "stmt": index, "inputs": inputs}
        self.failed_probes.discard(name)
        if timed_out or outcome[1] is not None:
            self.failed_probes.add(name)
        if timed_out:
            message["error"] = {"type": "SoftTimeLimit", "message": "the probe ran out of time", "line": None, "traceback": ""}
        elif outcome[1] is not None:
            message["error"] = outcome[1]
        else:
            message["value"] = encode_value(outcome[0], self.max_value_bytes)
        self.channel.send(message)

    def statements(self):
        """(cell number, filename, statement node) in order; a cell with a syntax error is reported and skipped."""
        for unit in self.units:
            tree, problem = parse_prefix(unit["source"], self.unit_filename(unit))
            if problem:
                self.channel.send({"type": "syntax_error", "cell": unit["number"], **problem})
                if self.notebook:
                    continue   # Jupyter: the cell does not run at all, the next one does
            filename = self.code_filename(unit)
            for node in tree.body:
                yield unit["number"], filename, node

    def compile_statement(self, node, filename):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                if feature is not None:
                    self.future_flags |= feature.compiler_flag
        module = ast.Module(body=[node], type_ignores=[])
        if self.recorder.enabled:
            module = ast.fix_missing_locations(Observe(self.recorder.records_evaluations).visit(module))
        return compile(module, filename, "exec", flags=self.future_flags, dont_inherit=True)

    def run(self):
        problem = None
        try:
            tag_residual_sources(self.code_tag, sorted(set(self.student_files.values())))
            self.install_evidence()
            _, error, timed_out = self.guarded(self.run_setup)
            if error or timed_out:
                problem = "%s: %s" % (error["type"], error["message"])
        except BaseException as setup_error:
            problem = "%s: %s" % (type(setup_error).__name__, str(setup_error)[:2000])
        self.report_setup(problem)
        if problem:
            return {"kind": "setup_failed"}
        self.write_submission_copy()
        index = -1
        statements = list(self.statements())
        stopped_cell = None   # a notebook cell whose statement failed: Jupyter runs nothing more of that cell
        ran = []              # (statement node, its filename, its record): what a replay may run again
        for index, (cell, filename, node) in enumerate(statements):
            started = time.monotonic()
            record = {"type": "statement", "index": index, "cell": cell, "line": node.lineno,
                      "end_line": getattr(node, "end_lineno", node.lineno), "assigns": bound_names(node),
                      "reads": read_names(node), "mutates": mutated_names(node, self.namespace), "placeholder": holds_placeholder(node)}
            if self.notebook and cell is not None and cell == stopped_cell:
                record["status"] = "skipped"
                self.channel.send(record)
                continue
            exit_request = None
            self.recorder.set_statement(index)
            if not self.jax_imported and imports_module(node, "jax"):
                self.jax_imported = True
                apply_import_settings(self.import_settings, self.settings_at_start)
            self.timer.arm()
            try:
                code = self.compile_statement(node, filename)
                exec(code, self.namespace)
                record["status"] = "ok"
            except SoftTimeLimit as error:
                record["status"] = "timeout"
                record["error"] = format_error(error, self.student_files)
            except SystemExit as error:
                record["status"] = "exit"
                exit_request = error.code
            except BaseException as error:
                record["status"] = "error"
                record["error"] = format_error(error, self.student_files)
            finally:
                self.timer.disarm()
            record["evaluations_omitted"], record["sightings_omitted"] = self.end_evidence()
            flush_output()
            record["seconds"] = round(time.monotonic() - started, 4)
            if record["status"] in ("error", "timeout"):
                stopped_cell = cell
            self.channel.send(record)
            ran.append((node, filename, record))
            self.stream_values(index)
            self.run_probes(index)
            if record["status"] == "exit":
                self.run_probes(index, retry_failed=True)
                code = exit_request if isinstance(exit_request, (int, type(None))) else str(exit_request)[:200]
                outcome = {"kind": "sys_exit", "code": code, "line": node.lineno, "cell": cell,
                           "last": index == len(statements) - 1}
                return run_replays(self, outcome, ran)   # ended by its own request: on what ran
        self.run_probes(index + 1, retry_failed=True)
        return run_replays(self, {"kind": "completed"}, ran)

    def ending(self, outcome):
        """The last frame's words besides the outcome (`own_end` says them too: child/replay.py)."""
        return {**outcome, "soft_limit_hit": self.timer.expired, "evidence": self.recorder.summary()}


def main():
    import_paths.adopt(os.path.dirname(os.path.abspath(__file__)))   # a student's check: their Python's folders
    serve(json.loads(sys.stdin.read()))


def serve(job):
    """Run one job in this process and end it (the fork server calls this in each isolated child)."""
    if job.get("stdio_channel"):
        # The portable strategy's run has only the three pipes every system gives a child: the frames go on stdout
        # (a descriptor of its own from now on), and what the file prints joins stderr, read as its output.
        job["channel_fd"] = os.dup(1)
        os.dup2(2, 1)
    set_own_limits(job.get("own_rlimits"))
    buffered_output()
    try:
        install_syscall_filter(job.get("seccomp"))
    except BaseException as error:   # the isolation promised cannot be given: the grader's failure, not a run
        fd = job.get("control_fd")
        if fd is not None:
            os.write(fd, json.dumps({"setup": "failed", "message": "syscall filter: %s" % error}).encode() + b"\n")
        os._exit(70)
    channel = Channel(job["channel_fd"])
    if job.get("compilation_cache_dir"):
        use_compilation_cache(job["compilation_cache_dir"])
    quiet_self_check()
    harness = Harness(job, channel)
    sys.argv = [job["filename"]]
    outcome = harness.run()
    flush_output()
    channel.send({"type": "done", **harness.ending(outcome)})
    flush_output()
    os._exit(0)


if __name__ == "__main__":
    main()
