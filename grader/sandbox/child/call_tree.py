"""The call tree the recorder keeps per thread, INSIDE the sandbox: frames of observed calls, and one root's findings.

Features (autodiff kinds with depths, student functions, checkpoint depths) are kept relative to a depth so a
jitted function's cache hit or a pullback can replay what its earlier trace showed (see recorder.py).
"""


class Frame:
    __slots__ = ("kind", "levels", "checkpoint", "points")

    def __init__(self, kind, levels, checkpoint, points=()):
        self.kind = kind
        self.levels = levels
        self.checkpoint = checkpoint
        self.points = points        # ids of the array arguments of an evaluation (nested ones at them are skipped)


class Root:
    """Everything observed beneath one root call."""

    def __init__(self, stmt, kind, name, concrete):
        self.stmt = stmt
        self.kind = kind
        self.name = name
        self.concrete = concrete
        self.autodiff = set()
        self.student = set()
        self.checkpoint = set()
        self.tangents = []
        self.evaluations = []
        self.args = []
        self.output = []
        self.inherited = False
        self.truncated = False

    def features(self):
        return (frozenset(self.autodiff), frozenset(self.student), frozenset(self.checkpoint))

    def add_features(self, features, shift):
        autodiff, student, checkpoint = features
        self.autodiff.update((kind, depth + shift) for kind, depth in autodiff)
        self.student.update(item[:3] + (item[3] + shift,) + item[4:] for item in student)
        self.checkpoint.update(depth + shift for depth in checkpoint)


def relative(features, since, shift):
    """The features gained since `since`, with depths made relative to `shift` (to replay them later)."""
    autodiff, student, checkpoint = (a - b for a, b in zip(features, since))
    return (frozenset((kind, depth - shift) for kind, depth in autodiff),
            frozenset(item[:3] + (item[3] - shift,) + item[4:] for item in student),
            frozenset(depth - shift for depth in checkpoint))
