"""Checks for performance-05. Each reads like a pytest test: `assert condition, "what to look at"`.

Signature: check(run, oracle, settings). `run` is one scenario's view of the student's values (see
grader.grading.engine.RunView): each name as the exercise used it, and the method evidence recorded up to it
(`run.evaluations(until=name)`, `run.sightings(until=name)`, read with grader.api.methods). `oracle` is the float64
oracle for that scenario (oracle.py), `settings` the [parameters] and [tolerances] of assignment.toml. Return a
short note to pass; assert to fail.

A value is right only if it came from the method the exercise asks for, shown by what cannot be faked:
- `finite` must equal (f(x+eps v) - f(x-eps v)) / (2 eps) of two evaluations the run recorded before it, each
  verified against the oracle's value of the objective at that point (a decoy evaluation nearby proves nothing);
- `automatic` and the HVPs must follow the derivative rules JAX used in that run (every scenario nudges them by
  amounts the oracle knows; a NumPy recurrence, a finite difference or a typed number does not follow them), and
  `hvp_remat` the rules of a jax.checkpoint-ed objective (the ordinary objective's HVP does not).
No evidence is no credit. Feedback describes what this student's run did, in words, and says what to look at.
Whether the file ran, and ran to its end, is checked by the framework's own checks (`builtin:` in assignment.toml).
"""

import functools
import math
import re

import numpy as np

from grader.api import Missing, Undecidable
from grader.api.comparisons import compared, equal, in_range, within
from grader.api.methods import vectors
from grader.api.values import (
    as_number,
    as_vector,
    close_vectors,
    describe,
    fmt,
    plain_data,
)

LABELS = ("plain", "remat")
# How the tolerances a comparison records (grader.api.comparisons, for `grader explain`) are sized.
AUTOMATIC_KIND = ("absolute: automatic_tolerance × Σ|gᵢ|, never less than automatic_rounding float32 units of the "
                  "magnitudes the reverse pass adds up")
HVP_KIND = "absolute: hvp_tolerance × max|H·d|, never less than hvp_rounding float32 units of max(|H|·|d|)"
SINGLE = float(np.finfo(np.float32).eps)   # float32's rounding unit: JAX's numbers carry it
DOUBLE = float(np.finfo(np.float64).eps)


# ---- gradients ------------------------------------------------------------------------------------

def inputs_are_the_lessons(run, oracle, settings):
    w = run["w"]
    x = as_vector(run["x"], "`x`", settings.width)
    assert isinstance(w, np.ndarray) and w.shape == oracle.w.shape, f"`w` should be a {oracle.w.shape} array; found {describe(w)}."
    assert equal(w, oracle.w, what="`w` vs the lesson's weights in this run"), (
        "`w` differs from the lesson's weights: compare how your file seeds the random generator and draws, scales "
        "and casts the weights with the lesson's code (inputs, weights and random keys first).")
    assert equal(x, oracle.x, what="`x` vs the lesson's input in this run"), "`x` differs from the lesson's input: compare it with the lesson's definition of `x`."
    return "`w` and `x` are the lesson's inputs."


def cotangent_matches_recurrence(run, oracle, settings):
    cotangent = as_vector(run["cotangent"], "`cotangent`", settings.width)
    ok, worst = close_vectors(cotangent, oracle.gradient, 0.0, oracle.cotangent_share(settings),
                              what="`cotangent` vs the float64 reverse recurrence")
    if ok:
        follows = _cotangent_follows(run, oracle, settings, cotangent)
        if follows in ("activations", "pre-activations"):
            return ("`cotangent` matches the float64 reverse recurrence, and it moved as the recurrence over the "
                    "forward pass's values does when the grader changed what tanh computes.")
        raise Undecidable(UNDECIDABLE_COTANGENT[follows])
    # said only where this world proves it: autodiff lies `separation` tolerances from the recurrence (oracle.separates)
    follows_autodiff = (oracle.derivatives_changed and oracle.cotangent_separation(settings) >= settings.separation
                        and close_vectors(cotangent, oracle.autodiff_gradient, 0.0, oracle.cotangent_share(settings),
                                          what="`cotangent` vs JAX's autodiff in this run (does it follow the changed rules?)")[0])
    assert not follows_autodiff, (
        "`cotangent` follows JAX's autodiff (whose derivative rules differ by tiny amounts in this run), not the "
        "reverse recurrence: compute it with the recurrence written out, x̄ = Wᵀ(h̄ ⊙ (1 − h²)) from 2·h₄, not "
        "with jax.grad or jax.vjp.")
    cause = next((why for why, value in _recurrence_slips(oracle) if close_vectors(
        cotangent, value, 0.0, oracle.cotangent_share(settings), what=f"`cotangent` vs the recurrence {why}")[0]), None)
    # a cause is named only when the value is that slip's value (never guessed from a value that merely misses)
    raise AssertionError(
        f"`cotangent` does not match the reverse recurrence x̄ = Wᵀ(h̄ ⊙ (1 − h²)) started from 2·h₄: its largest "
        f"difference is {worst:.2g} of the gradient's largest entry."
        + (f" It is the recurrence {cause}." if cause else " Compute it from the layers' outputs of the forward "
           "pass, layer by layer from the last down to the first."))


COTANGENT_REPLAY = "cotangent_shifted"   # assignment.toml [replays.cotangent_shifted]
UNDECIDABLE_COTANGENT = {
    None: "`cotangent` has the recurrence's value, but the grader could not compute it again with the activations "
          "changed (its statements did not run again to the end), so no value of this run shows how it was made. "
          "Nothing is concluded against you; your instructor decides.",
    "unchanged": "`cotangent` has the recurrence's value, but it stayed the same when the grader changed what tanh "
                 "computes (through numpy, jax.numpy, jax.lax or math): it was not computed from the activations "
                 "tanh gave in this run, so no value shows the recurrence. Nothing is concluded against you; your "
                 "instructor decides.",
    "slope": "`cotangent` has the recurrence's value, but when the grader changed what tanh computes it followed the "
             "changed function's slope, as autodiff of the objective or differences of its values do, not the "
             "recurrence over the activations x̄ = Wᵀ(h̄ ⊙ (1 − h²)). Your instructor decides.",
    "other": "`cotangent` has the recurrence's value, but when the grader changed what tanh computes it moved "
             "unlike the recurrence over the activations x̄ = Wᵀ(h̄ ⊙ (1 − h²)). Your instructor decides.",
}


def _cotangent_follows(run, oracle, settings, cotangent):
    """What `cotangent` followed when the statements it depends on ran again with tanh shifted by a secret
    c0 + c1·z (the replay cotangent_shifted, probes._tanh_shifted): "activations" (the lesson's recurrence over the
    shifted forward values, 1 − h²), "pre-activations" (the recurrence with sech² z), "slope" (the shifted function's
    derivative: autodiff or differences of values), "unchanged" (it never saw the shift), "other", or None (the
    replay did not run or raised). The shift comes from the run's secret, which only the grader keeps."""
    found = run.snapshot.replays.get(COTANGENT_REPLAY) or {}
    # `rebound`: the statements raised after binding `cotangent` again (a file under `if __name__ == "__main__":` runs
    # again whole, and the lesson's own assertion then compares jax.grad with the shifted `cotangent`)
    replayed = found.get("values") or found.get("rebound") or {}
    if "cotangent" not in replayed:
        return None
    try:
        again = as_vector(replayed["cotangent"], "`cotangent`", settings.width)
    except AssertionError:
        return None
    if not np.all(np.isfinite(again)):
        return "other"
    c0, c1 = _probes()._activation_shift(run.snapshot.secret)
    predicted = shifted_recurrences(oracle.w, oracle.x, c0, c1, oracle.rules.change)
    for label, value in (*predicted.items(), ("unchanged", cotangent)):
        allowance = replay_allowance(oracle, settings, value)
        off = float(np.max(np.abs(again - value)))
        if compared(f"`cotangent` with tanh shifted by a secret c0 + c1·z (the replay) vs {label.replace('-', ' ')}",
                    again, value, off, allowance, off <= allowance, measure="max|replayed − predicted| over the entries",
                    unchanged=cotangent if label != "unchanged" else None):
            return label.partition(",")[0]
    return "other"


def replay_allowance(oracle, settings, value):
    """How far a replayed `cotangent` may lie from a prediction: `cotangent_replay_tolerances` cotangent shares of
    the larger of the prediction's and the gradient's largest entries. A float32 recurrence rounds by the size of
    what it adds up, which the shift barely changes; the shifted value itself may cancel to a fraction of it."""
    scale = max(float(np.max(np.abs(value))), float(np.max(np.abs(oracle.gradient))))
    return settings.cotangent_replay_tolerances * oracle.cotangent_share(settings) * scale


