"""Rewrite a MemLLM adapter's train_meta.json from notebook 05's earlier format into `training.train_or_reuse`'s.

Notebook 05 used to save the settings it trained with (kind, profile, seconds, epochs, lr, batch size, LoRA as a list,
model id) but not the data it trained on, the seed or the loss mode, so `train_or_reuse` cannot tell whether such an
adapter is the one it would train, and retrains it. This rebuilds the adapter's training set as notebook 05 does
(`dataset.load_or_build` and `training_rows`, `render`, the `max_length` of the profile's `MemLLMConfig`), checks that
it has the examples and tokens per epoch the old file records, and writes the recipe beside the old file's timings and
loss log. The adapter's weights are not touched; the SHA-256 sums of checkpoints/ are rewritten by `make checkpoints`
(or its last line by hand: `cd checkpoints/memllm/cpu && sha256sum $(CKPT_FILES) > SHA256SUMS`).

    .venv/bin/python tools/migrate_train_meta.py checkpoints/memllm/cpu/write checkpoints/memllm/cpu/read
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `tools/migrate_train_meta.py` without installing the kit
    sys.path.insert(0, str(ROOT))


def migrate(adapter_dir: Path, tokenizer, seed: int = 0) -> dict:
    """The new train_meta.json of one adapter folder (written there); SystemExit if its data is not the old one's."""
    from retllm_utils.memllm.config import MemLLMConfig
    from retllm_utils.memllm.dataset import load_or_build, render, training_rows
    from retllm_utils.training import META_FILE, build_sft_dataset, recipe, run_record

    old = json.loads((adapter_dir / META_FILE).read_text(encoding="utf-8"))
    if "data" in old:
        print(f"{adapter_dir}: already has a recipe")
        return old
    lora_r, lora_alpha, lora_dropout = old["lora"]
    given = dict(epochs=old["epochs"], lr=old["lr"], batch_size=old["batch_size"], max_steps=old["max_steps"])
    config = MemLLMConfig.for_profile(old["profile"], seed=seed, **given).replace(
        lora_r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout
    )
    rows = training_rows(load_or_build(config.profile, seed=seed)[0], old["kind"], config)
    ds = build_sft_dataset(tokenizer, rows, render, config.max_length)
    tokens = sum(map(len, ds["input_ids"]))
    if (len(ds), tokens) != (old["examples"], old["tokens_per_epoch"]):
        raise SystemExit(
            f"{adapter_dir}: today's {old['kind']} rows are {len(ds)} examples, {tokens} tokens; the adapter was "
            f"trained on {old['examples']}, {old['tokens_per_epoch']}: not the same data, nothing written"
        )
    steps = max((h["step"] for h in old["log_history"]), default=0)
    how = run_record(config, ds, processes=1, steps=steps, seconds=old["seconds"], epochs=old["epochs"])
    info = {"profile": config.profile, "adapter": old["kind"]}
    meta = {**recipe(config, old["model_id"], ds), **info, **how, "log_history": old["log_history"]}
    (adapter_dir / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(f"{adapter_dir}: recipe written (data {meta['data'][:12]}…, {steps} steps)")
    return meta


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="adapter folders holding an old train_meta.json")
    ap.add_argument("--seed", type=int, default=0, help="the data set's seed the adapters were trained with")
    a = ap.parse_args(argv)
    from retllm_utils.models import load_model
    from retllm_utils.training import META_FILE

    tokenizers: dict[str, object] = {}
    for d in a.dirs:
        model_id = json.loads((d / META_FILE).read_text(encoding="utf-8"))["model_id"]
        if model_id not in tokenizers:
            tokenizers[model_id] = load_model(model_id, device="cpu")[1]
        migrate(d, tokenizers[model_id], a.seed)


if __name__ == "__main__":
    main()
