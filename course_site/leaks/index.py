"""The fingerprint index of the unreleased solution regions: their own token sequences, and passages holding them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.similarity import clones
from course_site.leaks.regions import Region

# Comparing solution code (measured on the course's solutions: see tests/test_leaks.py).
SHINGLE = 5  # tokens per compared sequence
THRESHOLD = 0.5  # the share of a region's own sequences that a file must hold to be reported
MIN_SHINGLES = 6  # fewer own sequences than this: the region is compared whole
MIN_EXACT = 12  # tokens that a region compared whole must have, else it is too short to tell
WINDOW = 8  # a passage: this many times a region's length, in tokens


def shingles(coded: str) -> set[int]:
    """The fingerprints of a normalized stream's sequences of :data:`SHINGLE` tokens."""
    return set(clones.fingerprints(coded, SHINGLE).tolist())


@dataclass
class Fingerprint:
    region: Region
    coded: str  # its normalized code
    own: frozenset[int]  # the fingerprints of its sequences that no public source holds
    whole: bool  # compared whole (too few own sequences)

    def local_share(self, hashes: np.ndarray) -> float:
        """The largest share of :attr:`own` found in one passage of a text, given its fingerprints
        ``hashes``: within :data:`WINDOW` times the region's length (a leak is one passage, not
        sequences scattered over a large file)."""
        positions = np.flatnonzero(np.isin(hashes, list(self.own)))
        hits = list(zip(positions.tolist(), hashes[positions].tolist()))
        width = WINDOW * len(self.coded) + SHINGLE
        best, counts, first = 0, {}, 0
        for position, shingle in hits:
            counts[shingle] = counts.get(shingle, 0) + 1
            while hits[first][0] < position - width:
                old = hits[first][1]
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
                first += 1
            best = max(best, len(counts))
        return best / len(self.own)


@dataclass
class CodeIndex:
    """The regions looked for as code (:attr:`fingerprints`), those too short or too public to tell
    (:attr:`unchecked`), and the own sequences of those not compared whole (:attr:`wanted`)."""

    fingerprints: list[Fingerprint]
    unchecked: list[Region]
    wanted: set[int]

    @classmethod
    def of(cls, regions: list[tuple[Region, str]], shared: set[int], public_coded: list[str]) -> CodeIndex:
        """The index of ``regions`` (each with its normalized code), ``shared`` (sequences that public
        sources hold) discounted; ``public_coded``, the public sources' normalized texts."""
        fingerprints, unchecked = [], []
        for region, text in regions:
            own = frozenset(shingles(text) - shared)
            if len(own) >= MIN_SHINGLES:
                fingerprints.append(Fingerprint(region, text, own, False))
            elif len(text) >= MIN_EXACT and own and not any(text in form for form in public_coded):
                fingerprints.append(Fingerprint(region, text, own, True))
            else:
                unchecked.append(region)
        return cls(fingerprints, unchecked, set().union(*(f.own for f in fingerprints if not f.whole)))

    def find(self, forms: list[str]) -> list[tuple[Region, float]]:
        """The solution regions found in a file's normalized texts ``forms``, with the share found:
        at least :data:`THRESHOLD` of a region's own shingles in one passage, or a region
        compared whole."""
        hashes = [clones.fingerprints(form, SHINGLE) for form in forms]
        found = set()
        for fingerprints in hashes:
            found |= self.wanted.intersection(fingerprints.tolist())
        hits = []
        for fingerprint in self.fingerprints:
            if fingerprint.whole:
                if any(fingerprint.coded in form for form in forms):
                    hits.append((fingerprint.region, 1.0))
                continue
            if len(fingerprint.own & found) < THRESHOLD * len(fingerprint.own):
                continue
            share = max(fingerprint.local_share(fingerprints) for fingerprints in hashes)
            if share >= THRESHOLD:
                hits.append((fingerprint.region, share))
        return hits