def shifted_recurrences(w, x, c0, c1, change=None):
    """In float64, with every activation h_i = tanh(z_i) + c0 + c1·z_i (z_i = W h_{i−1}, h_0 = x): the recurrence
    over the activations (1 − h_i²), the one over pre-activations (sech² z_i), and the shifted function's own slope
    (sech² z_i + c1: what autodiff and differences give), each started from 2·h₄. Where this run's JAX evaluates
    tanh with a change (`change`, oracle.ValueChange: the variant's nudge_objective_values, nonzero near the last
    layer's pre-activations, which the shift moves), the two recurrences over a forward pass through JAX's tanh too
    (labelled "…, tanh as JAX evaluates it"): NumPy's and math's tanh never carry the change."""
    def forward(nudged):
        h, z = [np.asarray(x, dtype=np.float64)], []
        for _ in range(4):
            z.append(w @ h[-1])
            h.append(np.tanh(z[-1]) + (change.shift(z[-1]) if nudged else 0.0) + c0 + c1 * z[-1])
        return h, z

    def backward(h, factors):
        """The recurrence from 2·h₄ down, factors[i - 1] multiplying layer i's cotangent."""
        g = 2.0 * h[4]
        for i in range(4, 0, -1):
            g = w.T @ (g * factors[i - 1])
        return g

    predicted = {}
    for nudged in (False, True) if change is not None else (False,):
        h, z = forward(nudged)
        sech2 = [1.0 - np.tanh(zi) ** 2 for zi in z]
        suffix = ", tanh as JAX evaluates it in this run" if nudged else ""
        predicted["activations" + suffix] = backward(h, [1.0 - hi ** 2 for hi in h[1:]])
        predicted["pre-activations" + suffix] = backward(h, sech2)
        if not nudged:
            predicted["slope"] = backward(h, [s + c1 for s in sech2])
    return predicted


def _recurrence_slips(oracle):
    """(what the slip is, the value it gives) for the recurrence's common slips, computed in float64: a value equal
    to one of them names its cause."""
    w, h = oracle.w, [oracle.x]
    for _ in range(4):
        h.append(np.tanh(w @ h[-1]))

    def run(start, layers, output):
        g = start
        for i in layers:
            g = w.T @ (g * (1.0 - output(i) ** 2))
        return g

    return [("started from h₄ instead of 2·h₄", run(h[4], range(4, 0, -1), lambda i: h[i])),
            ("without its last step (the loop stops before layer 1)", run(2 * h[4], range(4, 1, -1), lambda i: h[i])),
            ("without layer 4's step (the loop starts at layer 3)", run(2 * h[4], range(3, 0, -1), lambda i: h[i])),
            ("with each layer's input in place of its output (h_{i−1} for h_i)", run(2 * h[4], range(4, 0, -1), lambda i: h[i - 1])),
            ("with W in place of Wᵀ", _transposed_recurrence(w, h))]


def _transposed_recurrence(w, h):
    g = 2 * h[-1]
    for i in range(len(h) - 1, 0, -1):
        g = w @ (g * (1.0 - h[i] ** 2))
    return g


def _gradient_probe(run, oracle, settings, probe, label):
    gradient = as_vector(run.probe(probe), f"`jax.grad({label})(x)`", settings.width)
    ok, worst = close_vectors(gradient, oracle.autodiff_gradient, settings.gradient_rtol, settings.gradient_atol_scale,
                              what=f"`jax.grad({label})(x)` vs the reverse recurrence with this run's derivative rules")
    assert ok, (f"`jax.grad({label})(x)` differs from the independent reverse recurrence (its largest difference is "
                f"{worst:.2g} of the gradient's largest entry). If gradients differ, first compare inputs, weights, random keys and any hidden effects.")


def jax_gradients_match_recurrence(run, oracle, settings):
    _gradient_probe(run, oracle, settings, "grad_plain", "plain")
    _gradient_probe(run, oracle, settings, "grad_remat", "remat")
    return "`jax.grad(plain)` and `jax.grad(remat)` both match the reverse recurrence."


def whole_objective_gradient(run, oracle, settings):
    _gradient_probe(run, oracle, settings, "grad_whole", "whole")
    saved = run.probe("whole_residuals")
    if isinstance(saved, (list, tuple)):   # None: this JAX cannot be asked, and `whole` is judged by its gradient
        kept = [entry for entry in saved if isinstance(entry, str) and entry.startswith("output of")]
        assert not kept and all(isinstance(entry, str) for entry in saved), (
            f"`whole` is not the whole objective checkpointed: differentiating it saves {len(kept)} intermediate "
            f"value(s) of its own computation (print_saved_residuals: `{str(kept[0])[:160] if kept else saved}`). A "
            f"checkpoint of the whole objective, jax.checkpoint(plain), saves only its inputs and recomputes the rest.")
    return "Checkpointing the whole objective preserves the gradient, and differentiating it saves only its inputs."


# ---- residuals ------------------------------------------------------------------------------------

def _reports(run):
    reports = run["reports"]
    assert isinstance(reports, (list, tuple)) and len(reports) == 2, (
        f"`reports` should be a list of two residual lists [plain, remat]; found {describe(reports)}.")
    for label, lines in zip(LABELS, reports):
        assert isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines), (
            f"The {label} entry of `reports` should be a list of the printed residual lines (strings); found {describe(lines)}.")
    return [list(lines) for lines in reports]


# A source position as print_saved_residuals names it: "from <file>:<line>:<column> (<function>)".
POSITION = re.compile(r"(\S*<cell \d+>|\S+):(\d+):(\d+) \(([^()\n]{0,200})\)")   # a cell's name has a space


def _positions(lines):
    return list(_positions_of(tuple(lines)))


@functools.lru_cache(maxsize=16)
def _positions_of(lines: tuple[str, ...]) -> tuple[str, ...]:
    """The sorted positions, read once per set of lines: each residual check reads the same reports again (16: the
    lists one grading compares, so the parent keeps at most 16 runs' values, each within `value_max_bytes`)."""
    return tuple(sorted(match.group(0) for line in lines for match in POSITION.finditer(line[:2000])))


def _shown_position(position):
    """A position as the student knows it: the file's own name (the grader's run compiles the file under a folder
    named for that run, which every real print_saved_residuals line of the run names)."""
    return position.rsplit("/", 1)[-1]


def _two_line_lists(value):
    return (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines) for lines in value))


def _printed_for_own_functions(run, reports):
    """`reports` must be what print_saved_residuals printed in this run for the file's own `plain` and `remat`: the
    residual_reports probe asks JAX the same about them, and each list must name the same source positions (where
    in the file each saved value is computed). Lines pasted from the lesson page name the page's positions,
    made-up lines none, and lines typed in with this file's own positions miss the folder named for this run that
    the grader's run compiles the file under (grader/runs/jobs.py, `code_tag`). Any answer of the probe in the run counts (the file may change its functions later); a JAX
    that cannot be asked (the probe answers None) leaves the reports unjudged by this."""
    history = run.snapshot.probe_history.get("residual_reports", [])
    assert history, ("The grader could not ask JAX about your `plain` and `remat` at `x` (they were never all "
                     "defined), so nothing shows these residual lists came from them.")
    answers = [value for _, _, value, error in history if not error]
    if not answers:
        run.probe("residual_reports")   # raises with what calling the file's functions raised
    printed = [value for value in answers if _two_line_lists(value)]
    if not printed:
        return
    wanted = [_positions(lines) for lines in reports]
    if any([_positions(lines) for lines in answer] == wanted for answer in printed):
        return
    latest = [_positions(lines) for lines in printed[-1]]
    index = next((i for i in range(2) if wanted[i] != latest[i]), 0)
    named = ", ".join(f"`{_shown_position(p)}`" for p in sorted(set(wanted[index]))[:2]) or "no source position"
    truth = ", ".join(f"`{_shown_position(p)}`" for p in sorted(set(latest[index]))[:2]) or "none"
    if named == truth:   # the right places, but not under the name the grader's run gave the file: not printed here
        raise AssertionError(
            f"Your {LABELS[index]} residual list names {named}, but its lines are not what print_saved_residuals "
            f"prints when the grader runs your file: every line it prints there names the file as that run does, and "
            f"yours do not, so they were not printed by this run. Build each list from the lines "
            f"print_saved_residuals(fn, x) prints for your `plain` and `remat` when the file runs, not from text "
            f"written into the file.")
    raise AssertionError(
        f"Your {LABELS[index]} residual list is not what print_saved_residuals prints for your own "
        f"`{LABELS[index]}` in this run: its lines name {named}, where JAX names {truth} for your functions here. "
        f"Build each list from the lines print_saved_residuals(fn, x) prints for your `plain` and `remat`, keeping "
        f"each line whole.")


