"""Code similarity across a batch: each document's own fingerprints, an index of them, the pairs that share them.

A document's own code is what is left after boilerplate: statements equal (normalised) to one of the
starter's or the reference solution's are dropped, and so is every fingerprint found anywhere in them. Idioms
come only from that given code (the boilerplate the assignment names), never from how many students share a
fingerprint: six students handing in the same own code are six copies, not an idiom of the class, and are
reported as a cluster whatever its size. Pairs are found through an index from fingerprint to documents, so the
work grows with the number of pairs that share own code rather than with every pair of the class.

Scores: `a_in_b` is the share of A's own tokens covered by fingerprints B also has (and the reverse); the
code score is the larger of the two, scaled down when fewer than `substantial_tokens` tokens are shared on
either side (two students who both wrote the same one natural line share little).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from grader.config.similarity import SimilaritySettings
from grader.similarity.documents import Chunk, Document
from grader.similarity.fingerprints import Fingerprints, all_hashes, fingerprints, kgram_hashes, token_id
from grader.similarity.tokens import MAX_TOKENS, Unit, units_of

MAX_REGIONS = 8
BANDS, ROWS = 8, 4           # MinHash bands of near-identical own code (see `_bands`)
MIX = np.uint64(0x9E3779B97F4A7C15)
SIGNATURE_SEEDS = np.array([(0xD1B54A32D192ED03 * (n + 1)) % 2**64 for n in range(BANDS * ROWS)], dtype=np.uint64)
MAX_REGION_LINES = 40
RING_FACTOR = 2              # a fingerprint up to twice as common as `limit` still pairs its holders (a ring)


@dataclass
class CodeDoc:
    units: list[Unit]
    prints: Fingerprints
    own: dict[int, list[int]] = field(default_factory=dict)    # hash -> positions in `prints` (kept, own)
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))   # first token of each unit
    mine: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))    # token not in a run of given code
    own_tokens: int = 0


@dataclass
class Region:
    """Matching code, side by side: where in A and B (a cell number or None, first and last line) and the text."""
    a_cell: int | None
    a_lines: tuple[int, int]
    a_text: str
    b_cell: int | None
    b_lines: tuple[int, int]
    b_text: str
    tokens: int


@dataclass
class CodeMatch:
    a_in_b: float
    b_in_a: float
    shared_tokens: int         # the smaller side's count of own tokens the other also has
    score: float
    regions: list[Region] = field(default_factory=list)


def all_units(chunks: list[Chunk]) -> list[Unit]:
    """The statement units of a document's chunks in order, up to MAX_TOKENS tokens for the whole document (a cap per
    document as well as per cell: a notebook of many cells costs no more than one long file); no chunk past the cap
    is tokenised at all."""
    units: list[Unit] = []
    tokens = 0
    for index, chunk in enumerate(chunks):
        if tokens >= MAX_TOKENS:
            break
        for unit in units_of(chunk.source, index):
            units.append(unit)
            tokens += len(unit.tokens)
    return units


class Boilerplate:
    """The code every student was given: its statements and its k-grams."""

    def __init__(self, chunks: list[Chunk], k: int):
        units = all_units(chunks)
        self.k = k
        self.statements = {unit.tokens for unit in units}
        self.hashes = all_hashes(units, k)
        self.hash_array = np.fromiter(self.hashes, dtype=np.uint64, count=len(self.hashes))

    def given(self, units: list[Unit]) -> np.ndarray:
        """For each token of these units: is it inside a run of k tokens that the given code also has?"""
        marks = []
        for unit in units:
            inside = np.zeros(len(unit.tokens) + 1, dtype=np.int64)
            if len(unit.tokens) >= self.k:
                ids = np.fromiter((token_id(t) for t in unit.tokens), dtype=np.uint64, count=len(unit.tokens))
                hits = np.flatnonzero(np.isin(kgram_hashes(ids, self.k), self.hash_array))
                np.add.at(inside, hits, 1)
                np.add.at(inside, hits + self.k, -1)
            marks.append(np.cumsum(inside)[:-1] > 0)
        return np.concatenate(marks) if marks else np.zeros(0, dtype=bool)


def prepare(documents: list[Document], boilerplate: Boilerplate, settings: SimilaritySettings) -> list[CodeDoc]:
    """Each document's own code: repeated statements once, boilerplate statements and fingerprints left out,
    and a token counted as the student's own only when no run of k tokens around it is in the given code (a
    one-word change to a given statement makes a few new k-grams, but few tokens of its own)."""
    prepared = []
    for document in documents:
        units, seen = [], set(boilerplate.statements)
        for unit in document.units if document.units is not None else all_units(document.chunks):
            if unit.tokens not in seen:
                seen.add(unit.tokens)
                units.append(unit)
        prints = fingerprints(units, settings.kgram, settings.window)
        offsets = np.cumsum([0] + [len(u.tokens) for u in units]).astype(np.int64)
        doc = CodeDoc(units, prints, {}, offsets, ~boilerplate.given(units))
        own: dict[int, list[int]] = defaultdict(list)
        kept = prints.kept
        for position, mine in zip(kept.tolist(), _covers_own(doc, kept).tolist()):
            value = int(prints.hashes[position])
            if mine and value not in boilerplate.hashes:
                own[value].append(position)
        doc.own = dict(own)
        doc.own_tokens = _covered(doc, [p for positions in doc.own.values() for p in positions])
        prepared.append(doc)
    return prepared


def shared_pairs(prepared: list[CodeDoc], current: int, limit: int,
                 substantial: int) -> dict[tuple[int, int], list[int]]:
    """(i, j) -> the fingerprints both hold, for every pair found; documents from `current` on are from earlier
    terms and are paired only with this batch's.

    Pairs are found two ways, neither of which enumerates every pair of a fingerprint the whole class holds: through
    fingerprints at most `RING_FACTOR * limit` documents hold (each gives at most (2 limit)² pairs: a ring of eight
    in a class of sixty is paired even where its copies differ), and through near-identical own
    code (documents whose own fingerprints agree in one MinHash band: a ring of any size, however common what it
    shares; documents with fewer than half `substantial` own tokens, which cannot score much, are left out of it).
    A pair found either way then shares every fingerprint both hold."""
    index: dict[int, list[int]] = defaultdict(list)
    for number, doc in enumerate(prepared):
        for value in doc.own:
            index[value].append(number)
    candidates: set[tuple[int, int]] = set()
    for holders in index.values():
        if len(holders) <= RING_FACTOR * limit:
            _add_pairs(candidates, holders, current)
    buckets: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    for number, doc in enumerate(prepared):
        if doc.own_tokens * 2 >= substantial:
            for key in _bands(doc.own):
                buckets[key].append(number)
    for holders in buckets.values():
        if len(holders) > 1:
            _add_pairs(candidates, holders, current)
    pairs: dict[tuple[int, int], list[int]] = {}
    for a, b in sorted(candidates):
        mine, theirs = prepared[a].own, prepared[b].own
        shared = [value for value in mine if value in theirs]
        if shared:
            pairs[(a, b)] = shared
    return pairs


def _add_pairs(candidates: set[tuple[int, int]], holders: list[int], current: int) -> None:
    for a_pos, a in enumerate(holders):
        if a >= current:
            break        # holders are in document order: earlier terms come last
        for b in holders[a_pos + 1:]:
            candidates.add((a, b))


def _bands(own: dict[int, list[int]]) -> list[tuple[int, bytes]]:
    """The document's MinHash signature of its own fingerprints, cut in bands: two documents sharing a share J of
    their fingerprints meet in at least one band with probability 1 - (1 - J^ROWS)^BANDS (J = 0.9: 1.0; J = 0.3:
    0.12; J = 0.1: 0.002)."""
    if not own:
        return []
    values = np.fromiter(own.keys(), dtype=np.uint64, count=len(own))
    with np.errstate(over="ignore"):
        mixed = (values[None, :] ^ SIGNATURE_SEEDS[:, None]) * MIX
        mixed ^= mixed >> np.uint64(31)
        mixed *= MIX
    signature = mixed.min(axis=1).reshape(BANDS, ROWS)
    return [(band, signature[band].tobytes()) for band in range(BANDS)]


def match(a: CodeDoc, b: CodeDoc, shared: list[int], settings: SimilaritySettings) -> CodeMatch:
    a_tokens = _covered(a, [p for value in shared for p in a.own[value]])
    b_tokens = _covered(b, [p for value in shared for p in b.own[value]])
    a_in_b = a_tokens / a.own_tokens if a.own_tokens else 0.0
    b_in_a = b_tokens / b.own_tokens if b.own_tokens else 0.0
    amount = min(a_tokens, b_tokens)
    score = (a_in_b + b_in_a) / 2 * min(1.0, amount / settings.substantial_tokens)
    return CodeMatch(round(a_in_b, 4), round(b_in_a, 4), amount, round(score, 4))


def regions(a: CodeDoc, b: CodeDoc, a_chunks: list[Chunk], b_chunks: list[Chunk], shared: list[int]) -> list[Region]:
    """The matching statements of a pair, biggest first: A's lines beside B's."""
    spans: dict[tuple[int, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    for value in shared:
        for pa in a.own[value]:
            for pb in b.own[value][:4]:
                spans[(int(a.prints.unit[pa]), int(b.prints.unit[pb]))].append(
                    (int(a.prints.start[pa]), int(a.prints.length[pa]), int(b.prints.start[pb]), int(b.prints.length[pb])))
    found = []
    for (ua, ub), parts in spans.items():
        a_first, a_last = min(s for s, _, _, _ in parts), max(s + n for s, n, _, _ in parts) - 1
        b_first, b_last = min(s for _, _, s, _ in parts), max(s + n for _, _, s, n in parts) - 1
        unit_a, unit_b = a.units[ua], b.units[ub]
        a_lines = _span(unit_a.lines[a_first:a_last + 1])
        b_lines = _span(unit_b.lines[b_first:b_last + 1])
        found.append(Region(a_chunks[unit_a.chunk].cell, a_lines, _text(a_chunks[unit_a.chunk].source, a_lines),
                            b_chunks[unit_b.chunk].cell, b_lines, _text(b_chunks[unit_b.chunk].source, b_lines),
                            a_last - a_first + 1))
    found.sort(key=lambda r: (-r.tokens, r.a_cell or 0, r.a_lines))
    return _distinct(found)[:MAX_REGIONS]


def _span(lines: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """The lines of some tokens (normalised code may hold statements in another order than the file)."""
    return min(first for first, _ in lines), max(last for _, last in lines)


def _distinct(found: list[Region]) -> list[Region]:
    """One region per place in A (a statement of A repeated in B is shown beside its best match only)."""
    seen, kept = set(), []
    for region in found:
        key = (region.a_cell, region.a_lines)
        if key not in seen:
            seen.add(key)
            kept.append(region)
    return kept


def _text(source: str, lines: tuple[int, int]) -> str:
    chosen = source.splitlines()[lines[0] - 1:lines[1]]
    if len(chosen) > MAX_REGION_LINES:
        chosen = chosen[:MAX_REGION_LINES] + [f"... ({len(chosen) - MAX_REGION_LINES} more lines)"]
    return "\n".join(line[:300] for line in chosen)


def _covers_own(doc: CodeDoc, positions: np.ndarray) -> np.ndarray:
    """For each k-gram at these positions: does it cover a token of the student's own? One prefix sum for all of
    them (linear in the document, whatever the number of fingerprints)."""
    positions = np.asarray(positions, dtype=np.int64)
    if not positions.size:
        return np.zeros(0, dtype=bool)
    firsts = doc.offsets[doc.prints.unit[positions]] + doc.prints.start[positions]
    lasts = firsts + doc.prints.length[positions]
    mine = np.concatenate([[0], np.cumsum(doc.mine, dtype=np.int64)])
    return (mine[lasts] - mine[firsts]) > 0


def _covered(doc: CodeDoc, positions: list[int]) -> int:
    """How many of the document's tokens the k-grams at these positions cover."""
    if not positions:
        return 0
    chosen = np.asarray(positions, dtype=np.int64)
    firsts = doc.offsets[doc.prints.unit[chosen]] + doc.prints.start[chosen]
    lasts = firsts + doc.prints.length[chosen]
    marks = np.zeros(int(doc.offsets[-1]) + 1, dtype=np.int64)
    np.add.at(marks, firsts, 1)
    np.add.at(marks, lasts, -1)
    return int(np.count_nonzero((np.cumsum(marks)[:-1] > 0) & doc.mine))
