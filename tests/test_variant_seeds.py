"""Drawing a batch's variant seed: the same seeds as testing one at a time, in a fraction of the time.

performance-05 accepts about one seed in 18,000 (oracle.suitable_seed), and every batch draws one before its first
run. The oracle's `suitable_seeds` answers for a whole list at once and the framework draws in chunks; neither may
change which seed a batch gets.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import time
from types import SimpleNamespace

import pytest

from grader.cli.batch import grade_folder
from grader.common.user_cache import CACHE_DIR_ENV
from grader.config.assignment import load
from grader.grading.seed_stock import STOCK, SeedStock
from grader.grading.warm_state import WarmState
from grader.runs import jobs

ASSIGNMENT = load("performance-05")


@pytest.fixture(autouse=True)
def drawn_worlds(monkeypatch):
    """These tests are about drawing worlds: the session's one world (conftest.py, $GRADER_VARIANT_SEED) is not theirs."""
    monkeypatch.delenv(jobs.VARIANT_SEED_ENV, raising=False)


def test_the_oracle_answers_for_many_seeds_as_for_each_one():
    """Drawn seeds (nearly all rejected by the first test, some narrowly) and seeds known to be suitable mixed in:
    the list's answers are suitable_seed's, one by one."""
    oracle, settings = ASSIGNMENT.oracle, ASSIGNMENT.settings
    suitable = [jobs.variant_seed_for(ASSIGNMENT, requested) for requested in (1, 2, 5)]
    seeds = [secrets.randbelow(2**31 - 1) + 1 for _ in range(3000)] + suitable + [ASSIGNMENT.lesson_seed]
    random.shuffle(seeds)
    answers = oracle.suitable_seeds(seeds, settings)
    assert answers == [oracle.suitable_seed(seed, settings) for seed in seeds]
    assert sum(answers) >= len(suitable)
    assert oracle.suitable_seeds([], settings) == []


def stub(lesson_seed: int, many: bool) -> SimpleNamespace:
    """An assignment whose oracle accepts seeds divisible by 97 (and counts how it was asked)."""
    asked = {"one": 0, "many": 0}

    def suitable_seed(seed, settings):
        asked["one"] += 1
        return seed % 97 == 0

    def suitable_seeds(seeds, settings):
        asked["many"] += 1
        return [seed % 97 == 0 for seed in seeds]

    oracle = SimpleNamespace(suitable_seed=suitable_seed, **({"suitable_seeds": suitable_seeds} if many else {}))
    return SimpleNamespace(oracle=oracle, settings=None, lesson_seed=lesson_seed, asked=asked)


@pytest.mark.parametrize("many", [True, False])
def test_seeds_drawn_in_chunks_are_the_ones_drawn_one_at_a_time(many):
    """The first acceptable seed in the order drawn, never the lesson's own nor a rejected one, whether the oracle
    answers for lists or only seed by seed."""
    for start in range(20):
        order = random.Random(start)
        draws = [order.randrange(1, 10**6) for _ in range(3 * jobs.SEED_CHUNK)]
        rejected = frozenset(d for d in draws[:2000] if d % 97 == 0 and d % 2 == 0)
        lesson = next((d for d in draws if d % 97 == 0 and d not in rejected), 1)
        expected = next(d for d in draws if d % 97 == 0 and d != lesson and d not in rejected)
        assignment = stub(lesson, many)
        sequence = iter(draws)
        assert jobs._first_accepted(assignment, sequence.__next__, rejected) == expected
        assert assignment.asked["many" if many else "one"] > 0
        if many:
            assert assignment.asked["one"] == 0


def test_an_oracle_that_accepts_nothing_ends_the_draw():
    assignment = stub(1, True)
    assignment.oracle.suitable_seeds = lambda seeds, settings: [False] * len(seeds)
    assert jobs._first_accepted(assignment, lambda: 97, frozenset()) is None


# ---- the stock: seeds drawn ahead by one batch, taken by the next ---------------------------------------------

def test_the_stock_gives_each_seed_once_and_only_acceptable_ones(tmp_path):
    stock = SeedStock(tmp_path, lambda seed: seed % 2 == 0)
    assert stock.take() is None                      # nothing drawn yet: the batch draws for itself
    numbers = iter([4, 6, 8, 10])
    stock.refill(lambda: next(numbers))
    assert json.loads(stock.path.read_text()) == [4, 6][:STOCK]
    stock.path.write_text(json.dumps([3, 4, 6]))     # a seed no longer acceptable is passed over and dropped
    assert stock.take() == 4 and json.loads(stock.path.read_text()) == [6]
    assert stock.take() == 6 and stock.take() is None
    for broken in ("", "{", '{"a": 1}', '["4", true, -2, 4.5]'):
        stock.path.write_text(broken)
        assert stock.take() is None


def test_two_batches_taking_at_once_never_share_a_seed(tmp_path):
    stock = SeedStock(tmp_path, lambda seed: True)
    stock.path.write_text(json.dumps(list(range(1, 41))))
    taken: list[int | None] = []
    threads = [threading.Thread(target=lambda: taken.extend(stock.take() for _ in range(5))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == list(range(1, 41))       # type: ignore[type-var]


def test_a_batch_takes_the_seed_the_one_before_drew_ahead(tmp_path, monkeypatch):
    """The first batch on a machine draws its seed and leaves STOCK more behind; the next batch starts with one of
    them (not a new draw), and it is gone from the stock."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "empty.py").write_text("")            # graded without a run: only the seed is drawn
    first = grade_folder(ASSIGNMENT, folder, tmp_path / "out", progress=lambda line: None)
    stock = SeedStock(WarmState(ASSIGNMENT).folder, lambda seed: True)
    deadline = time.monotonic() + 60
    while len(stock._read()) < STOCK and time.monotonic() < deadline:   # drawn in the background
        time.sleep(0.1)
    ahead = stock._read()
    assert len(ahead) == STOCK and first.variant_seed not in ahead
    assert all(jobs.is_suitable(ASSIGNMENT, seed) for seed in ahead)
    second = grade_folder(ASSIGNMENT, folder, tmp_path / "out", regrade=True, progress=lambda line: None)
    assert second.variant_seed == ahead[0]
    assert ahead[0] not in stock._read()