def reports_are_two_residual_lists(run, oracle, settings):
    reports = _reports(run)
    for label, lines in zip(LABELS, reports):
        assert lines and all(line.strip() for line in lines), (
            f"The {label} residual list is empty or has blank lines; keep the non-empty lines print_saved_residuals prints.")
        assert any("[" in line and "]" in line for line in lines), (
            f"The {label} residual list does not look like print_saved_residuals output (e.g. 'f32[16] output of tanh ...').")
    _printed_for_own_functions(run, reports)
    return "`reports` holds the two residual lists."


def report_lengths_match_live_counts(run, oracle, settings):
    reports = _reports(run)
    counts = [len(lines) for lines in reports]
    expected = oracle.residual_counts
    assert equal(counts, expected, what="the lengths of your residual lists [plain, remat] vs the installed JAX's",
                 unit="lines"), (
        f"Your residual lists have {counts[0]} and {counts[1]} entries; the installed JAX saves {expected[0]} (plain) "
        f"and {expected[1]} (remat). Count every non-empty line print_saved_residuals prints for each policy.")
    _printed_for_own_functions(run, reports)
    return f"Residual counts {counts[0]} and {counts[1]} match this JAX version."


def remat_saves_fewer(run, oracle, settings):
    plain_lines, remat_lines = _reports(run)
    assert len(remat_lines) < len(plain_lines), (
        f"Layer rematerialization should save fewer residuals than the ordinary policy; found {len(plain_lines)} and "
        f"{len(remat_lines)}. Is `remat` really using jax.checkpoint(layer)?")
    _printed_for_own_functions(run, [plain_lines, remat_lines])
    return "Rematerialization saves fewer residual descriptions."


# ---- memory ---------------------------------------------------------------------------------------

def _memory_entries(run, oracle, strict=True):
    """The student's `memory` beside what the compiler reported for each executable in this run.

    `strict=False` (the memory group outside baseline): a list cut short, as when the run stopped on a missing
    analysis, is judged on the entries it has; the missing analysis itself is memory_unavailable's to judge."""
    memory = run["memory"]
    expected = oracle.memory
    complete = isinstance(memory, (list, tuple)) and len(memory) == len(expected)
    if not complete and not strict and isinstance(memory, (list, tuple)):
        return [(label, memory[i], expected[i]) for i, label in enumerate(LABELS) if i < len(memory)]
    assert complete, (
        f"`memory` should hold one entry per executable [plain, remat]; found {describe(memory)}. "
        "Append once per executable, also when its analysis is missing (None).")
    return list(zip(LABELS, memory, expected))


def _byte_count(value):
    """A non-negative whole number (a Python int, or a NumPy integer that arrives as a 0-d array), else None."""
    if isinstance(value, bool) or (isinstance(value, np.ndarray) and value.dtype.kind == "b"):
        return None
    try:
        number = as_number(value, "a byte count")
    except AssertionError:
        return None
    return int(number) if math.isfinite(number) and number >= 0 and number == int(number) else None


def _reported(run):
    return "In this run the compiler reported an analysis" if run.scenario != "baseline" else "The compiler reported an analysis"


def memory_is_two_dicts(run, oracle, settings):
    for label, entry, expected in _memory_entries(run, oracle, strict=run.scenario == "baseline"):
        if expected is None:
            continue   # a missing analysis: memory_unavailable.recorded_as_none judges that entry
        assert isinstance(entry, dict), (
            f"{_reported(run)} for the {label} executable, so its entry in `memory` should be a dict of the byte figures; "
            f"found {describe(entry)}. Record None only when memory_analysis() returns None.")
        missing = [name for name in settings.memory_fields if name not in entry]
        assert not missing, f"The {label} memory dict lacks {', '.join(missing)}."
        for name in settings.memory_fields:
            assert _byte_count(entry[name]) is not None, (
                f"{name} in the {label} memory dict should be a whole number of bytes; found {describe(entry[name])}.")
    return "Each available analysis is recorded as a dict of byte figures."


def memory_figures_match_compiler(run, oracle, settings):
    """Feedback quotes the figures the student sees: in the file as written, what their own run of the file reports
    (the grader's run offsets every figure by an amount only it knows, never quoted); elsewhere, that run's."""
    as_written = run.scenario == "baseline"
    entries = _memory_entries(run, oracle, strict=as_written)
    for index, (label, entry, expected) in enumerate(entries):
        if expected is None:
            continue
        assert isinstance(entry, dict), f"{_reported(run)} for the {label} executable; its entry in `memory` is {describe(entry)}, not a dict."
        recorded = {name: _byte_count(entry.get(name)) for name in settings.memory_fields}
        wrong = [name for name in settings.memory_fields if recorded[name] != expected[name]]
        equal([recorded[name] for name in settings.memory_fields], [expected[name] for name in settings.memory_fields],
              what=f"the {label} executable's figures {settings.memory_fields} vs the compiler's in this run",
              unit="bytes")
        if not wrong:
            continue
        seen = oracle.real_memory[index] if as_written and oracle.real_memory[index] is not None else expected
        where = ("when you run your file (the grader's run reports every figure offset by an amount only it knows, so "
                 "only a figure read in the run passes)" if seen is not expected else "in this run")
        crossed = [other for other, (_, _, figures) in zip(LABELS, entries) if other != label and figures is not None
                   and all(recorded[name] == figures[name] for name in settings.memory_fields)]
        assert not crossed, (
            f"The {label} entry of `memory` holds exactly the figures the compiler reported for the {crossed[0]} "
            f"executable: `memory` should follow the order [plain, remat]. Compile and record the executables in that "
            "order (for fn in (plain, remat)).")
        swapped = [(name, other) for name in wrong for other in settings.memory_fields
                   if other != name and recorded[name] == expected[other]]
        assert not swapped, (
            f"In the {label} dict, {swapped[0][0]} holds the figure the compiler reported for {swapped[0][1]} "
            f"({seen[swapped[0][1]]} {where}). Read each field by its own name: getattr(analysis, name).")
        name = wrong[0]
        assert seen is expected or recorded[name] != seen[name], (
            f"{name} for {label} is {seen[name]}, the figure your own run shows, but the grader's run reports another "
            "(it offsets every figure by an amount only it knows), so a figure typed into the file fails. Read every "
            "field from executable.memory_analysis() (getattr(analysis, name)).")
        raise AssertionError(
            f"{name} for {label} is {describe(entry.get(name))}, but the compiler reports {seen[name]} bytes {where}. "
            "Read every field from executable.memory_analysis() (getattr(analysis, name)), so the figures are "
            "whatever this compiler reports.")
    return "The recorded figures are the ones the compiler reported."


def unavailable_memory_is_none(run, oracle, settings):
    entries = _memory_entries(run, oracle)
    for label, entry, expected in entries:
        if expected is not None or entry is None:
            continue
        if isinstance(entry, dict):
            values = [_byte_count(v) for v in entry.values()]
            assert values, (f"The {label} executable's analysis was missing in this run and you recorded an empty dict; "
                            "record a missing analysis as None (unavailable).")
            assert not all(v == 0 for v in values), (
                f"The {label} executable's analysis was missing in this run and you recorded zeros. Record a missing "
                "analysis as None (unavailable), never as 0 bytes.")
        raise AssertionError(
            f"The {label} executable's analysis was missing in this run (memory_analysis() returned None), so its entry "
            f"in `memory` should be None; found {describe(entry)}. Backend support varies: record missing analysis as unavailable.")
    missing = [label for label, _, expected in entries if expected is None]
    return f"The missing analysis ({', '.join(missing) or 'none'}) is recorded as None."


# ---- the memory panel -----------------------------------------------------------------------------

# Words that say a bar is about whether an analysis exists (not how many bytes it reports): a label that says what a
# 1 or a 0 means ("1 = returned", "0 means not returned") counts whatever its words.
AVAILABILITY = re.compile(r"availab|missing|absent|support|reported|return|\bgiven\b|came back|obtain|provided|"
                          r"\bnone\b|\bn/?a\b|exist|present|\bhas\b|\bhave\b|\bwhether\b|\byes\b|\btrue\b|\bbool|"
                          r"\b[01]\s*(=|:|means|if|when|for|->|→)|=\s*[01]\b|\(\s*[01]\s*\)",
                          re.IGNORECASE)
