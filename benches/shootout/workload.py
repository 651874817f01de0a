"""The shootout's pure parts: key generators, workload mixes and the statistics.

Nothing here talks to a server, so tests/python/test_shootout.py checks it directly.

* ``zipf_ranks``: YCSB's Zipfian generator (Gray et al., "Quickly generating
  billion-record synthetic databases", the algorithm of YCSB's ZipfianGenerator),
  vectorised with numpy; rank 0 is the hottest item.
* ``KeyPool``: the keys of one workload and seed, drawn once (numpy) and handed out as
  Python ints; Zipf ranks are mapped to keys through a seeded permutation of the key
  space (YCSB's scrambled Zipfian does the same with a hash), so the hot keys are spread
  over every partition instead of sitting at the low keys.
* ``WORKLOADS``: the seed's primary-key reads (uniform keys, read only) and YCSB A, B
  and C (Zipf keys; 50/50, 95/5 and 100/0 read/update).
* ``percentile`` (nearest-rank) and ``spread`` ((max - min) / median of repetitions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: YCSB's default Zipfian constant.
ZIPF_THETA = 0.99


@dataclass(frozen=True)
class Workload:
    """A mix: the share of updates and whether keys follow Zipf (else uniform)."""

    name: str
    update_share: float
    zipf: bool
    about: str


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("pk", 0.0, False, "the seed's single-row primary-key reads, uniform keys"),
        Workload("ycsb-a", 0.5, True, "YCSB A: 50% reads, 50% updates, Zipf keys"),
        Workload("ycsb-b", 0.05, True, "YCSB B: 95% reads, 5% updates, Zipf keys"),
        Workload("ycsb-c", 0.0, True, "YCSB C: reads only, Zipf keys"),
    ]
}


def zeta(n: int, theta: float) -> float:
    """The generalised harmonic number sum_{i=1..n} 1 / i^theta."""
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(np.sum(i**-theta))


def zipf_ranks(n: int, count: int, rng: np.random.Generator, theta: float = ZIPF_THETA) -> np.ndarray:
    """`count` Zipf-distributed ranks in [0, n) (rank 0 the most frequent), YCSB's method."""
    if n < 2:
        return np.zeros(count, dtype=np.int64)
    zetan = zeta(n, theta)
    zeta2 = 1.0 + 0.5**theta
    alpha = 1.0 / (1.0 - theta)
    eta = (1.0 - (2.0 / n) ** (1.0 - theta)) / (1.0 - zeta2 / zetan)
    u = rng.random(count)
    uz = u * zetan
    ranks = (n * np.power(eta * u - eta + 1.0, alpha)).astype(np.int64)
    ranks = np.where(uz < zeta2, 1, ranks)
    ranks = np.where(uz < 1.0, 0, ranks)
    return np.clip(ranks, 0, n - 1)


class KeyPool:
    """The keys and operation kinds of one workload, one record count and one seed.

    ``size`` draws are made once; ``take(i, m)`` hands out m of them from position i
    (wrapping), as Python lists: keys and, per key, True for an update.
    """

    def __init__(self, workload: Workload, records: int, seed: int, size: int = 1 << 21) -> None:
        rng = np.random.default_rng(seed)
        if workload.zipf:
            perm = rng.permutation(records)
            keys = perm[zipf_ranks(records, size, rng)]
        else:
            keys = rng.integers(0, records, size)
        self.keys: list[int] = keys.tolist()
        self.updates: list[bool] = (rng.random(size) < workload.update_share).tolist()
        self.size = size

    def take(self, start: int, m: int) -> tuple[list[int], list[bool]]:
        """m keys and update flags from position `start` (mod size)."""
        s = start % self.size
        if s + m <= self.size:
            return self.keys[s : s + m], self.updates[s : s + m]
        tail = s + m - self.size
        return self.keys[s:] + self.keys[:tail], self.updates[s:] + self.updates[:tail]


def percentile(samples: list[float] | np.ndarray, p: float) -> float:
    """The nearest-rank p-th percentile (0 < p <= 100) of `samples`; NaN when empty."""
    a = np.sort(np.asarray(samples, dtype=np.float64))
    if a.size == 0:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * a.size))
    return float(a[rank - 1])


def spread(values: list[float]) -> float:
    """(max - min) / median of repetitions' figures: 0 for identical runs."""
    if not values:
        return math.nan
    med = float(np.median(values))
    return (max(values) - min(values)) / med if med else math.nan


def value_bytes(size: int, stamp: int) -> bytes:
    """A value of `size` bytes; `stamp` tells loads (0) from updates (1, 2, ...)."""
    return bytes([97 + stamp % 26]) * size
