"""MemLLM's settings per profile, the one definition notebooks 04–07 and tools/train_accelerate.py read.

`MemLLMConfig.for_profile(profile, **given)`: how notebook 04 builds the data set (documents, the paper's filters,
the simulated memory), the LoRA training of notebook 05, and the sizes of notebooks 06 (Table 4) and 07 (Table 1);
a notebook's parameters cell puts its values over the profile's (None: the profile's).

cpu: the write adapter trains on the first 180 training documents (218,233 SmolLM2 tokens per epoch), the read
adapter on the first 90 (197,708: appendix C doubles its examples); two epochs of each took 30 and 26 minutes on
2 cores (1,794 s and 1,588 s, ~245 tokens/s; notebook 05; experiments/README.md "Write-recall levers" for why 180).
100 dev documents are built (notebook 04): notebook 06 runs the write model over every sentence of the first
`n_write_docs` (Table 4; its triples are MW[dev]), notebook 07 scores every Table 1 row on the first `n_eval_docs`
(the cpu profile: the same 30, so rows ③ and ④ read a memory written from the whole of each scored document).
gpu: every document, batch 16 as 4 micro-batches of 4 with activations
recomputed (examples up to 1,024 tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import (
    BOOL,
    COUNT,
    NON_NEGATIVE,
    POSITIVE_INT,
    SHARE,
    SHARE_BELOW_1,
    Check,
    TrainConfig,
    checked,
    one_of,
    optional,
)
from ..memory import Q_THR
from .examples import EMPTY_EVIDENCE, MAX_TRIPLES
from .reads import MAX_QUERIES, QUERY_NAMES

__all__ = ["MemLLMConfig", "PROFILES", "DATA_FIELDS"]

SHARES = Check("a sequence of shares in (0, 1]", lambda v: isinstance(v, tuple) and all(0 < float(x) <= 1 for x in v))
SIZES = Check(
    "a sequence of ints >= 0", lambda v: isinstance(v, tuple) and all(isinstance(n, int) and n >= 0 for n in v)
)
ALL_DOCS = "every document of the file"


@dataclass(frozen=True, kw_only=True)
class MemLLMConfig(TrainConfig):
    """One profile of notebooks 04–07; the training fields come from `TrainConfig`."""

    # notebook 04: which documents (`dataset.make_dataset`)
    n_train: int | None = checked(optional(POSITIVE_INT, ALL_DOCS))  # training documents of the read rows
    n_train_write: int | None = checked(optional(POSITIVE_INT, ALL_DOCS))  # of the write rows
    n_dev: int | None = checked(optional(POSITIVE_INT, ALL_DOCS))
    max_pretext_chars: int | None = checked(optional(POSITIVE_INT, "the whole pretext"))
    # notebook 04: the paper's rules (MemLLM §3.3, App. C–D; `examples`, `reads`)
    drop_empty: float = checked(SHARE, 0.85)  # share of no-relation sentences dropped (paper)
    max_triples: int | None = checked(optional(POSITIVE_INT, "no limit"), MAX_TRIPLES)
    empty_evidence: str = checked(one_of(*EMPTY_EVIDENCE), "co_sentence")
    early_shift: float = checked(NON_NEGATIVE, 1.0)  # App. C: Poisson mean of a read copy's shift; 0: none
    q_thr: int = checked(POSITIVE_INT, Q_THR)
    max_queries: int = checked(POSITIVE_INT, MAX_QUERIES)
    first_mention_filter: bool = checked(BOOL, True)
    query_names: str = checked(one_of(*QUERY_NAMES), "surface")
    pretext_loss_first: bool = checked(BOOL, True)
    fill_empty_with_target: bool = checked(BOOL, False)
    # notebook 04: where training replies come from without a write-model memory (ours; the paper gives no shares)
    train_memory: str = checked(one_of("simulated", "gold"), "simulated")
    memory_drop: float = checked(SHARE_BELOW_1, 0.3)
    memory_wrong: float = checked(NON_NEGATIVE, 0.1)  # wrong triples per kept one (may pass 1)
    # notebook 05: training rows per adapter (`TrainConfig`: lr, epochs, batch_size, LoRA ...)
    train_rows: int | None = checked(optional(POSITIVE_INT, "every row notebook 04 built"), None)
    # notebook 06: Table 4
    n_write_docs: int = checked(POSITIVE_INT)
    max_write_tokens: int = checked(POSITIVE_INT, 128)
    write_sentences: int | None = checked(optional(POSITIVE_INT, "every sentence"))
    # notebook 07: Table 1
    n_eval_docs: int = checked(POSITIVE_INT)
    max_doc_tokens: int | None = checked(optional(POSITIVE_INT, "whole documents"), None)
    max_query_tokens: int = checked(POSITIVE_INT, 128)  # official perplexity_eval: max_new_tokens=128
    memory_sizes: tuple[int, ...] = checked(SIZES)
    argmax_docs: int = checked(COUNT)  # row ⑤′ (ours); 0: not run
    size_docs: int = checked(POSITIVE_INT)
    speed_docs: int = checked(POSITIVE_INT)
    speed_max_tokens: int | None = checked(optional(POSITIVE_INT, "no limit"))
    # notebook 07: memories of controlled write quality (`memory_quality`), row ③'s definition on each
    quality_recalls: tuple[float, ...] = checked(SHARES)
    quality_precisions: tuple[float, ...] = checked(SHARES)


# the build settings notebook 04 saves in build.json beside the data set
DATA_FIELDS = (
    "seed",
    "n_train",
    "n_train_write",
    "n_dev",
    "max_pretext_chars",
    "drop_empty",
    "max_triples",
    "empty_evidence",
    "early_shift",
    "q_thr",
    "max_queries",
    "first_mention_filter",
    "query_names",
    "pretext_loss_first",
    "fill_empty_with_target",
    "train_memory",
    "memory_drop",
    "memory_wrong",
)

# notebook 05 (paper App. E where it applies: alpha 8, dropout 0.1, 2 epochs; r 16 as the official code; lr ours)
_TRAINING = dict(lr=1e-3, epochs=2, lora_r=16, lora_alpha=8, lora_dropout=0.1, max_length=1024)
PROFILES: dict[str, MemLLMConfig] = {
    "smoke": MemLLMConfig(
        profile="smoke",
        **_TRAINING,
        n_train=3,
        n_train_write=3,
        n_dev=3,
        max_pretext_chars=600,
        train_rows=8,
        batch_size=2,
        max_steps=2,
        n_write_docs=1,
        max_write_tokens=32,
        write_sentences=3,
        n_eval_docs=1,
        max_doc_tokens=96,
        max_query_tokens=16,
        memory_sizes=(0, 100, 400),
        argmax_docs=1,
        size_docs=1,
        speed_docs=1,
        speed_max_tokens=40,
        quality_recalls=(0.5,),
        quality_precisions=(0.5,),
    ),
    "cpu": MemLLMConfig(
        profile="cpu",
        **_TRAINING,
        n_train=90,
        n_train_write=180,
        n_dev=100,
        max_pretext_chars=600,
        batch_size=8,
        n_write_docs=30,
        write_sentences=None,  # every sentence: 280 of the 30 documents, ~10 s of decoding each on 2 cores
        n_eval_docs=30,  # the written documents: every Table 1 row on the same 30
        memory_sizes=(0, 3000, 15000),
        argmax_docs=0,
        size_docs=30,
        speed_docs=3,
        speed_max_tokens=200,
        quality_recalls=(0.1, 0.25, 0.5, 1.0),
        quality_precisions=(0.4, 1.0),
    ),
    "gpu": MemLLMConfig(
        profile="gpu",
        **_TRAINING,
        n_train=None,
        n_train_write=None,
        n_dev=None,
        max_pretext_chars=1500,
        batch_size=16,
        micro_batch=4,
        gradient_checkpointing=True,
        n_write_docs=500,
        write_sentences=None,
        n_eval_docs=500,
        memory_sizes=(0, 3000, 8000, 17000),
        argmax_docs=100,
        size_docs=100,
        speed_docs=5,
        speed_max_tokens=None,
        quality_recalls=(0.1, 0.25, 0.5, 0.75, 1.0),
        quality_precisions=(0.4, 0.7, 1.0),
    ),
}
MemLLMConfig.PROFILES = PROFILES
