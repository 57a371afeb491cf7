"""A replay INSIDE the sandbox: the end of the student's file run again, after everything else was sent, with
contract names or module attributes given the values a probe makes of them (the harness calls `run_replay` once the
file has ended or called sys.exit, through `run_replays`).

Statement nodes and their records come from the harness's run; nothing of the run is streamed again, only one
`{"type": "replay", ...}` frame with the captured names' values, or why the replay could not run."""

import ast
import contextlib
import io
import sys

from encoding import SoftTimeLimit, encode_value
from tracebacks import format_error


def run_replays(harness, outcome, ran):
    """The file's own code has ended (`outcome`): say so, then run the job's replays. The grader grants their time on
    top of the file's own wall limit once it hears this (grader/sandbox/file_end.py): what it runs after the file
    never costs the file its ending. Returns `outcome`."""
    replays = harness.job.get("replays") or []
    if replays:
        harness.channel.send({"type": "own_end", **harness.ending(outcome)})
    for replay in replays:
        run_replay(harness, replay, ran)
    return outcome


def run_replay(harness, replay, ran):
    """Run the file's end again with names or module attributes given other values, after everything else was sent:
    the statements from the first after `replace`'s last binding that reads it (or binds a captured name) through
    the last that binds a captured name, in the file's own namespace (its functions see the new value too), with
    the replacement a probe computes from the run's own value. Nothing of the run is streamed again; only the
    captured names' values come back. A branch the run's world never took (every analysis present, where the run
    had one missing) is judged from the same run, without a second run of the file. With `patch` (module attributes,
    put back afterwards) and no replaced name, the slice reaches back to the file's first statement."""
    replaced, patched = list(replay["replace"]), list(replay.get("patch") or [])
    name, capture = replay["name"], [n for n in replay["capture"] if n not in replaced]
    message = {"type": "replay", "name": name}
    ok = [(node, filename, record) for node, filename, record in ran if record.get("status") == "ok"]
    bound = [i for i, (_, _, r) in enumerate(ok) if set(replaced) & (set(r["assigns"]) | set(r["mutates"]))]
    last = [i for i, (_, _, r) in enumerate(ok) if set(capture) & set(r["assigns"])]
    if not replaced:   # attributes patched, no name replaced: the captured names' whole computation runs again
        bound = [-1]
    if not bound or not last or last[-1] <= bound[-1]:
        message["problem"] = "nothing bound %s after %s's last binding" % (", ".join(capture), ", ".join(replaced))
        harness.channel.send(message)
        return
    if replay.get("rerun") == "slice":
        chosen = statement_slice(ok, bound[-1] + 1, last[-1], capture)
    else:
        first = next(i for i in range(bound[-1] + 1, last[-1] + 1)
                     if set(replaced) & set(ok[i][2]["reads"]) or set(capture) & set(ok[i][2]["assigns"]))
        chosen = list(range(first, last[-1] + 1))
    make = harness.probe_module.get(replay["probe"])
    before = {n: harness.namespace.get(n, _UNBOUND) for n in capture}   # held: an identity test, never a reused id

    def rebound():
        """The captured names the statements bound again before they raised: what the replay made of them."""
        return {n: encode_value(harness.namespace[n], harness.max_value_bytes) for n in capture
                if harness.namespace.get(n, _UNBOUND) is not before[n]}

    def again():
        places = [_attribute_place(dotted) for dotted in patched]
        made = make(*[harness.namespace.get(n) for n in replaced],
                    *[getattr(module, attribute, None) if module is not None else None for module, attribute in places])
        made = list(made) if len(replaced) + len(patched) > 1 else [made]
        for n, value in zip(replaced, made):
            harness.namespace[n] = value
        kept = []   # (module, attribute, its own value): put back whatever the statements do
        try:
            for (module, attribute), value in zip(places, made[len(replaced):]):
                if module is not None and value is not None and hasattr(module, attribute):
                    kept.append((module, attribute, getattr(module, attribute)))
                    setattr(module, attribute, value)
            # what the statements print again (with figures no run reported) is not the file's output: never shown
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                for index in chosen:
                    node, filename, _ = ok[index]
                    exec(harness.compile_statement(node, filename), harness.namespace)
        finally:
            for module, attribute, value in reversed(kept):
                setattr(module, attribute, value)
        return {n: encode_value(harness.namespace[n], harness.max_value_bytes) for n in replaced + capture
                if n in harness.namespace}

    def call():
        try:
            return again(), None
        except SoftTimeLimit:
            raise
        except BaseException as error:   # the file's statements raised with the new value: no replay to judge
            return rebound(), format_error(error, harness.student_files)

    expired = harness.timer.expired   # the replay's own time is not the file's: its limit is not the run's
    with harness.recorder.paused():
        harness.timer.arm(replay.get("seconds") or harness.timer.grace)
        try:
            outcome, error = call()
        except SoftTimeLimit:
            outcome, error = None, {"type": "SoftTimeLimit", "message": "the replay ran out of time"}
        finally:
            harness.timer.disarm()
            harness.timer.expired = expired
    if error is not None:
        message["problem"] = "%s: %s" % (error.get("type"), str(error.get("message"))[:300])
        message["raised"] = error.get("type") != "SoftTimeLimit"   # the file's statements raised with the new value
        if outcome:   # names bound again before the raise (a statement that also asserts after computing them)
            message["rebound"] = outcome
    else:
        message["statements"] = [ok[chosen[0]][2]["index"], ok[chosen[-1]][2]["index"]]
        message["values"] = outcome
    harness.channel.send(message)


