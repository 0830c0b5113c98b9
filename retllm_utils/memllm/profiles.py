"""MemLLM profile sizes, the one definition notebooks 04–07 import (smoke: CI; cpu: 2 cores; gpu: paper size).

cpu: the write adapter trains on the first 180 training documents (~218k SmolLM2 tokens per epoch), the read adapter
on the first 90 (~198k: appendix C doubles its examples), so two epochs of each take about 45 minutes at ~160
tokens/s on 2 cores (notebook 05; benchmarks/README.md "Write-recall levers" for why 180). 100 dev documents are
built (notebook 04): notebook 06 runs the write model over the first `n_write_docs` (Table 4; its triples are
MW[dev]), notebook 07 scores the rows that need no write model on all `n_eval_docs` and the MW[dev] rows on the
written ones (Table 1).
"""

from __future__ import annotations

from typing import Any

from ..paths import profile_settings

__all__ = ["PROFILES", "settings"]

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        n_train=3,
        n_train_write=3,
        n_dev=3,
        max_pretext_chars=600,  # notebook 04: documents (None: all 500)
        train_rows=8,
        batch_size=2,
        max_steps=2,  # notebook 05: rows per adapter (None: all), steps
        n_write_docs=1,
        max_write_tokens=32,
        write_sentences=3,  # notebook 06
        n_eval_docs=1,
        max_doc_tokens=96,
        max_query_tokens=16,  # notebook 07
        memory_sizes=[0, 100, 400],
        argmax_docs=1,
        size_docs=1,
        speed_docs=1,
        speed_max_tokens=40,
    ),
    "cpu": dict(
        n_train=90,
        n_train_write=180,
        n_dev=100,
        max_pretext_chars=600,
        train_rows=None,
        batch_size=8,
        max_steps=None,
        n_write_docs=30,
        max_write_tokens=128,
        write_sentences=3,  # ~30 s of decoding per sentence and pass on 2 cores: 30 documents x 3 sentences
        n_eval_docs=100,
        max_doc_tokens=None,
        max_query_tokens=64,
        memory_sizes=[0, 3000, 15000],
        argmax_docs=10,
        size_docs=30,
        speed_docs=3,
        speed_max_tokens=200,
    ),
    "gpu": dict(
        n_train=None,
        n_train_write=None,
        n_dev=None,
        max_pretext_chars=1500,
        train_rows=None,
        batch_size=16,
        max_steps=None,
        n_write_docs=500,
        max_write_tokens=128,
        write_sentences=None,
        n_eval_docs=500,
        max_doc_tokens=None,
        max_query_tokens=64,
        memory_sizes=[0, 3000, 8000, 17000],
        argmax_docs=100,
        size_docs=100,
        speed_docs=5,
        speed_max_tokens=None,
    ),
}


def settings(profile: str, **given: Any) -> dict[str, Any]:
    """The profile's settings with every `given` value that is not None put over them."""
    return profile_settings(PROFILES, profile, **given)