# What each replay of the variant run gives the panel code (assignment.toml [replays]): which analyses it has.
REPLAYED_AVAILABILITY = {"plain_missing": [False, True], "remat_missing": [True, False]}
BYTES = re.compile(r"\b(bytes?|[kmg]i?b)\b", re.IGNORECASE)
NEGATION = re.compile(r"\b(not|no|never|instead of)\s+(an?\s+)?(\w+\s+)?$", re.IGNORECASE)


def _second_panel(run):
    panels = run["panels"]
    assert isinstance(panels, (list, tuple)) and len(panels) >= 2, f"`panels` should hold two panels; found {describe(panels)}."
    visual = run["visual_data"]
    assert isinstance(visual, dict) and _same_data(plain_data(visual.get("panels")), plain_data(list(panels))), (
        "`visual_data` should be {'kind': 'panels', 'panels': panels} built from the same `panels` list.")
    panel = panels[1]
    assert isinstance(panel, dict), f"The second panel should be a dict; found {describe(panel)}."
    series = panel.get("series")
    assert isinstance(series, list) and series and isinstance(series[0], dict), "The second panel needs a 'series' list with one series."
    return panel, series[0], plain_data(series[0].get("y"))


def _same_data(a, b):
    """Equal plain data, a NaN equal to a NaN (a missing figure drawn as NaN in both lists is the same data)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_data(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_data(a[k], b[k]) for k in a)
    return a == b


def _speaks_of_bytes(text):
    """The text names bytes as the unit, not merely to deny it ('availability, not byte count')."""
    return any(not NEGATION.search(text[:match.start()]) for match in BYTES.finditer(text))


def second_panel_is_availability(run, oracle, settings):
    """Judged in the run and in each replay that hides one executable's analysis (judged_in_replays), so the branch
    is judged with either analysis missing whichever the batch's world hides."""
    panel, series, y = _second_panel(run)
    available = REPLAYED_AVAILABILITY.get(getattr(run, "replay_name", ""), [entry is not None for entry in oracle.memory])
    if all(available):
        return "Every analysis was available in this run; no availability panel was needed."
    labels = [str(panel.get(key, "")) for key in ("title", "ylabel")] + [str(series.get("label", ""))]
    assert isinstance(y, list) and len(y) == len(available), (
        f"The substitute panel should have one bar per executable; found y = {y!r}.")
    heights = [float(v) if isinstance(v, (bool, int, float)) else None for v in y]
    assert all(h in (0.0, 1.0) for h in heights), (
        f"With an analysis missing the second panel should show availability (1 = reported, 0 = missing) for each "
        f"executable; its bars are {y!r}, which read as byte counts or other quantities.")
    # A label presents the bars as bytes when it names bytes as its unit and says nothing of availability
    # ("Temporary bytes unavailable" is an availability title; "estimated temporary bytes" is a byte axis).
    bytes_label = next((text for text in labels[1:2] + labels[:1] if _speaks_of_bytes(text)
                        and not AVAILABILITY.search(text)), None)
    assert bytes_label is None, (
        f"The substitute panel is labelled in bytes ({bytes_label!r}); with an analysis missing, a bar of 0 bytes reads "
        "as 'no memory'. Label the panel by what its bars show: whether each executable has an analysis.")
    assert any(AVAILABILITY.search(text) for text in labels), (
        "Label the substitute panel as availability (its title, y-label or series label should say whether each "
        "executable has a memory analysis), so nobody reads its bars as bytes.")
    for label, ok, height in zip(LABELS, available, heights):   # the bars, judged against what the compiler reported
        assert ok or height == 0.0, (
            f"The {label} executable's analysis was missing here, but its availability bar is {y[LABELS.index(label)]!r}.")
        assert not ok or height == 1.0, (
            f"Here the compiler reported an analysis for the {label} executable, but its availability bar is "
            f"{y[LABELS.index(label)]!r}: mark each executable by what it reported (`int(m is not None)`), 1 where an "
            "analysis came back.")
    return "The missing analysis is drawn as a labelled availability panel."


def second_panel_is_bytes(run, oracle, settings):
    """The lesson's own code draws this panel from `memory`: it is judged against the student's `memory`, so a
    mistake in the memory exercise costs there once, not again here. In the variant run it is judged on the replay
    `all_available` (the file's end run again with every analysis present), where `memory` is the replay's."""
    panel, _, y = _second_panel(run)
    memory = run["memory"]
    if isinstance(memory, (list, tuple)) and any(entry is None for entry in memory):
        return ("Your `memory` records a missing analysis, so the lesson's code drew the availability panel here; the "
                "memory checks judge that record.")
    if isinstance(memory, (list, tuple)) and memory and all(isinstance(entry, dict) for entry in memory):
        expected = [_byte_count(entry.get("temp_size_in_bytes")) for entry in memory]
        source = "the temporary bytes your `memory` records"
    elif any(entry is None for entry in oracle.memory):
        return "The grader's compiler reported no analysis here, so the byte panel could not be compared."
    else:
        expected = [entry["temp_size_in_bytes"] for entry in oracle.memory]
        source = "the compiled temporary bytes"
    assert equal(y, expected, what=f"the second panel's bars vs {source}", unit="bytes"), (
        f"When every analysis is available the second panel should show {source}, {expected}; found y = {y!r}. "
        "Keep the lesson's code that draws it from `memory`.")
    return "The available case draws the temporary-byte panel."


# ---- directional derivative -----------------------------------------------------------------------

def _evaluated_in_float64(run, oracle, settings, eps):
    """The run's `finite` is a central difference at `eps` to within float64 rounding: proof that it evaluated the
    objective in float64 (float32 rounding at such a step lands there by chance essentially never)."""
    if not run.has("finite"):
        return False
    try:
        finite = as_number(run["finite"], "`finite`")
    except AssertionError:
        return False
    return math.isfinite(finite) and _closest(finite, oracle.central_differences(eps)) <= oracle.finite_noise(
        eps, settings.finite_noise_float64, DOUBLE)


def eps_is_a_sensible_step(run, oracle, settings):
    """A step judged in the precision the run used: float64 when its `finite` proves float64 evaluations, else
    float32 (the lesson's)."""
    eps = as_number(run["eps"], "`eps`")
    assert math.isfinite(eps) and eps > 0, f"`eps` should be a positive step; found {eps!r}."
    if _evaluated_in_float64(run, oracle, settings, eps):
        assert in_range(eps, settings.eps_min_float64, settings.eps_max, what="`eps` vs the sensible float64 steps",
                        unit="(a step along v, units of x)"), (
            f"`eps` = {eps:g} is outside [{settings.eps_min_float64:g}, {settings.eps_max:g}]: even in float64, which "
            "your central difference used, a smaller step drowns in rounding error and a larger one in truncation error.")
        return f"`eps` = {eps:g} is a sensible step for the float64 evaluations your central difference used."
    assert in_range(eps, settings.eps_min, settings.eps_max, what="`eps` vs the sensible float32 steps",
                    unit="(a step along v, units of x)"), (
        f"`eps` = {eps:g} is outside [{settings.eps_min:g}, {settings.eps_max:g}]: with the lesson's float32 "
        "evaluations a smaller step drowns in rounding error and a larger one in truncation error (if you evaluated "
        "in float64, `finite` did not come out as a float64 central difference at this step).")
    return f"`eps` = {eps:g} is a sensible float32 step."


def automatic_is_gradient_dot_ones(run, oracle, settings):
    automatic = as_number(run["automatic"], "`automatic`")
    assert math.isfinite(automatic), f"`automatic` is {automatic!r}; the directional derivative is a finite number."
    gradient = oracle.autodiff_gradient
    tolerance = oracle.automatic_tolerance(settings)
    expected = float(gradient.sum())
    if within(automatic, expected, tolerance, what="`automatic` vs JAX's autodiff of the objective in this run, "
              "gradient · (1,…,1)", tolerance_kind=AUTOMATIC_KIND,
              unchanged=float(oracle.gradient.sum()) if oracle.derivatives_changed else None):
        return "`automatic` is JAX's autodiff of the objective, dotted with the all-ones direction."
    raise AssertionError(_automatic_diagnosis(run, oracle, settings, automatic, expected, tolerance))


