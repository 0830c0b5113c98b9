"""RET-LLM's settings per profile, the one definition notebooks 01–03 and tools/train_accelerate.py read.

`RetLLMConfig.for_profile(profile, **given)`: the data set's sizes and shape (notebook 01), the LoRA training
hyper-parameters (notebook 02) and the evaluation sizes (notebook 03); a notebook's parameters cell puts its values
over the profile's (None: the profile's). smoke: CI, seconds; cpu: 2 cores, the committed outputs; gpu: paper size.

cpu, wide build (notebooks 01-03's default): one epoch of the 1,860 training examples (870 statements; 360 rows are
open-relation ones) is 175,594 SmolLM2 tokens (the longest 277, so `max_length` 384 cuts nothing), 233 optimizer
steps of 8 examples (experiments/open_relations.py trained a whole-sequence adapter on these rows in 19.4 min).
n_test 336 is 110 statements (34 of them Re-DocRED sentences) and 226 questions, 37-38 of each of RET-LLM Table 1's
six query types; n_paraphrase 120 is 30 statements (6 in each held-out statement shape) and 90 questions; ablation_n
168: notebook 03's passes beside the main one (free answers, the other adapter) score the first half of the
(shuffled) test split. gpu: batch 32 as 8 micro-batches of 4 with activations recomputed, so one step of a 7B model
(or of SmolLM2 on a CPU) holds 4 examples' activations at a time, not 32.

phrasings="paper": RET-LLM's templates only (the committed data/retllm_synthetic/), 146,545 tokens per cpu epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import COUNT, POSITIVE_INT, SHARE, Check, TrainConfig, checked, one_of, optional

__all__ = ["RetLLMConfig", "PROFILES", "DATA_FIELDS", "WIDE_FIELDS"]

SCENE_SIZE = Check(
    "(fewest, most) people per scene, ints with 1 <= fewest <= most",
    lambda v: isinstance(v, tuple) and len(v) == 2 and all(isinstance(n, int) for n in v) and 1 <= v[0] <= v[1],
)


@dataclass(frozen=True, kw_only=True)
class RetLLMConfig(TrainConfig):
    """One profile of notebooks 01–03; the training fields come from `TrainConfig`."""

    # notebook 01: the synthetic data set (`synthetic.make_dataset`)
    n_train: int = checked(COUNT)
    n_val: int = checked(COUNT)
    n_test: int = checked(COUNT)
    n_paraphrase: int = checked(COUNT)
    # share of statements; the reads are split evenly over the 6 types
    write_frac: float = checked(SHARE, 0.25)
    no_match_frac: float = checked(SHARE, 0.1)  # share of each query type's reads that find nothing
    scene_size: tuple[int, int] = checked(SCENE_SIZE, (3, 8))  # people in an example's memory
    # "paper": the committed data set (phrasings.py's tables); "wide": many more shapes, Re-DocRED and open
    # relations (wide.py), notebooks 01-03's default
    phrasings: str = checked(one_of("paper", "wide"), "paper")
    docred_frac: float = checked(SHARE, 0.1)  # wide: share of train/validation/test rows that are Re-DocRED sentences
    # wide: share of statements among the train split's synthetic rows (0.25 gives the earlier build); the
    # evaluation splits keep write_frac. Trained on 0.25, the adapter wrote 0.45 of test statements exactly.
    train_write_frac: float = checked(SHARE, 0.4)
    # wide: rows of the new_relations split (Re-DocRED sentences over held-out relations); None: all of them
    n_new_relations: int | None = checked(optional(COUNT, "every held-out-relation sentence"), None)
    # wide: training rows over other relations said in the user's words (`open_relations`, the held-out ones never)
    open_rows: int = checked(COUNT, 0)
    # wide: rows of the open_relations split (statements and questions over the held-out open relations, half each)
    n_open_test: int = checked(COUNT, 96)
    # wide: how the train split's questions choose their verb: "drawn" with the template, or "balanced": the verb its
    # query type and relation said least so far (`wide.VerbBalance`), so each verb gets its share (evaluation splits:
    # drawn)
    train_questions: str = checked(one_of("drawn", "balanced"), "drawn")
    # wide: how many turns each trained multi-fact shape (coordinated, gapping, relative_two) takes in the train split's
    # cycle of statement shapes, every other shape one (evaluation splits: one each)
    multi_weight: int = checked(POSITIVE_INT, 1)
    # notebook 02: training (`TrainConfig`: lr, epochs, batch_size, LoRA ...) and validation examples scored
    eval_n: int = checked(POSITIVE_INT, 60)
    # notebook 03: test examples, of them in the ablation passes, tokens per turn
    test_n: int | None = checked(optional(POSITIVE_INT, "the whole test split"), None)
    ablation_n: int | None = checked(optional(POSITIVE_INT, "every test example"), None)
    max_new_tokens: int = checked(POSITIVE_INT, 128)


# the fields `synthetic.dataset_meta` saves as build.json: a saved data set is reused only if they match
DATA_FIELDS = ("seed", "n_train", "n_val", "n_test", "n_paraphrase", "write_frac", "no_match_frac", "scene_size")
# saved too when phrasings is "wide"
WIDE_FIELDS = (
    "phrasings",
    "docred_frac",
    "n_new_relations",
    "train_write_frac",
    "open_rows",
    "n_open_test",
    "train_questions",
    "multi_weight",
)

_TRAINING = dict(lr=1e-3, lora_r=16, lora_alpha=32, lora_dropout=0.05, max_length=384)
PROFILES: dict[str, RetLLMConfig] = {
    "smoke": RetLLMConfig(
        profile="smoke",
        **_TRAINING,
        n_train=40,
        n_val=10,
        n_test=20,
        n_paraphrase=8,
        n_new_relations=2,
        open_rows=8,
        n_open_test=4,
        epochs=1,
        batch_size=4,
        max_steps=3,
        eval_n=4,
        test_n=6,
        ablation_n=2,
        max_new_tokens=32,
    ),
    # cpu: twice the peak rate, measured over the cpu profile's 233 steps at three training seeds (experiments/README.md
    # "A higher learning rate"): more synthetic test statements written exactly, more held-out open read-backs answered;
    # smoke and gpu keep 1e-3 (the gpu profile's longer schedule was never tried at either rate)
    "cpu": RetLLMConfig(
        profile="cpu",
        **{**_TRAINING, "lr": 2e-3},
        n_train=1500,
        n_val=150,
        n_test=336,
        n_paraphrase=120,
        open_rows=360,
        epochs=1,
        batch_size=8,
        ablation_n=168,
    ),
    "gpu": RetLLMConfig(
        profile="gpu",
        **_TRAINING,
        n_train=10000,
        n_val=500,
        n_test=1200,
        n_paraphrase=600,
        open_rows=2400,
        n_open_test=400,
        epochs=3,
        batch_size=32,
        micro_batch=4,
        gradient_checkpointing=True,
    ),
}
RetLLMConfig.PROFILES = PROFILES
