"""LoRA SFT with loss on chosen character spans only, on TRL's SFTTrainer, and the one train-or-reuse step.

Each example is rendered once to (text, spans) and tokenized piece by piece, cut at the span edges; the
controller's generator keeps those boundaries at inference (generated ids are kept, the memory's reply is
tokenized on its own), so training and inference see the same tokens.
TRL keeps an existing `labels` column as is, so the loss is exactly the masked loss.
Training reports its progress through `progress.TrainingProgress`: a live bar with the loss in JupyterLab, text lines
elsewhere.
`train_or_reuse` trains an adapter with a profile's `config.TrainConfig`, or reuses the one saved in the folder when
every setting that shaped it (`recipe`: model, data, loss, seed and hyper-parameters) is the same; `train_meta.json`
beside the adapter holds that recipe, how it was trained and the loss log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import torch
from datasets import Dataset

from .progress import TrainingProgress, live_frontend

__all__ = [
    "tokenize_with_spans",
    "build_sft_dataset",
    "lora_config",
    "sft_config",
    "train_lora",
    "data_fingerprint",
    "recipe",
    "recipe_differences",
    "run_record",
    "train_or_reuse",
    "Training",
    "META_FILE",
    "supervised_text",
    "TrainingProgress",
    "live_frontend",
    "IGNORE",
]

IGNORE = -100
META_FILE = "train_meta.json"  # beside every adapter train_or_reuse saves


def tokenize_with_spans(
    tokenizer: Any, text: str, spans: Sequence[tuple[int, int]], max_length: int, *, mask: bool = True
) -> dict[str, list[int]]:
    """`input_ids` and `labels` (IGNORE outside the spans; everywhere supervised when mask=False).

    The text is tokenized piece by piece, cut at every span edge, so no token straddles an edge: joint
    tokenization merges e.g. the query's ':' with an empty reply's ']' into one ':]' token, which would teach
    the model to write the memory's reply itself. `controller.HFGenerator` appends text the same way
    (generated ids kept, the memory's reply tokenized on its own), so inference sees these boundaries.
    Raises ValueError if truncation to `max_length` would cut a supervised span: TRL would otherwise drop or
    mis-train the example silently.
    """
    cuts = sorted({0, len(text), *(x for s in spans for x in s if 0 < x < len(text))})
    ids: list[int] = []
    labels: list[int] = []
    for a, b in zip(cuts, cuts[1:]):
        piece = tokenizer(text[a:b], add_special_tokens=False)["input_ids"]
        inside = any(s <= a and b <= e for s, e in spans)
        ids += piece
        labels += piece if (inside or not mask) else [IGNORE] * len(piece)
    if len(ids) > max_length:
        if any(lab != IGNORE for lab in labels[max_length:]) and mask:
            raise ValueError(
                f"example of {len(ids)} tokens exceeds max_length={max_length} and truncation would "
                f"cut a supervised span: raise max_length or shorten the example ({text[:60]!r}...)"
            )
        ids, labels = ids[:max_length], labels[:max_length]
    if mask and all(lab == IGNORE for lab in labels):
        raise ValueError(f"no supervised token in example {text[:60]!r}...: spans {list(spans)} cover no token")
    return {"input_ids": list(ids), "labels": labels}


def supervised_text(tokenizer: Any, input_ids: Sequence[int], labels: Sequence[int]) -> list[str]:
    """The supervised stretches decoded, one string per contiguous run (for tests and for showing masks)."""
    runs, cur = [], []
    for tok, lab in zip(input_ids, labels):
        if lab != IGNORE:
            cur.append(tok)
        elif cur:
            runs.append(tokenizer.decode(cur))
            cur = []
    if cur:
        runs.append(tokenizer.decode(cur))
    return runs


def build_sft_dataset(
    tokenizer: Any,
    rows: Iterable[Mapping[str, Any]],
    render: Callable[[Any, Mapping[str, Any]], tuple[str, list[tuple[int, int]]]],
    max_length: int,
    *,
    mask: bool = True,
) -> Dataset:
    """A pre-tokenized `datasets.Dataset` (input_ids, labels) that SFTTrainer trains on as is."""
    out = {"input_ids": [], "labels": []}
    for row in rows:
        text, spans = render(tokenizer, row)
        enc = tokenize_with_spans(tokenizer, text, spans, max_length, mask=mask)
        out["input_ids"].append(enc["input_ids"])
        out["labels"].append(enc["labels"])
    return Dataset.from_dict(out)


def lora_config(r: int = 16, alpha: int = 32, dropout: float = 0.05):
    """LoRA on every linear projection (as both papers: all projection layers)."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules="all-linear", task_type="CAUSAL_LM")


def sft_config(
    output_dir: str,
    *,
    lr: float = 2e-4,
    epochs: float = 1.0,
    batch_size: int = 16,
    grad_accum: int = 1,
    max_length: int = 512,
    seed: int = 0,
    max_steps: int = -1,
    logging_steps: int = 5,
    **kw: Any,
):
    """SFTConfig that trains on the pre-tokenized labels; bf16 only on CUDA (the CPU default fails or drifts)."""
    from trl import SFTConfig

    fields = {f.name for f in dataclasses.fields(SFTConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    cuda = torch.cuda.is_available()
    return SFTConfig(
        output_dir=output_dir,
        learning_rate=lr,
        num_train_epochs=epochs,
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=grad_accum,
        max_length=max_length,
        seed=seed,
        data_seed=seed,
        logging_steps=logging_steps,
        save_strategy="no",
        report_to="none",
        bf16=kw.pop("bf16", cuda and torch.cuda.is_bf16_supported()),  # bf16=False: fp32 on a GPU too
        use_cpu=not cuda and not torch.backends.mps.is_available(),
        lr_scheduler_type=kw.pop("lr_scheduler_type", "cosine"),
        warmup_steps=kw.pop("warmup_steps", 0.05),
        disable_tqdm=kw.pop("disable_tqdm", True),  # transformers' bars off: train_lora adds TrainingProgress
        # TRL checkpoints activations by default: memory a 135M model does not need, paid for in recompute time.
        # Set under transformers 5's name: TRL's default for the deprecated alias `gradient_checkpointing` is then
        # ignored instead of raising its FutureWarning; a caller's gradient_checkpointing= is taken as the new name.
        # (older transformers, e.g. 5.17 on a GPU image, know only `gradient_checkpointing`)
        **{checkpointing: kw.pop("activation_checkpointing", kw.pop("gradient_checkpointing", False))},
        # batches of similar lengths: examples run 60-240 tokens, so random batches are ~1/3 padding
        train_sampling_strategy=kw.pop("train_sampling_strategy", "group_by_length"),
        **kw,
    )


def train_lora(
    model: Any, tokenizer: Any, train_ds: Dataset, args: Any, peft_config: Any = None, *, progress: Any = None
):
    """Train a LoRA adapter with SFTTrainer; returns the trainer (its `state.log_history` has the loss curve).

    Progress shows through `progress` (default `TrainingProgress()`) instead of transformers' log-dict printer.
    """
    from transformers import PrinterCallback
    from trl import SFTTrainer

    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        processing_class=tokenizer,
        peft_config=peft_config or lora_config(),
    )
    trainer.remove_callback(PrinterCallback)  # raw log dicts; the loss curve stays in state.log_history
    if args.disable_tqdm:  # else transformers shows its own bar
        trainer.add_callback(progress or TrainingProgress())
    trainer.train()
    return trainer


# --------------------------------------------------------------------------------------------- train or reuse
# the TrainConfig fields that shape an adapter; micro_batch and gradient_checkpointing only change how it is computed
SHAPING = ("seed", "lr", "epochs", "batch_size", "max_steps", "lora_r", "lora_alpha", "lora_dropout")


def data_fingerprint(ds: Any) -> str:
    """SHA-256 of a pre-tokenized training set: every row's input_ids and labels, in order (what training saw)."""
    h = hashlib.sha256()
    for ids, labels in zip(ds["input_ids"], ds["labels"]):
        h.update(json.dumps([ids, labels], separators=(",", ":")).encode())
    return h.hexdigest()


def recipe(config: Any, model_id: str, train_ds: Any) -> dict[str, Any]:
    """The settings that shaped an adapter: base model, data, loss (read off the labels), seed, hyper-parameters."""
    whole = all(ids == labels for ids, labels in zip(train_ds["input_ids"], train_ds["labels"]))
    return {
        "model_id": model_id,
        "data": data_fingerprint(train_ds),
        "loss": "whole_sequence" if whole else "masked",
        **config.as_dict(SHAPING),
    }


def recipe_differences(saved: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """'name saved -> wanted' for every recipe setting the saved metadata lacks or holds otherwise."""

    def shown(key: str, value: Any) -> str:
        return f"{value[:12]}…" if key == "data" and isinstance(value, str) else repr(value)

    return [f"{k} {shown(k, saved.get(k))} -> {shown(k, v)}" for k, v in wanted.items() if saved.get(k) != v]


def run_record(config: Any, train_ds: Any, *, processes: int, steps: int, seconds: float, epochs: float) -> dict:
    """How an adapter was trained, written beside its recipe: examples, tokens per epoch, batch split, steps, time."""
    micro, accum = config.batch_split(processes)
    tokens = sum(map(len, train_ds["input_ids"]))
    return {
        "examples": len(train_ds),
        "tokens_per_epoch": tokens,
        "max_length": config.max_length,
        "micro_batch": micro,
        "grad_accum": accum,
        "gradient_checkpointing": config.gradient_checkpointing,
        "processes": processes,
        "steps": steps,
        "train_seconds": seconds,
        "tokens_per_second": tokens * epochs / seconds,
    }


class Training(NamedTuple):
    """What `train_or_reuse` gives: the adapter's metadata, and the trainer (None when the saved adapter is reused)."""

    meta: dict[str, Any]
    trainer: Any


def train_or_reuse(
    out: str | os.PathLike,
    train_ds: Any,
    config: Any,
    *,
    model_id: str,
    tokenizer: Any,
    model: Any = None,
    retrain: bool = False,
    processes: int = 1,
    info: Mapping[str, Any] | None = None,
    **sft_kw: Any,
) -> Training:
    """Train a LoRA adapter into `out` with `config` (a `config.TrainConfig`), or reuse the one saved there.

    Reused when `out` holds an adapter whose train_meta.json has this `recipe` (and `retrain` is False); otherwise
    the line printed names the settings that differ, and the adapter is trained on `model` (a model, a function
    that loads one, or None: `models.load_model(model_id)`), seeded with config.seed just before LoRA is added.
    The batch is split per `config.batch_split(processes)` (micro-batches and gradient accumulation). Only the main
    process writes; train_meta.json is the recipe, `profile`, `info`, how it ran (examples, tokens per epoch,
    micro-batch, accumulation, processes, steps, seconds, tokens/s) and the trainer's log history.
    """
    from transformers import set_seed

    from .paths import ROOT

    out = Path(out)
    label, shown = out.name, os.path.relpath(out, ROOT)
    wanted = recipe(config, model_id, train_ds)
    meta_file = out / META_FILE
    say = print if os.environ.get("RANK", "0") == "0" else (lambda *_: None)  # one line from N processes
    if not retrain and (out / "adapter_config.json").is_file() and meta_file.is_file():
        saved = json.loads(meta_file.read_text(encoding="utf-8"))
        changed = recipe_differences(saved, wanted)
        if not changed:
            took = f"{saved['train_seconds'] / 60:.1f} min, {saved['steps']} steps"
            say(f"{label}: reusing {shown} (trained {took}; same model, data and settings)")
            return Training(saved, None)
        say(f"{label}: retraining: the adapter in {shown} was trained with {'; '.join(changed)}")
    meta_file.unlink(missing_ok=True)  # a failed run must not leave an adapter beside the old recipe
    if model is None:
        from .models import load_model

        model = load_model(model_id)[0]
    elif not isinstance(model, torch.nn.Module):  # a function that loads it (a model is callable too)
        model = model()
    micro, accum = config.batch_split(processes)
    args = sft_config(
        str(out / "trainer"),
        lr=config.lr,
        epochs=config.epochs,
        batch_size=micro,
        grad_accum=accum,
        max_length=config.max_length,
        seed=config.seed,
        max_steps=config.max_steps or -1,
        logging_steps=sft_kw.pop("logging_steps", 1 if config.max_steps else 5),
        gradient_checkpointing=config.gradient_checkpointing,
        **sft_kw,
    )
    lora = lora_config(config.lora_r, config.lora_alpha, config.lora_dropout)
    set_seed(config.seed)  # LoRA's initial weights: the same whatever ran before in this process
    t0 = time.perf_counter()
    trainer = train_lora(model, tokenizer, train_ds, args, lora)
    seconds = time.perf_counter() - t0
    if trainer.is_fsdp_enabled:  # PEFT's FSDP guide: gather the whole adapter before saving it
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(out))  # the main process writes; the others wait
    state = trainer.state
    how = run_record(
        config, train_ds, processes=processes, steps=state.global_step, seconds=seconds, epochs=state.epoch
    )
    meta = {**wanted, "profile": config.profile, **(info or {}), **how, "log_history": state.log_history}
    if trainer.is_world_process_zero():
        meta_file.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        print(
            f"{label}: {meta['steps']} steps in {seconds / 60:.1f} min ({meta['tokens_per_second']:.0f} tokens/s)"
            f" -> {shown}"
        )
    return Training(meta, trainer)
