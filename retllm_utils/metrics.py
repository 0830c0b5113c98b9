"""Scores both papers share: set precision/recall (RET-LLM writes, MemLLM Table 4) and whole-word mentions."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PRF", "ratio", "whole_word"]


def ratio(num: int, den: int, *, other_side_empty: bool) -> float:
    """num / den; with nothing to divide by, 1.0 when the other side is empty too (nothing asked, nothing given:
    perfect), else 0.0. One rule for precision and recall, so per-example and micro averages never meet a NaN."""
    if den:
        return num / den
    return 1.0 if other_side_empty else 0.0


@dataclass
class PRF:
    """Counts behind precision and recall; add them up over examples or documents for micro averages."""

    correct_pred: int = 0  # predictions that match some gold item
    n_pred: int = 0
    found_gold: int = 0  # gold items that some prediction matches
    n_gold: int = 0

    @classmethod
    def of_sets(cls, pred, gold) -> "PRF":
        """Exact matching of two collections of hashable items (duplicates count once)."""
        p, g = set(pred), set(gold)
        return cls(len(p & g), len(p), len(p & g), len(g))

    @property
    def precision(self) -> float:
        return ratio(self.correct_pred, self.n_pred, other_side_empty=self.n_gold == 0)

    @property
    def recall(self) -> float:
        return ratio(self.found_gold, self.n_gold, other_side_empty=self.n_pred == 0)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    def add(self, other: "PRF") -> "PRF":
        return PRF(
            self.correct_pred + other.correct_pred,
            self.n_pred + other.n_pred,
            self.found_gold + other.found_gold,
            self.n_gold + other.n_gold,
        )

    __add__ = add


def whole_word(needle: str, hay: str) -> bool:
    """`needle` occurs in `hay` not as part of a longer word ("Ann" is not in "Anna"); an empty needle never does."""
    return bool(needle) and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay) is not None
