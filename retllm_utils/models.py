"""Loading the LLM and the phrase embedders, offline by default, a hub id on Colab."""
from __future__ import annotations

import hashlib
import re
from typing import Protocol, Sequence

import numpy as np

__all__ = ["Embedder", "NgramEmbedder"]


class Embedder(Protocol):
    """What the memory needs from an encoder: unit-length float32 vectors, plus its own thresholds."""

    name: str
    dim: int
    thresholds: dict[str, float]  # tau_entity, tau_relation, tau_triple, fuzzy (RET-LLM nearest-term cut-off)

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class NgramEmbedder:
    """Hashed character-trigram vectors: no model, deterministic, instant; for tests and large benchmarks."""

    def __init__(self, dim: int = 256):
        self.name, self.dim = f"ngram-{dim}", dim
        self.thresholds = {"tau_entity": 0.7, "tau_relation": 0.7, "tau_triple": 0.85, "fuzzy": 0.6}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            s = "  " + re.sub(r"\s+", " ", t.lower().strip()) + "  "
            for j in range(len(s) - 2):
                h = int.from_bytes(hashlib.blake2b(s[j:j + 3].encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
