"""Similarity thresholds of the phrase encoders: the papers' defaults, and those measured for MiniLM and SmolLM2's
h_AVG on `THRESHOLD_PAIRS` and on `fuzzy.stress`' near misses (how, and what was found: results/thresholds.md).

An embedder carries its own (`models.Embedder.thresholds`): MemLLM's tau_entity / tau_relation / tau_triple, and
RET-LLM's fuzzy read, `fuzzy` (a cosine) and `fuzzy_char` (a character similarity), each a number or one per role,
and `fuzzy_alias` (the cosine an acronym-shaped alias needs, one per `memory.ALIAS_FORMS`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["PAPER_THRESHOLDS", "MINILM_THRESHOLDS", "LLM_MEAN_THRESHOLDS", "THRESHOLD_PAIRS", "pair_cosines"]

# MemLLM (Modarressi et al. 2024) set these for Contriever; the default for any encoder not measured here.
# fuzzy_char 0: no character check, the paper's rule (`fuzzy.matching.measure` calibrates one for an encoder).
# fuzzy_alias {}: no alias stands in unless its cosine passes `fuzzy` (`fuzzy.aliases.measure` calibrates one).
PAPER_THRESHOLDS = {
    "tau_entity": 0.7,
    "tau_relation": 0.7,
    "tau_triple": 0.85,
    "fuzzy": 0.7,
    "fuzzy_char": 0.0,
    "fuzzy_alias": {},
}

# Phrase pairs a memory lookup should / should not merge; `pair_cosines` re-measures any encoder on them.
# fmt: off
THRESHOLD_PAIRS: list[tuple[str, str, str, bool]] = [(a, b, "entity", True) for a, b in [
    ("USA", "United States"), ("United States of America", "USA"), ("UK", "United Kingdom"),
    ("NYC", "New York City"), ("Federal Republic of Germany", "Germany"),
    ("MIT", "Massachusetts Institute of Technology"), ("IBM", "International Business Machines"),
    ("Barack Obama", "Obama"), ("Angela Merkel", "Merkel"), ("Dr. Marie Curie", "Marie Curie"),
    ("the Big Apple", "New York City"), ("Pfizer Inc.", "Pfizer"), ("Alphabet Inc.", "Google's parent company"),
    ("physician", "doctor"), ("automobile", "car")]] + [(a, b, "relation", True) for a, b in [
    ("employed by", "works for"), ("works at", "employed by"), ("founder of", "founded"),
    ("founded by", "established by"), ("CEO of", "chief executive officer of"), ("born in", "place of birth"),
    ("studied at", "educated at"), ("married to", "spouse of"), ("capital of", "capital city of"),
    ("lives in", "resides in"), ("located in", "situated in"), ("member of", "belongs to"),
    ("president of", "head of state of"), ("wrote", "author of"), ("child of", "son of")]] + [
    (a, b, "entity", False) for a, b in [
    ("United States", "United Kingdom"), ("USA", "UK"), ("Germany", "Austria"), ("Angela Merkel", "Olaf Scholz"),
    ("Angela Merkel", "Marie Curie"), ("Barack Obama", "Michelle Obama"), ("Pfizer", "Moderna"),
    ("MIT", "Harvard University"), ("Paris", "London"), ("New York City", "New York State"),
    ("John Smith", "John Brown"), ("Apple", "Microsoft"), ("physician", "lawyer")]] + [
    (a, b, "relation", False) for a, b in [
    ("employed by", "founded"), ("born in", "died in"), ("studied at", "taught at"), ("married to", "divorced from"),
    ("capital of", "largest city of"), ("works for", "lives in"), ("founder of", "employee of"),
    ("child of", "parent of"), ("president of", "citizen of"), ("wrote", "read"), ("member of", "leader of"),
    ("located in", "capital of")]]
# fmt: on

# measured with `pair_cosines` and `fuzzy.matching.measure` (cpu profile, seed 0): results/thresholds.md
MINILM_THRESHOLDS = {
    "tau_entity": 0.75,
    "tau_relation": 0.7,
    "tau_triple": 0.8,
    "fuzzy": {"subject": 0.18, "relation": 0.78, "object": 0.14},
    "fuzzy_char": {"subject": 0.70, "relation": 0.0, "object": 0.78},
    # measured with `fuzzy.aliases.measure` (Re-DocRED dev mentions; held-out test documents): results/thresholds.md
    "fuzzy_alias": {"initialism": 0.0, "abbreviation": 0.43},
}

# no tau separates THRESHOLD_PAIRS for SmolLM2 h_AVG (results/thresholds.md): only near-identical strings merge
LLM_MEAN_THRESHOLDS = {
    "tau_entity": 0.99,
    "tau_relation": 0.99,
    "tau_triple": 0.99,
    "fuzzy": 0.99,
    "fuzzy_char": 0.0,
    "fuzzy_alias": {},
}


def pair_cosines(embedder: Any, pairs: Sequence[tuple] = THRESHOLD_PAIRS) -> np.ndarray:
    """Cosine of each (a, b, ...) pair: how thresholds for a new encoder were, and can be, chosen."""
    pairs = list(pairs)
    a = embedder.encode([p[0] for p in pairs])
    b = embedder.encode([p[1] for p in pairs])
    return (a * b).sum(axis=1)
