"""RET-LLM profile sizes, the one definition notebooks 01–03 import (smoke: CI; cpu: 2 cores; gpu: paper size).

cpu: one epoch of 1,500 examples (~110 tokens each) is ~170k tokens, ~20 min of LoRA at ~140 tokens/s on 2 cores;
n_test 336 with a quarter statements is 252 reads, 42 of each query type (RET-LLM Table 1's six);
n_paraphrase 120 (same quarter of statements) is 30 writes, 10 of each new shape, and 15 reads per query type;
ablation_n 168: notebook 03's two ablation passes score the first half of the (shuffled) test split, ~12 min each.
"""

from __future__ import annotations

from typing import Any

from ..paths import profile_settings

__all__ = ["PROFILES", "settings"]

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        n_train=40,
        n_val=10,
        n_test=20,  # notebook 01: data set sizes
        n_paraphrase=8,  # the held-out paraphrase split (issue 14)
        epochs=1,
        batch_size=4,
        max_steps=3,
        eval_n=4,  # notebook 02: training, validation examples
        test_n=6,
        ablation_n=None,
        max_new_tokens=48,
    ),  # notebook 03: test examples (None: all), of them in the ablation passes, tokens per turn
    "cpu": dict(
        n_train=1500,
        n_val=150,
        n_test=336,
        n_paraphrase=120,
        epochs=1,
        batch_size=8,
        max_steps=None,
        eval_n=60,
        test_n=None,
        ablation_n=168,
        max_new_tokens=128,
    ),
    "gpu": dict(
        n_train=10000,
        n_val=500,
        n_test=1200,
        n_paraphrase=600,
        epochs=3,
        batch_size=32,
        max_steps=None,
        eval_n=60,
        test_n=None,
        ablation_n=None,
        max_new_tokens=128,
    ),
}


def settings(profile: str, **given: Any) -> dict[str, Any]:
    """The profile's settings with every `given` value that is not None put over them."""
    return profile_settings(PROFILES, profile, **given)
