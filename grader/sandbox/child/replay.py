"""A replay INSIDE the sandbox: the end of the student's file run again, after everything else was sent, with one
contract name given the value a probe makes of it (the harness calls `run_replay` once the file has ended).

Statement nodes and their records come from the harness's run; nothing of the run is streamed again, only one
`{"type": "replay", ...}` frame with the captured names' values, or why the replay could not run."""

import contextlib
import io

from encoding import SoftTimeLimit, encode_value
from tracebacks import format_error


def run_replay(harness, replay, ran):
    """Run the file's end again with one name given another value, after everything else was sent: the
    statements from the first after `replace`'s last binding that reads it (or binds a captured name) through
    the last that binds a captured name, in the file's own namespace (its functions see the new value too), with
    the replacement a probe computes from the run's own value. Nothing of the run is streamed again; only the
    captured names' values come back. A branch the run's world never took (every analysis present, where the run
    had one missing) is judged from the same run, without a second run of the file."""
    replaced = replay["replace"] if isinstance(replay["replace"], list) else [replay["replace"]]
    name, capture = replay["name"], [n for n in replay["capture"] if n not in replaced]
    message = {"type": "replay", "name": name}
    ok = [(node, filename, record) for node, filename, record in ran if record.get("status") == "ok"]
    bound = [i for i, (_, _, r) in enumerate(ok) if set(replaced) & (set(r["assigns"]) | set(r["mutates"]))]
    last = [i for i, (_, _, r) in enumerate(ok) if set(capture) & set(r["assigns"])]
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

    def again():
        made = make(*[harness.namespace.get(n) for n in replaced])
        for n, value in zip(replaced, made if len(replaced) > 1 else [made]):
            harness.namespace[n] = value
        # what the statements print again (with figures no run reported) is not the file's output: never shown
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for index in chosen:
                node, filename, _ = ok[index]
                exec(harness.compile_statement(node, filename), harness.namespace)
        return {n: encode_value(harness.namespace[n], harness.max_value_bytes) for n in replaced + capture
                if n in harness.namespace}

    def call():
        try:
            return again(), None
        except SoftTimeLimit:
            raise
        except BaseException as error:   # the file's statements raised with the new value: no replay to judge
            return None, format_error(error, harness.student_files)

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
    else:
        message["statements"] = [ok[chosen[0]][2]["index"], ok[chosen[-1]][2]["index"]]
        message["values"] = outcome
    harness.channel.send(message)


def statement_slice(ok, start, end, capture):
    """The statements among ok[start..end] that the captured names' bindings depend on, in order: each binding of a
    captured name, and (going back) each statement that binds or changes a name a chosen statement reads (a `def`
    reads what its body reads, so a helper defined after the replaced names' binding is made again and sees their
    new values, a jitted one with a fresh cache)."""
    needed, chosen = set(), []
    for index in range(end, start - 1, -1):
        record = ok[index][2]
        if set(capture) & set(record["assigns"]) or needed & (set(record["assigns"]) | set(record["mutates"])):
            chosen.append(index)
            needed |= set(record["reads"])
    return chosen[::-1]