_UNBOUND = object()


def _attribute_place(dotted):
    """("numpy.tanh") -> (the module numpy as this run imported it, "tanh"), or (None, "tanh") where the run never
    imported it: a replay patches only what the file could have reached, and imports nothing of its own."""
    module_name, _, attribute = dotted.rpartition(".")
    return sys.modules.get(module_name), attribute


def statement_slice(ok, start, end, capture):
    """The statements among ok[start..end] that the captured names' bindings depend on, in order: each binding of a
    captured name, and (going back) each statement that binds or changes a name a chosen statement reads (a `def`
    reads what its body reads, so a helper defined after the replaced names' binding is made again and sees their
    new values, a jitted one with a fresh cache). Names are the module's: a function's own locals and parameters
    (`for layer in ...` inside a helper) neither read nor bind a global of that name."""
    needed, chosen = set(), []
    for index in range(end, start - 1, -1):
        node, _, record = ok[index]
        reads, binds = module_names(node)
        if set(capture) & binds or needed & (binds | set(record["mutates"])):
            chosen.append(index)
            needed |= reads
    return chosen[::-1]


def module_names(node):
    """(names of the module a top-level statement reads, names of the module it binds): a function's or a
    comprehension's own names are its own, except those it declares `global`."""
    reads, binds = set(), set()
    _visit(node, None, reads, binds)
    return reads, binds


def _visit(node, local, reads, binds):
    """Walk `node` in a scope whose own names are `local` (None: the module's)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = node.args
        for default in [*arguments.defaults, *[d for d in arguments.kw_defaults if d is not None]]:
            _visit(default, local, reads, binds)
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                _visit(decorator, local, reads, binds)
            _name(node.name, ast.Store(), local, reads, binds)
        parameters = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                      *([arguments.vararg] if arguments.vararg else []),
                                      *([arguments.kwarg] if arguments.kwarg else [])]}
        body = node.body if isinstance(node.body, list) else [node.body]
        declared = {name for statement in body for child in ast.walk(statement)
                    if isinstance(child, ast.Global) for name in child.names}
        own = (parameters | _stored(body)) - declared
        inner = own | (local or set())
        for statement in body:
            _visit(statement, inner, reads, binds)
        for name in declared:
            binds.add(name)
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        targets = {child.id for generator in node.generators for child in ast.walk(generator.target)
                   if isinstance(child, ast.Name)}
        inner = targets | (local or set())
        for generator in node.generators:
            _visit(generator.iter, local, reads, binds)
            for condition in generator.ifs:
                _visit(condition, inner, reads, binds)
        for part in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
            _visit(part, inner, reads, binds)
        return
    if isinstance(node, ast.Name):
        _name(node.id, node.ctx, local, reads, binds)
        return
    if isinstance(node, ast.alias):
        _name((node.asname or node.name).split(".")[0], ast.Store(), local, reads, binds)
        return
    if isinstance(node, ast.ClassDef):
        _name(node.name, ast.Store(), local, reads, binds)
        for child in [*node.bases, *node.keywords, *node.decorator_list]:
            _visit(child, local, reads, binds)
        for statement in node.body:   # a class body's names are its own; what it reads comes from outside
            _visit(statement, set(local or ()) | _stored(node.body), reads, binds)
        return
    for child in ast.iter_child_nodes(node):
        _visit(child, local, reads, binds)


def _name(name, context, local, reads, binds):
    if local is not None and name in local:
        return
    if isinstance(context, ast.Load):
        reads.add(name)
    else:
        binds.add(name)


def _stored(body):
    """Names a function body binds in its own scope (not inside the functions or classes it defines, whose names
    are theirs; a nested def's own name is the body's)."""
    names = set()
    pending = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        pending.extend(ast.iter_child_nodes(node))
    return names