def _automatic_diagnosis(run, oracle, settings, automatic, expected, tolerance):
    """Why `automatic` is not autodiff's directional derivative in this run, in words true of this value."""
    eps = _eps(run)
    if eps is not None and any(abs(automatic - q) <= max(tolerance, oracle.finite_noise(eps, settings.finite_noise_float32, SINGLE))
                               for q in oracle.central_differences(eps)):
        return (f"`automatic` = {fmt(automatic)} equals the central difference of the objective at your eps: it is a "
                "difference quotient, not automatic differentiation. Differentiate the objective with JAX and take the "
                "dot product with the all-ones direction.")
    exact = float(oracle.gradient.sum())
    if within(automatic, exact, tolerance, what="`automatic` vs the unchanged objective's exact directional derivative "
              "(what a value not following this run's rules gives)", tolerance_kind=AUTOMATIC_KIND):
        return (f"`automatic` = {fmt(automatic)} is the directional derivative of the unchanged objective, but not what "
                f"JAX's automatic differentiation of the objective returned in this run ({fmt(expected)}): the grader's "
                "variant run changes JAX's derivative rules by tiny amounts, and your value did not follow them. The "
                "exercise asks for the gradient by JAX autodiff, dotted with the direction.")
    proven = abs(automatic - exact) > settings.separation * tolerance   # far from every reading along (1,...,1)
    for vector in vectors(run.sightings(until="automatic"), settings.width) if proven else []:
        if not np.allclose(vector, oracle.ones) and np.any(vector) and abs(automatic - float(_gradient_dot(oracle, vector))) <= tolerance:
            return (f"`automatic` = {fmt(automatic)} is the gradient dotted with a direction other than (1,…,1). "
                    "The exercise's direction v has every entry equal to 1.")
    return (f"`automatic` = {fmt(automatic)}, but the gradient of the objective at `x` by JAX autodiff, dotted with "
            f"(1,…,1), is {fmt(expected)} in this run. Check which function you differentiate (the original objective "
            "`plain`), at which point (`x`), and the dot product with the all-ones direction.")


def _gradient_dot(oracle, vector):
    return float(oracle.autodiff_gradient @ vector)


def _eps(run):
    """The student's `eps` (as `finite` used it) as a positive number, or None (a check that does not need it must
    not fail on it)."""
    if not run.has("eps"):
        return None
    try:
        eps = as_number(run["eps"], "`eps`")
    except AssertionError:
        return None
    return eps if math.isfinite(eps) and eps > 0 else None


def _closest(value, candidates):
    return min(abs(value - c) for c in candidates)


def _nearest(value, candidates):
    """The candidate `_closest` measures the distance to."""
    return min(candidates, key=lambda c: abs(value - c))


def finite_is_central_difference(run, oracle, settings):
    """`finite` must be the central difference of the objective as this run evaluates it, at the reported eps. Where
    the scenario changes the evaluations, that value is told from every slope written down without evaluating
    (the exact one, autodiff's, a re-implementation's) only when the precision the run used leaves room: float32
    rounding at a tiny step swamps the change, and then no value can be credited."""
    finite = as_number(run["finite"], "`finite`")
    eps = as_number(run["eps"], "`eps`")
    assert math.isfinite(eps) and eps > 0, f"`eps` should be a positive step; found {eps!r}."
    assert math.isfinite(finite), f"`finite` is {finite!r}; a central difference of a finite objective is a finite number."
    honest = oracle.central_differences(eps)
    # A step of length eps along the unit vector v/|v| (the difference then scaled by |v|) is the central difference
    # along v at step eps/|v|, as honest as eps along v: its rounding is that of its own, smaller step, so it is
    # compared with the differences at that step, within that step's noise and separation; a value between the two
    # readings (oracle.from_honest's band) is credited as they are.
    steps = ((eps, "your eps", "eps"),
             (eps / float(np.linalg.norm(np.ones(settings.width))), "your eps along v/|v|", "eps/|v|"))
    unconfirmed = None
    for name, units, unit in (("float64", settings.finite_noise_float64, DOUBLE), ("float32", settings.finite_noise_float32, SINGLE)):
        matched = next((step for step, at, over in steps if within(
            finite, _nearest(finite, oracle.central_differences(step)), oracle.finite_noise(step, units, unit),
            what=f"`finite` vs the central difference of this run's evaluations at {at}, with {name} rounding",
            tolerance_kind=f"absolute: finite_noise_{name} rounding units of the largest |f| evaluated, over {over}",
            unchanged=oracle.central_differences(step, oracle.unchanged)[0] if oracle.values_changed else None)), None)
        if matched is None and unit == SINGLE and oracle.values_changed and oracle.from_honest(finite, eps, settings) <= 1:
            matched = eps   # between the two honest readings (a stencil, a step between eps/|v| and eps): no value
            #                 tells it from an honest one in any world, so it is credited in every world
        if matched is None:
            continue
        in_range = unit == DOUBLE or settings.eps_min <= eps <= settings.eps_max   # where suitable worlds separate it
        if not oracle.values_changed or (in_range and oracle.finite_separation(matched, settings, unit) >= settings.separation):
            # credited by its value alone: this world's evaluations move a central difference at another step, along
            # other directions or by another stencil by other amounts (oracle.ValueChange), which the value shows
            # wherever it was computed; what the run's points were is never a reason to refuse it
            return f"`finite` is the central difference of the objective's values at x ± {eps:g}·v."
        unconfirmed = (name, matched)
        break
    written = _written_down(oracle, finite)
    if written:
        raise AssertionError(written)
    if unconfirmed:
        name, step = unconfirmed
        taken = (f"At eps = {eps:g}" if step == eps else
                 f"At eps = {eps:g}, your `finite` matches a central difference at step {step:.2g} (eps along the unit "
                 f"vector v/|v|, the difference scaled by |v|), and")
        raise AssertionError(
            f"{taken} the grader cannot confirm your `finite` as a central difference of the objective in {name}: its "
            f"check tells a central difference from the exact slope for steps between {settings.eps_min:g} and "
            f"{settings.eps_max:g} (at a smaller step rounding swamps the difference). Use a step in that range (or "
            "compute in float64).")
    raise AssertionError(_finite_diagnosis(run, oracle, settings, finite, eps, honest))


STENCIL_NOISE = 4   # a one-sided second-order stencil weighs its evaluations 3, 4 and 1 (a central one 1 and 1)
OTHER_STEPS = (10.0, 5.0, 3.0, 2.0, 0.5, 1 / 3, 0.2, 0.1)   # multiples of eps a difference is compared at to name it


def _proven_apart(oracle, settings, finite, eps, candidate, tolerance):
    """`finite` is `candidate` (within `tolerance`) and lies `separation` tolerances from every honest reading at the
    reported eps (at eps, and at eps/|v|, each within its own rounding): the value itself shows it is that candidate."""
    return abs(finite - candidate) <= tolerance and oracle.from_honest(finite, eps, settings) > settings.separation


def _one_sided_stencil(oracle, settings, finite, eps, honest):
    """What to tell a `finite` that is the one-sided second-order stencil (-3 f(x) + 4 f(x + eps v) - f(x + 2 eps v)) /
    2 eps of this run's evaluations (or its backward mirror), where its value shows it: the world's evaluations move
    that stencil by another amount than the central difference. Else None."""
    tolerance = STENCIL_NOISE * oracle.finite_noise(eps, settings.finite_noise_float32, SINGLE)
    for side, value in oracle.second_order_one_sided(eps).items():
        if _proven_apart(oracle, settings, finite, eps, value, tolerance):
            formula = ("(−3 f(x) + 4 f(x + ε·v) − f(x + 2ε·v)) / 2ε" if side == "forward"
                       else "(3 f(x) − 4 f(x − ε·v) + f(x − 2ε·v)) / 2ε")
            return (f"`finite` is the one-sided second-order difference {formula} of this run's evaluations at eps = "
                    f"{eps:g}, not a central difference (its value is that stencil's, which this run's evaluations "
                    "move by another amount). The exercise asks for the central difference: evaluate the objective "
                    "at x + ε·v and x − ε·v and divide the difference of the two values by 2ε.")
    return None


def _other_step(oracle, settings, finite, eps, honest):
    """What to tell a `finite` whose value is the central difference at another step than the `eps` it reports, where
    the value shows it (this world's evaluations move differences at different steps by different amounts), else
    None. A step of length eps along the unit vector v/|v| is as honest as eps along v, and is never named."""
    tolerance = oracle.finite_noise(eps, settings.finite_noise_float32, SINGLE)
    for factor in OTHER_STEPS:
        step = eps * factor
        if not settings.eps_min_float64 <= step <= 10 * settings.eps_max:
            continue
        noise = max(tolerance, oracle.finite_noise(step, settings.finite_noise_float32, SINGLE))
        if any(_proven_apart(oracle, settings, finite, eps, value, noise) for value in oracle.central_differences(step)):
            return (f"`eps` = {eps:g}, but `finite` is the central difference at step {step:.3g}, not at the step "
                    "`eps` reports: this run's evaluations move a difference at each step by its own amount, and "
                    f"yours moved as the one at {step:.3g} does. Take the difference at the step you report (use "
                    "`eps` itself in the formula).")
    return None


