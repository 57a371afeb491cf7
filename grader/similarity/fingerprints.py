"""Winnowed k-gram fingerprints of a document's units (Schleimer, Wilkerson and Aiken, "Winnowing: local
algorithms for document fingerprinting", SIGMOD 2003: the method of MOSS).

Every run of `k` normalised tokens inside one unit is hashed (a unit shorter than `k`, but of at least
`MIN_SHORT_UNIT` tokens, is hashed whole); k-grams never span two units, so the order of statements, helpers and
cells does not change a document's fingerprints. Robust winnowing keeps, in every window of `w` consecutive
hashes, the rightmost smallest: two documents sharing a run of `k + w - 1` tokens share a kept fingerprint, and
about 2/(w+1) of the hashes are kept. Hashes are stable across processes (token ids from BLAKE2b, a
polynomial over 64-bit words), so a report is the same however often it is built.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from grader.similarity.tokens import Unit

MIN_SHORT_UNIT = 6            # a whole statement of 6..k-1 tokens is one fingerprint (`x = f(a, b)` is 8)
BASE = np.uint64(0x100000001B3)
MIX = np.uint64(0x9E3779B97F4A7C15)
_token_ids: dict[str, int] = {}


def token_id(token: str) -> int:
    found = _token_ids.get(token)
    if found is None:
        found = int.from_bytes(hashlib.blake2b(token.encode("utf-8", "replace"), digest_size=8).digest(), "little")
        if len(_token_ids) < 1_000_000:
            _token_ids[token] = found
    return found


@dataclass
class Fingerprints:
    """A document's k-grams: `hashes[i]` covers tokens `start[i]:start[i] + length[i]` of unit `unit[i]`;
    `kept` indexes the winnowed ones."""
    hashes: np.ndarray
    unit: np.ndarray
    start: np.ndarray
    length: np.ndarray
    kept: np.ndarray


def kgram_hashes(ids: np.ndarray, k: int) -> np.ndarray:
    """Hash of each run of k ids (wrapping 64-bit polynomial, then mixed so small values are not clustered)."""
    count = len(ids) - k + 1
    hashes = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(k):
            hashes = hashes * BASE + ids[offset:offset + count]
        hashes = (hashes ^ (hashes >> np.uint64(29))) * MIX
        hashes ^= np.uint64(k) * MIX     # a short unit hashed whole differs from a k-gram of the same tokens
    return hashes


def winnow(hashes: np.ndarray, window: int) -> np.ndarray:
    """Positions robust winnowing keeps: in every window, the rightmost minimum (each position once, in order)."""
    if len(hashes) == 0:
        return np.zeros(0, dtype=np.int64)
    if window <= 1 or len(hashes) <= window:
        if window <= 1:
            return np.arange(len(hashes), dtype=np.int64)
        reversed_ = hashes[::-1]
        return np.array([len(hashes) - 1 - int(np.argmin(reversed_))], dtype=np.int64)
    windows = sliding_window_view(hashes, window)
    rightmost = window - 1 - np.argmin(windows[:, ::-1], axis=1)
    return np.unique(np.arange(len(windows)) + rightmost).astype(np.int64)


def fingerprints(units: list[Unit], k: int, window: int) -> Fingerprints:
    hashes, unit_index, starts, lengths = [], [], [], []
    for index, unit in enumerate(units):
        n = len(unit.tokens)
        if n < MIN_SHORT_UNIT:
            continue
        ids = np.fromiter((token_id(t) for t in unit.tokens), dtype=np.uint64, count=n)
        size = min(k, n)
        found = kgram_hashes(ids, size)
        hashes.append(found)
        unit_index.append(np.full(len(found), index, dtype=np.int64))
        starts.append(np.arange(len(found), dtype=np.int64))
        lengths.append(np.full(len(found), size, dtype=np.int64))
    if not hashes:
        empty = np.zeros(0, dtype=np.int64)
        return Fingerprints(np.zeros(0, dtype=np.uint64), empty, empty, empty, empty)
    all_hashes = np.concatenate(hashes)
    return Fingerprints(all_hashes, np.concatenate(unit_index), np.concatenate(starts), np.concatenate(lengths),
                        winnow(all_hashes, window))


def all_hashes(units: list[Unit], k: int) -> set[int]:
    """Every k-gram hash of some units (boilerplate: a student's fingerprint found anywhere in it is not theirs)."""
    found = fingerprints(units, k, 1)
    return set(found.hashes.tolist())
