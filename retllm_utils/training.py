"""LoRA SFT with loss on chosen character spans only, on TRL's SFTTrainer.

Each example is rendered once to (text, spans) and tokenized piece by piece, cut at the span edges; the
controller's generator keeps those boundaries at inference (generated ids are kept, the memory's reply is
tokenized on its own), so training and inference see the same tokens.
TRL keeps an existing `labels` column as is, so the loss is exactly the masked loss.
Training reports its progress through `TrainingProgress`: a live bar with the loss in JupyterLab, text lines elsewhere.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from datasets import Dataset
from transformers import TrainerCallback

__all__ = [
    "tokenize_with_spans",
    "build_sft_dataset",
    "lora_config",
    "sft_config",
    "train_lora",
    "supervised_text",
    "TrainingProgress",
    "live_frontend",
    "IGNORE",
]

IGNORE = -100


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
        bf16=cuda and torch.cuda.is_bf16_supported(),
        use_cpu=not cuda and not torch.backends.mps.is_available(),
        lr_scheduler_type=kw.pop("lr_scheduler_type", "cosine"),
        warmup_steps=kw.pop("warmup_steps", 0.05),
        disable_tqdm=kw.pop("disable_tqdm", True),  # transformers' bars off: train_lora adds TrainingProgress
        # TRL checkpoints activations by default: memory a 135M model does not need, paid for in recompute time.
        # Set under transformers 5's name: TRL's default for the deprecated alias `gradient_checkpointing` is then
        # ignored instead of raising its FutureWarning; a caller's gradient_checkpointing= is taken as the new name.
        activation_checkpointing=kw.pop("activation_checkpointing", kw.pop("gradient_checkpointing", False)),
        # batches of similar lengths: examples run 60-240 tokens, so random batches are ~1/3 padding
        train_sampling_strategy=kw.pop("train_sampling_strategy", "group_by_length"),
        **kw,
    )


def live_frontend() -> bool:
    """True in a kernel that a Jupyter server (JupyterLab, Notebook) or Colab displays live: there a widget bar moves.

    papermill's kernel has no live view (it saves a widget's first frame, a bar frozen at 0%), nor has a terminal.
    """
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    if shell is None or "IPKernelApp" not in shell.config:
        return False
    return "JPY_SESSION_NAME" in os.environ or "google.colab" in sys.modules


def _duration(seconds: float) -> str:
    """h:mm:ss or m:ss, as tqdm writes them."""
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


class TrainingProgress(TrainerCallback):
    """Training progress users can see: a tqdm bar with the loss where it updates live, else a text line every N steps.

    The lines (step, %, loss, lr, elapsed, left) go to stdout, so papermill keeps them in the notebook and prints them
    with `--log-output`; `every=None` prints about 20 lines per training, at logging steps (`logging_steps`).
    """

    def __init__(self, *, bar: bool | None = None, every: int | None = None, file: Any = None) -> None:
        self.bar, self.every, self.file = bar, every, file
        self._tqdm: Any = None

    @property
    def _out(self) -> Any:
        """Where the lines go: `file`, else stdout at call time (papermill and pytest swap it)."""
        return self.file or sys.stdout

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0, self._printed = time.monotonic(), 0
        self._every = self.every or max(args.logging_steps, math.ceil(state.max_steps / 20))
        if self.bar if self.bar is not None else live_frontend():
            from tqdm.auto import tqdm

            self._tqdm = tqdm(total=state.max_steps, desc="training", unit="step", dynamic_ncols=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._tqdm is not None:
            self._tqdm.update(state.global_step - self._tqdm.n)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        # the closing summary: steps logged every N end short of 100%
        if self._tqdm is None and "train_loss" in logs:
            took = _duration(time.monotonic() - self._t0)
            print(
                f"done: {state.global_step} steps · mean loss {logs['train_loss']:.4f} · {took}",
                file=self._out,
                flush=True,
            )
            return
        if "loss" not in logs:
            return
        if self._tqdm is not None:
            self._tqdm.set_postfix(loss=f"{logs['loss']:.4f}", refresh=True)
            return
        step, total = state.global_step, state.max_steps
        if step - self._printed < self._every and step < total:
            return
        self._printed = step
        spent = time.monotonic() - self._t0
        left = spent / step * (total - step) if step else 0.0
        lr = f" · lr {logs['learning_rate']:.2e}" if "learning_rate" in logs else ""
        print(
            f"step {step}/{total} ({100 * step / total:.0f}%) · loss {logs['loss']:.4f}{lr}"
            f" · {_duration(spent)} elapsed, ~{_duration(left)} left",
            file=self._out,
            flush=True,
        )

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None


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