def _coordinate_sum(oracle, settings, finite, eps, honest):
    """What to tell a `finite` that is the sum of central differences along each coordinate axis, where its value
    shows it, else None."""
    tolerance = oracle.coordinate_noise * oracle.finite_noise(eps, settings.finite_noise_float32, SINGLE)
    if _proven_apart(oracle, settings, finite, eps, oracle.coordinate_sum(eps), tolerance):
        return ("`finite` is the sum of central differences taken along each coordinate axis, not the central "
                "difference along v: this run's evaluations move the two by different amounts, and yours moved as "
                "the sum does. A sum of differences along other directions is not the directional difference "
                "quotient the exercise asks for: evaluate the objective at x + ε·v and x − ε·v.")
    return None


def _written_down(oracle, finite):
    """When `finite` is, to its last digits, a slope that needs no evaluation (and the run changes what evaluating
    returns, so a central difference is not that slope): say which, else None."""
    if not oracle.values_changed:
        return None
    for label, value in oracle.slopes().items():
        if abs(finite - value) <= 2 * SINGLE * abs(value):
            return _slope_message(finite, label)
    return None


def _slope_message(finite, label):
    return (f"`finite` = {fmt(finite)} equals {label}, not the central difference of the objective's values in this "
            "run: the grader's variant run changes what evaluating the objective returns by a tiny amount that only a "
            "difference quotient of real evaluations follows. Evaluate the lesson's objective `plain` at x + ε·v and "
            "x − ε·v and divide the difference of the two values by 2ε.")


def _finite_diagnosis(run, oracle, settings, finite, eps, honest):
    """Why `finite` is not the central difference of the objective's values, in words true of this value."""
    tolerance = max(oracle.finite_noise(eps, settings.finite_noise_float32, SINGLE), SINGLE * abs(finite))
    near = lambda value: abs(finite - value) <= tolerance  # noqa: E731
    for explained in (_one_sided_stencil(oracle, settings, finite, eps, honest),
                      _coordinate_sum(oracle, settings, finite, eps, honest),
                      _other_step(oracle, settings, finite, eps, honest)):
        if explained:
            return explained
    one_sided = oracle.one_sided_differences(eps)
    for side, value in one_sided.items():
        if near(value) and _closest(finite, honest) > tolerance:
            sign = "+" if side == "forward" else "−"
            return (f"`finite` = {fmt(finite)} is the {side} difference of the objective at x and x {sign} {eps:g}·v, "
                    "not a central difference: evaluate at both x + ε·v and x − ε·v and divide by 2ε.")
    central = honest[0]
    # A direction, a factor or a formula is named only when the value proves it: it matches that reading to within
    # the tolerance and lies beyond `separation` tolerances from every reading along v = (1,...,1) (this run's
    # evaluations, the unchanged objective's, the slopes): otherwise the feedback says only what it did not follow.
    along_ones = [*honest, *oracle.central_differences(eps, oracle.unchanged), *oracle.slopes().values()]
    proven = min(abs(finite - value) for value in along_ones) > settings.separation * tolerance
    for vector in vectors(run.sightings(until="finite"), settings.width) if proven else []:
        along = float(oracle.gradient @ vector)
        if np.any(vector) and not np.allclose(vector, vector[0]) and abs(finite - along) <= tolerance + 1e-4 * abs(along):
            return (f"`finite` = {fmt(finite)} is the directional derivative along another vector your file made, not "
                    "along v = (1,…,1): the exercise's direction is the all-ones vector.")
    for factor, wording in ((2.0, "divided by ε instead of 2ε"), (0.5, "divided by 4ε instead of 2ε"),
                            (0.25, "taken along the unit vector v/|v| instead of v = (1,…,1)")):
        if proven and near(factor * central):
            return f"`finite` = {fmt(finite)} is {factor:g} times the central difference of the objective at x ± {eps:g}·v: it looks {wording}."
    for label, value in oracle.slopes().items():
        if near(value) and oracle.values_changed:
            return _slope_message(finite, label)
    if oracle.values_changed and near(oracle.central_differences(eps, oracle.unchanged)[0]):
        return (f"`finite` = {fmt(finite)} does not follow the objective's evaluations at x ± {eps:g}·v in this run: "
                f"there, a central difference of the objective as this run's JAX evaluates it is {fmt(central)}. Compute "
                "`finite` from two evaluations of the lesson's objective `plain` at x + ε·v and x − ε·v and divide their "
                "difference by 2ε. (The check follows every evaluation whose layers run in JAX, wherever the final "
                "sum of squares is taken; a re-implementation of the layers in NumPy is not the lesson's objective "
                "and is never followed.)")
    return (f"`finite` = {fmt(finite)}, but the central difference of the objective at x ± {eps:g}·v, with your eps, is "
            f"{fmt(central)} in this run. Evaluate the objective `plain` at x + ε·v and x − ε·v with v = (1,…,1) and "
            "divide the difference of the two values by 2ε, using the same ε you report as `eps`.")


# ---- Hessian-vector products ----------------------------------------------------------------------

def _hvp(run, settings, name):
    value = run[name]
    assert not (isinstance(value, tuple) and len(value) == 2), (
        f"`{name}` is a pair: jax.jvp returns (primal_out, tangent_out); keep the tangent output.")
    vector = as_vector(value, f"`{name}`", settings.width, column=True)
    assert np.all(np.isfinite(vector)), f"`{name}` contains NaN or Inf."
    return vector


def _candidate_directions(run, settings, name):
    """Vectors the HVP may have been computed along: every vector of `width` entries the run's expressions made up
    to it (tangents, directions, points; columns and rows too), and `direction` as the exercise left it. They only
    name a direction: the value itself must still follow the run's derivative rules along it."""
    found = [d for d in vectors(run.sightings(until=name), settings.width) if d.any()]
    try:
        direction = as_vector(run["direction"], "`direction`", settings.width, column=True)
        if np.any(direction):
            found.insert(0, direction)
    except (AssertionError, Missing):   # no usable `direction`: the sightings alone
        pass
    # The lesson's own tangents, also when the file made them where no array is kept (inside jit, a scan, a helper
    # it never returns): naming them earns nothing, since only second-order autodiff in this run gives H v along them
    lesson = np.linspace(-1.0, 1.0, settings.width)
    found += [lesson, lesson / np.linalg.norm(lesson), np.linspace(0.0, 1.0, settings.width)]
    return found


def _matching(value, hessian, directions, share, oracle, settings, what="", without=None):
    """The first direction d with max|value - H d| within its allowance (a `share` of max|H d|, never less than the
    rounding of the magnitudes the product adds up: oracle.hvp_allowances), one matrix product for all of them.
    With `what`, the comparison along that direction (or the closest one) is recorded for `grader explain`, with
    `without @ d` as what a value not following this run's change gives."""
    if not directions:
        return None
    stacked = np.stack(directions)
    error = np.max(np.abs(stacked @ hessian.T - value), axis=1)
    allowances = oracle.hvp_allowances(hessian, stacked, share, settings)
    hits = np.flatnonzero(error <= allowances)
    if what:
        with np.errstate(all="ignore"):
            best = int(hits[0]) if hits.size else int(np.nanargmin(np.where(allowances > 0, error / allowances, np.inf)))
        compared(f"{what}, d the {'first matching' if hits.size else 'closest'} of {len(directions)} candidate "
                 "directions", value, hessian @ stacked[best], error[best], allowances[best], bool(hits.size),
                 measure="max|student − H·d| over the entries", tolerance_kind=HVP_KIND,
                 unchanged=without @ stacked[best] if without is not None else None)
    return directions[int(hits[0])] if hits.size else None


HVP_REPLAY = "hvp_scaled"   # assignment.toml [replays.hvp_scaled]


