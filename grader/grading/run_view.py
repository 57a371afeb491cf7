"""What a check sees of one scenario's run (`RunView`), and of a replay of it (`ReplayView`, harness.run_replay)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grader.grading.missing import why_missing
from grader.grading.unfinished import unfinished_cause
from grader.intake.regions import RegionLines
from grader.runs.evidence import Evaluation, Sighting
from grader.runs.provenance import Binding, Provenance
from grader.runs.snapshot import UNFINISHED, Missing, Opaque, Snapshot, Statement, where


class RunView:
    """What a check sees of one scenario's run: values by name (the binding the exercise used), the method
    evidence recorded up to them (evaluations and sightings, grader/runs/evidence.py), probes, and how the run
    went."""

    def __init__(self, snapshot: Snapshot, bindings: dict[str, str] | None = None,
                 exercise_bindings: dict[str, str] | None = None, regions: dict[str, list[RegionLines]] | None = None,
                 unfinished: Mapping[str, object] | None = None):
        self.snapshot = snapshot
        self._cause = (unfinished or {}, regions or {}, exercise_bindings or {})   # for unfinished_cause
        self.scenario = snapshot.scenario
        self.seed = snapshot.seed
        self.provenance = Provenance(snapshot, bindings or {}, exercise_bindings, regions)
        self.details: dict[str, Any] = {}   # what the running check attached with `explain` (reset per check)
        self.settings_read: dict[str, Any] = {}   # the settings it read (set by `evaluate`)
        self.undecidable = ""   # why this run could not decide the running check (`evaluate`: it raised Undecidable)

    def explain(self, **details: Any) -> None:
        """Attach what this check compares in this run, for the instructor's `grader explain` only (never shown to a
        student): e.g. `run.explain(student=value, oracle=expected, rtol=settings.rtol, followed="the nudged rule")`."""
        self.details.update(details)

    def has(self, name: str) -> bool:
        try:
            self.value(name)
        except Missing:
            return False
        return True

    def __getitem__(self, name: str) -> Any:
        return self.value(name)

    def value(self, name: str) -> Any:
        binding = self.provenance.binding(name)
        if binding is None or name not in self.snapshot.history:
            raise Missing(name, why_missing(self.snapshot, name))
        value = binding.value
        if value is UNFINISHED:
            raise Missing(name, "is still a TODO (it is `...`): fill it in")
        if isinstance(value, Opaque) and value.kind == "too_large":
            raise Missing(name, f"is too large for the grader to read ({value.type_name})")
        return value

    def binding(self, name: str) -> Binding:
        self.value(name)
        binding = self.provenance.binding(name)
        assert binding is not None
        return binding

    def value_when(self, name: str, when: str) -> Any:
        """`name` as it was when `when`'s graded binding was made (the lesson reuses `direction`)."""
        anchor = self.binding(when)
        value = self.provenance.value_at(name, anchor.stmt)
        if value is None:
            raise Missing(name, f"was not defined when `{when}` was computed")
        if value is UNFINISHED:
            raise Missing(name, f"was still a TODO when `{when}` was computed")
        return value

    def evaluations(self, until: str | None = None) -> list[Evaluation]:
        """The run's recorded evaluations, up to and including the statement that made `until`'s graded binding."""
        last = self._last_statement(until)
        return [e for e in self.snapshot.evaluations if e.stmt <= last]

    def sightings(self, until: str | None = None) -> list[Sighting]:
        """The small arrays the run's expressions produced, up to `until`'s graded binding."""
        last = self._last_statement(until)
        return [s for s in self.snapshot.sightings if s.stmt <= last]

    def evidence_gaps(self, until: str | None = None) -> str | None:
        """Why the evidence up to `until` may be incomplete, in a sentence (None when it is complete)."""
        evidence = self.snapshot.evidence
        if not evidence.installed:
            return "the grader could not record how values were computed in this run" + (
                f" ({evidence.problem})" if evidence.problem else "")
        last = self._last_statement(until)
        crowded = [s for s in self.snapshot.statements if s.index <= last and (s.evaluations_omitted or s.sightings_omitted)]
        if crowded:
            first = crowded[0]
            return (f"the statement at {where(first.line, first.cell)} made more calls than the grader records per "
                    "statement (it keeps the first and the last ones), so some were not recorded")
        return None

    def _last_statement(self, until: str | None) -> int:
        if until is None:
            return 1 << 30
        return self.binding(until).stmt

    def where(self, stmt: int) -> str:
        """"line 12" or "In [3], line 2" (a notebook cell, as Jupyter numbers it) for a statement index."""
        statement = self.snapshot.statement(stmt)
        return where(statement.line, statement.cell) if statement else "an unknown line"

    def probe(self, name: str) -> Any:
        """The probe's result computed with the graded bindings of its inputs (else its latest result)."""
        history = self.snapshot.probe_history.get(name, [])
        if not history:
            raise Missing(name, "could not be computed: the names it needs were never all defined")
        chosen = history[-1]
        for entry in reversed(history):
            inputs = entry[1]
            graded = {p: self.provenance.binding(p) for p in inputs}
            if all(b is not None and b.stmt == inputs[p] for p, b in graded.items()):
                chosen = entry
                break
        _, _, value, error = chosen
        if error:
            at = f" ({where(error['line'], error.get('cell'))})" if error.get("line") else ""
            raise AssertionError(f"Calling your code for `{name}` raised {error['type']}: {error['message'][:300]}{at}.")
        return value

    @property
    def completed(self) -> bool:
        return self.snapshot.ending == "completed"

    @property
    def failed_statements(self):
        return self.snapshot.failed_statements

    def unfinished_cause(self, statement: Statement) -> str:
        """The unfinished exercise a failed statement's error comes from, with the evidence, else ''."""
        return unfinished_cause(statement, *self._cause)


def replay_view(view: RunView, name: str) -> RunView | None:
    """The run as its replay `name` left it (the captured names' values in place of the run's), or None where the
    replay did not run."""
    found = view.snapshot.replays.get(name)
    if not found or "values" not in found:
        return None
    return ReplayView(view, found["values"], name)


def replay_raised(view: RunView, name: str) -> str | None:
    """What the file's own statements raised when its replay `name` ran them again (a branch its code cannot take),
    or None: the replay ran, or could not start for a reason of its own (nothing to judge it by)."""
    found = view.snapshot.replays.get(name)
    return str(found.get("problem")) if found and found.get("raised") else None


class ReplayView(RunView):
    """A run's view with the names its replay captured read from the replay (`replay_name` says which)."""

    def __init__(self, view: RunView, replayed: dict[str, Any], name: str = ""):   # no provenance rebuilt
        self.__dict__.update(vars(view))
        self.details, self.settings_read = {}, {}
        self.replayed = replayed
        self.replay_name = name

    def value(self, name: str) -> Any:
        if name in self.replayed:
            return self.replayed[name]
        return super().value(name)
