"""Variant seeds drawn ahead: a batch takes one at once instead of drawing it while everything else waits.

An assignment may accept one random seed in thousands (`oracle.suitable_seed`; the course lesson about one in 18,000),
so drawing one holds a batch's start for about half a second of a core, more on an unlucky draw. A batch refills
the stock in the background while its warm-up compiles the new world's programs (a core is idle then), so the next
batch on this machine starts at once.

The stock is a file in the warm-state entry: its key holds the assignment's fingerprint, so a seed drawn under
other settings is never offered, and it sits in the instructor's own cache folder, beside the parts the warm state
already names by seed. A seed is taken out (under a lock) before it is used, so no two batches share one, and it
is tested again when taken: a seed the file holds is only ever a candidate.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from grader.common.file_lock import exclusive
from grader.common.files import atomic_write

STOCK = 2          # seeds kept ready: a batch whose world is rejected takes a second one
FILE = "variant-seeds.json"


class SeedStock:
    """The seeds kept ready in the warm-state entry `folder`; `acceptable(seed)` says whether one may be used."""

    def __init__(self, folder: Path, acceptable: Callable[[int], bool]):
        self.path = Path(folder) / FILE
        self.lock_path = Path(folder) / "locks" / (FILE + ".lock")
        self.acceptable = acceptable

    def take(self) -> int | None:
        """A seed from the stock, removed from it; None when none is there (or none is acceptable any more)."""
        try:
            with self._locked():
                seeds = self._read()
                while seeds:
                    seed = seeds.pop(0)
                    if self.acceptable(seed):
                        self._write(seeds)
                        return seed
                self._write(seeds)
        except OSError:   # a cache folder that cannot hold it: the batch draws for itself
            return None
        return None

    def peek(self) -> int | None:
        """The seed the next batch will take (left in the stock), or None when none is kept."""
        seeds = self._read()
        return seeds[0] if seeds else None

    def refill(self, draw: Callable[[], int], count: int = STOCK) -> None:
        """Draw until `count` seeds are kept (the drawing happens outside the lock: it takes a while)."""
        try:
            missing = count - len(self._read())
            drawn = [draw() for _ in range(max(0, missing))]
            if drawn:
                with self._locked():
                    seeds = self._read()
                    self._write((seeds + [seed for seed in drawn if seed not in seeds])[:count])
        except OSError:
            return

    def _read(self) -> list[int]:
        """The kept seeds; anything but a list of positive whole numbers counts as none."""
        try:
            seeds = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        if not isinstance(seeds, list):
            return []
        return [seed for seed in seeds if isinstance(seed, int) and not isinstance(seed, bool) and seed > 0]

    def _write(self, seeds: list[int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(seeds))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive(self.lock_path):
            yield