@functools.cache
def _probes():
    """probes.py, the one definition of the replays' secret changes (the run draws them with it too)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("performance05_probes", Path(__file__).with_name("probes.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replay_follows(run, settings, name, checkpointed):
    """Which objective `name` followed when the replay ran the file's HVP statements again with each objective's
    Hessian scaled by a secret 1 + k (probes._hvp_scaled): "own" (its value times its own objective's 1 + k: second-
    order autodiff of that objective, along whatever tangent, wherever it was made), "other" (the other objective's
    factor: a copy of the other HVP, or autodiff of a function the file built from the other objective, such as
    jax.checkpoint(plain), so never a refusal by itself), or None (the replay did not run, raised, or
    the value followed neither: "neither"). A value the file cannot shape: the factors come from the run's secret,
    which only the grader keeps (`snapshot.secret`)."""
    found = run.snapshot.replays.get(HVP_REPLAY)
    if not found or "values" not in found or name not in found["values"]:
        return None
    try:
        again = as_vector(found["values"][name], f"`{name}`", settings.width, column=True)
    except AssertionError:
        return None
    value = _hvp(run, settings, name)
    size = float(np.max(np.abs(value)))
    if not size or not np.all(np.isfinite(again)):
        return None
    k_plain, k_remat = _probes()._replay_scales(run.snapshot.secret)
    own, other = (k_remat, k_plain) if checkpointed else (k_plain, k_remat)
    for label, k in (("own", own), ("other", other)):
        allowance = settings.hvp_replay_tolerance * (1.0 + k) * size
        off = float(np.max(np.abs(again - (1.0 + k) * value)))
        if compared(f"`{name}` with {'remat' if (label == 'own') == checkpointed else 'plain'}'s Hessian scaled by a "
                    "secret 1 + k (the replay) vs (1 + k) times its value in the run", again, (1.0 + k) * value, off,
                    allowance, off <= allowance, measure="max|replayed − (1 + k)·value| over the entries",
                    unchanged=value):
            return label
    return "neither"


def _explained_by(run, oracle, settings, name, checkpointed, decide=False):
    """The direction along which `name` is what second-order autodiff of the (rematerialized or ordinary)
    objective returned in this run, or None: a vector the file made, else the tangent both HVPs reveal together.
    With `decide`, the replay decides first where it shows which objective the value followed (_replay_follows),
    and a pair that agrees along a revealed tangent this world does not separate, and that the replay does not
    decide, raises Undecidable."""
    value = _hvp(run, settings, name)
    follows = _replay_follows(run, settings, name, checkpointed) if decide else None
    found = _matching(value, oracle.hessian(checkpointed), _candidate_directions(run, settings, name),
                      settings.hvp_tolerance, oracle, settings,
                      what=f"`{name}` vs H·d, H the Hessian of `{'remat' if checkpointed else 'plain'}` in this run",
                      without=(oracle.hessian(False) if checkpointed else oracle.true_hessian)
                      if oracle.derivatives_changed else None)
    if found is not None:
        if follows in ("other", "neither") and not _separated_along(oracle, settings, found, checkpointed):
            # the replay did not show the method, and along the file's vector this world's changes cannot either
            _undecided_unless_shown(run, oracle, settings, name, checkpointed, UNFOLLOWED_HVP.format(name=name))
        return found
    revealed = _revealed_jointly(run, oracle, settings)
    if revealed is None:
        return None
    if decide:
        # Any pair close enough to one another agrees along the tangent it reveals, wherever the world's changes do
        # not separate the methods along it (everywhere in a run that changes nothing): a value that itself shows a
        # mistake (the gradient, an approximation along a vector of the file's) decides before that tangent does
        shown = _shown_cause(run, oracle, settings, name, checkpointed)   # what the value itself shows, first
        if shown:
            raise AssertionError(shown)
        if follows == "own" and _replay_follows(run, settings, _partner(name), not checkpointed) == "own":
            # both HVPs followed their own objective's secret change: second-order autodiff of each; credited along
            # the one tangent they agree on within a share of the product (not the rounding of a huge tangent, which
            # any two Hessian read-outs such as their diagonals meet), wherever it was made
            tangent = _revealed_jointly(run, oracle, settings, unseparated_too=True)
            if tangent is not None and _agree_closely(run, oracle, settings, tangent):
                return tangent
        if revealed is UNSEPARATED:
            raise Undecidable(UNDECIDABLE_HVPS)
    return None if revealed is UNSEPARATED else revealed


def _agree_closely(run, oracle, settings, tangent):
    """Both HVPs are their objective's Hessian times `tangent` within `hvp_tolerance` of the product's largest entry."""
    for name, checkpointed in (("hvp_plain", False), ("hvp_remat", True)):
        product = oracle.hessian(checkpointed) @ tangent
        if np.max(np.abs(product - _hvp(run, settings, name))) > settings.hvp_tolerance * np.max(np.abs(product)):
            return False
    return True


def _separated_along(oracle, settings, direction, checkpointed):
    """This run's changes move an HVP along `direction` `separation` allowances from what a shortcut gives: the
    ordinary one from the unchanged objective's; the rematerialized one from that and from the ordinary one (a copy).
    True in a run that changes nothing (there, no HVP check decides a method)."""
    if not oracle.derivatives_changed:
        return True
    ordinary, rematerialized, unchanged = oracle.hessian(False), oracle.hessian(True), oracle.true_hessian
    own = rematerialized if checkpointed else ordinary
    apart = settings.separation * float(oracle.hvp_allowances(own, direction, settings.hvp_tolerance, settings)[0])
    shortcuts = (ordinary, unchanged) if checkpointed else (unchanged,)
    return all(float(np.max(np.abs((own - other) @ direction))) >= apart for other in shortcuts)


def _undecided_unless_shown(run, oracle, settings, name, checkpointed, why):
    """Raise the failure the value itself shows (a gradient, an approximation along a vector of the file's), else
    Undecidable(why): what is left is not decided by any value of this run."""
    shown = _shown_cause(run, oracle, settings, name, checkpointed)
    if shown:
        raise AssertionError(shown)
    raise Undecidable(why)


def _partner(name):
    return "hvp_remat" if name == "hvp_plain" else "hvp_plain"


def _revealed_jointly(run, oracle, settings, unseparated_too=False):
    """The tangent v that `hvp_plain` reveals (the ordinary objective's Hessian in this run solved for it) when
    `hvp_remat` is the rematerialized objective's Hessian in this run times the same v, or None.

    A tangent made where no array is kept (inside jit, by indexing) is found from the computation itself: only
    second-order autodiff of both objectives in this run, along one tangent, gives a pair that agrees so. Where the
    run changes the rules, the pair is credited only when along v the rematerialized Hessian differs from the
    ordinary one, and the ordinary one from the unchanged Hessian, by `separation` allowances: a copy of one HVP,
    or HVPs of the unchanged objective (NumPy, a written-down Hessian), then cannot agree by chance."""
    try:
        plain, remat = _hvp(run, settings, "hvp_plain"), _hvp(run, settings, "hvp_remat")
    except (AssertionError, Missing):
        return None
    ordinary, rematerialized, unchanged = oracle.hessian(False), oracle.hessian(True), oracle.true_hessian
    with np.errstate(all="ignore"):
        tangent = np.linalg.lstsq(ordinary, plain, rcond=None)[0]
    if not np.all(np.isfinite(tangent)) or not tangent.any() or _scaled_copy(tangent, run, settings):
        return None
    allowance = max(float(oracle.hvp_allowances(h, tangent, settings.hvp_tolerance, settings)[0])
                    for h in (ordinary, rematerialized))
    plain_off = float(np.max(np.abs(ordinary @ tangent - plain)))
    remat_off = float(np.max(np.abs(rematerialized @ tangent - remat)))
    for label, off, hessian, without, value in (("hvp_plain", plain_off, ordinary, unchanged, plain),
                                                ("hvp_remat", remat_off, rematerialized, ordinary, remat)):
        compared(f"`{label}` vs H·v along the tangent v that `hvp_plain` reveals (solved from it)", value,
                 hessian @ tangent, off, allowance, off <= allowance, measure="max|student − H·v| over the entries",
                 tolerance_kind=HVP_KIND, unchanged=without @ tangent if oracle.derivatives_changed else None)
    if plain_off > allowance or remat_off > allowance:
        return None
    changed = not np.array_equal(ordinary, unchanged)
    apart = settings.separation * allowance
    if changed and not unseparated_too and (np.max(np.abs((rematerialized - ordinary) @ tangent)) < apart
                                            or np.max(np.abs((ordinary - unchanged) @ tangent)) < apart):
        return UNSEPARATED
    return tangent


def _scaled_copy(tangent, run, settings):
    """The recovered tangent is a multiple (other than one) of a vector the file made, such as its `direction`: the
    products were taken along that vector and then scaled, so they are not HVPs along any vector the file made."""
    size = float(np.max(np.abs(tangent)))
    for made in _candidate_directions(run, settings, "hvp_plain"):
        norm2 = float(made @ made)
        if not norm2:
            continue
        factor = float(made @ tangent) / norm2
        if np.max(np.abs(tangent - factor * made)) <= 1e-3 * size and abs(factor - 1.0) > 1e-3:
            return True
    return False


UNSEPARATED = np.zeros(0)   # both HVPs agree along one recovered tangent, where this world cannot tell the methods apart
# Where no vector of the file's explains the HVPs and the pair agrees along the tangent it reveals, a tangent this
# world does not separate: neither a failure (honest autodiff along a tangent made inside jit reads so) nor a pass
# (a copy reads so too): `_explained_by(..., decide=True)` raises Undecidable with this sentence.
UNDECIDABLE_HVPS = (
    "both HVPs agree with second-order autodiff along the one tangent `hvp_plain` reveals (the Hessian in this run "
    "solved for it), but along that tangent the grader's hidden changes in this run are too small to tell "
    "second-order autodiff from a copy of one HVP or an approximation, so no value here shows how they were "
    "computed. Nothing is concluded against you; your instructor decides.")


# A value that is this run's HVP of its objective along a vector of the file's, where this run's changes are too small
# along it to tell it from a shortcut, and that did not follow its own objective's change in the replay: autodiff of a
# function of the file's own making (a copy made earlier, a checkpoint of `plain`) reads so, and so do a copy of the
# other HVP and a value computed without the objective: no value decides between them.
UNFOLLOWED_HVP = (
    "`{name}` matches this run's second-order autodiff along your direction, but along it the grader's hidden "
    "changes in this run are too small to tell it from a copy of the other HVP or a value computed another way, "
    "and when the grader ran your HVP statements again with `plain`'s and `remat`'s second derivatives changed by "
    "different amounts, `{name}` did not change as its own objective's did, so no value here shows how it was "
    "computed. Nothing is concluded against you; your instructor decides.")


def _hvp_diagnosis(run, oracle, settings, name, checkpointed):
    """Why `name` is not second-order autodiff of its objective in this run, in words true of this value."""
    shown = _shown_cause(run, oracle, settings, name, checkpointed)
    if shown:
        return shown
    objective = "the rematerialized objective `remat`" if checkpointed else "the ordinary objective `plain`"
    return (f"`{name}` does not match second-order autodiff of {objective} along any direction your code made "
            "(the grader compares it with the Hessian-vector product along every vector of length "
            f"{settings.width} your file created before it). Check the function you differentiate, the point (`x`) "
            "and the tangent you pass.")


def _shown_cause(run, oracle, settings, name, checkpointed):
    """The mistake `name`'s value itself shows, or '': the gradient, the other objective's or the unchanged
    objective's HVP along a vector of the file's, or an approximation of the right one. Each reads the value against
    a vector the file made (or the gradient), so it decides also where the tangent the pair reveals is one this world
    does not separate: an honest HVP along a tangent made inside jit is none of these."""
    value = _hvp(run, settings, name)
    candidates = _candidate_directions(run, settings, name)
    objective = "the rematerialized objective `remat`" if checkpointed else "the ordinary objective `plain`"
    if _matching(value, oracle.hessian(checkpointed), candidates, settings.hvp_tolerance, oracle, settings) is not None:
        # its own objective's HVP along a vector of the file's (where this run's Hessians agree along it, as in a
        # run that changes nothing, it is the others' too): the value shows no mistake
        return ""
    if _matching(value, oracle.hessian(not checkpointed), candidates, settings.hvp_tolerance, oracle, settings) is not None:
        if checkpointed:
            return (f"`{name}` is the Hessian-vector product of the ordinary objective, not of a rematerialized one: in "
                    "this run, differentiating an objective whose layers are rematerialized (jax.checkpoint) gives a "
                    "slightly different value, and yours did not follow it. Differentiate the rematerialized objective "
                    "`remat` itself twice (a checkpoint wrapped around a gradient function is not the same thing).")
        return (f"`{name}` is the Hessian-vector product of a rematerialized objective, not of the ordinary objective "
                "`plain`: differentiate `plain` itself.")
    if _matching(value, oracle.true_hessian, candidates, settings.hvp_tolerance, oracle, settings) is not None:
        return (f"`{name}` is the exact Hessian-vector product of the unchanged objective, but not what JAX's "
                "second-order autodiff returned in this run: the grader's variant run changes JAX's derivative rules "
                "by tiny amounts, and your value did not follow them. Differentiate the gradient of "
                f"{objective} with JAX.")
    gradient_like = close_vectors(value, oracle.autodiff_gradient, settings.hvp_approximate_fraction, 0.0,
                                  what=f"`{name}` vs the gradient (is it a gradient, not an HVP?)")[0]
    if gradient_like:
        return f"`{name}` equals the gradient, not a Hessian-vector product: differentiate the gradient once more."
    if _matching(value, oracle.hessian(checkpointed), candidates, settings.hvp_approximate_fraction, oracle,
                 settings) is not None:
        return (f"`{name}` is close to the Hessian-vector product of {objective} but not equal to what second-order "
                "autodiff returns in this run, as an approximation (a finite difference of gradients, for example) "
                "would be. Compute it by differentiating the gradient exactly.")
    return ""


def hvps_have_shape_and_are_finite(run, oracle, settings):
    _hvp(run, settings, "hvp_plain")
    _hvp(run, settings, "hvp_remat")
    return f"Both HVPs are finite vectors of length {settings.width}."


def _uniform(vector, settings):
    spread = float(np.max(vector) - np.min(vector))
    return not (spread > settings.nonuniform_fraction * float(np.max(np.abs(vector))) and spread > 0)


def hvp_direction_is_nonuniform(run, oracle, settings):
    """The tangent `hvp_plain` was computed along: the vector of the file's that explains it (as the HVP checks find
    it), else the one its value itself reveals (a tangent made inside jit is never kept as an array), judged by the
    value alone; "uniform" is said only when a uniform tangent is proved."""
    try:
        direction = _explained_by(run, oracle, settings, "hvp_plain", False)
        value = _hvp(run, settings, "hvp_plain")
    except AssertionError:   # hvp_plain itself is unusable (its own checks say why): the tangent the file names
        direction = as_vector(run["direction"], "`direction`", settings.width, column=True)
        value = None
    if direction is not None:
        assert not _uniform(direction, settings), (
            "The HVP direction is uniform (all entries equal): a uniform direction probes only one combination of the "
            "Hessian's columns. Use a direction whose entries differ.")
        return "The HVP direction is nonuniform."
    if value is not None:
        for hessian in (oracle.hessian(False), oracle.true_hessian):
            revealed = np.linalg.lstsq(hessian, value, rcond=None)[0]
            if np.max(np.abs(hessian @ revealed - value)) <= settings.hvp_approximate_fraction * np.max(np.abs(value)):
                assert not _uniform(revealed, settings), (
                    "The HVP direction is uniform (all entries equal): `hvp_plain` is the Hessian times a vector whose "
                    "entries are all equal. Use a direction whose entries differ.")
                return "The HVP direction is nonuniform (read from `hvp_plain` itself)."
    raise AssertionError("The grader could not tell which direction `hvp_plain` was computed along: no vector of "
                         "your file's explains it, nor does it read as the Hessian times one. Check `hvp_plain` first "
                         "(its own checks say what it is).")


def hvp_plain_matches_oracle(run, oracle, settings):
    if _explained_by(run, oracle, settings, "hvp_plain", False, decide=True) is not None:
        return "`hvp_plain` is second-order autodiff of `plain`."
    raise AssertionError(_hvp_diagnosis(run, oracle, settings, "hvp_plain", False))


def hvp_remat_matches(run, oracle, settings):
    remat_direction = _explained_by(run, oracle, settings, "hvp_remat", True, decide=True)
    if remat_direction is None:
        raise AssertionError(_hvp_diagnosis(run, oracle, settings, "hvp_remat", True))
    plain_direction = _explained_by(run, oracle, settings, "hvp_plain", False)
    if plain_direction is not None:
        assert np.allclose(plain_direction, remat_direction, rtol=1e-6, atol=0.0), (
            "`hvp_plain` and `hvp_remat` were computed along different tangents; compare the two objectives along "
            "the same one.")
        return ("`hvp_remat` is second-order autodiff of the rematerialized objective along the same tangent as "
                "`hvp_plain`: recomputation preserved second-order behaviour.")
    return "`hvp_remat` is second-order autodiff of the rematerialized objective."
