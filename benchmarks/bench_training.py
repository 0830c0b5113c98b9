"""Training throughput of the RET-LLM LoRA SFT, with span masks (loss on the API call and answer only) vs
without (loss on every token): the masks change only the labels, so they must cost nothing.

    .venv/bin/python benchmarks/bench_training.py   # -> benchmarks/results/training.json, figures/08_training.png

SmolLM2-135M (fp32, CPU), LoRA r=16 on all linear layers (`training.lora_config`), `training.sft_config`
(batch 4, lr 2e-4), `steps` optimizer steps over exactly steps*batch rows of the synthetic `cpu` train split
rendered by `prompts.retllm_example_text` (one epoch: both modes see the same tokens in the same order).
After an unrecorded warm-up run, the modes alternate (mask, no mask, no mask, mask, ...) so that a change in
machine load hits both alike. tokens/s = non-padding tokens / trainer's train_runtime.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from benchmarks.common import FIGURES, busy_processes, loadavg, machine, save_result, set_threads, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each mode")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="training")
    a = ap.parse_args()

    import torch
    from transformers import set_seed

    from retllm_utils.models import load_model
    from retllm_utils.prompts import retllm_example_text
    from retllm_utils.retllm.synthetic import load_synthetic
    from retllm_utils.training import IGNORE, build_sft_dataset, lora_config, sft_config, train_lora

    torch.set_num_threads(a.threads)
    set_threads(a.threads)
    rows = load_synthetic("cpu")["train"].select(range(a.steps * a.batch))
    _, tok = load_model(device="cpu")
    data = {m: build_sft_dataset(tok, rows, retllm_example_text, a.max_length, mask=m) for m in (True, False)}
    assert data[True]["input_ids"] == data[False]["input_ids"]  # same tokens; only the labels differ
    n_tokens = sum(len(x) for x in data[True]["input_ids"])
    supervised = sum(sum(lab != IGNORE for lab in x) for x in data[True]["labels"])

    def run(mask: bool, steps: int) -> dict:
        set_seed(a.seed)
        model, tokenizer = load_model(device="cpu")
        ds = data[mask] if steps == a.steps else data[mask].select(range(steps * a.batch))
        with tempfile.TemporaryDirectory() as out:
            args = sft_config(
                out,
                batch_size=a.batch,
                max_length=a.max_length,
                seed=a.seed,
                max_steps=steps,
                logging_steps=steps,
                dataloader_num_workers=0,
            )
            load0 = loadavg()[0]
            t0 = time.perf_counter()
            trainer = train_lora(model, tokenizer, ds, args, lora_config())
            wall = time.perf_counter() - t0
        logs = [h for h in trainer.state.log_history if "train_runtime" in h][-1]
        seen = max((h.get("num_tokens", 0) for h in trainer.state.log_history), default=0) or n_tokens
        loss = next((h["loss"] for h in trainer.state.log_history if "loss" in h), float("nan"))
        return {
            "mask": mask,
            "steps": steps,
            "train_runtime_s": logs["train_runtime"],
            "wall_s": wall,
            "tokens": seen,
            "tokens_per_s": seen / logs["train_runtime"],
            "s_per_step": logs["train_runtime"] / steps,
            "loss": loss,
            "loadavg": load0,
        }

    print(
        f"{n_tokens:,} tokens in {len(rows)} examples, {supervised:,} supervised under masks "
        f"({supervised / n_tokens:.0%}); warm-up run...",
        flush=True,
    )
    run(True, 1)
    order = [m for i in range(a.rounds) for m in ((True, False) if i % 2 == 0 else (False, True))]
    runs = []
    for m in order:
        r = run(m, a.steps)
        runs.append(r)
        print(
            f"  mask={m!s:5}  {r['tokens_per_s']:.0f} tokens/s  ({r['train_runtime_s']:.1f} s, loss {r['loss']:.3f}, "
            f"load {r['loadavg']:.2f})",
            flush=True,
        )
    summary = []
    for m in (True, False):
        rs = [r for r in runs if r["mask"] == m]
        summary.append(
            {
                "labels": "span masks" if m else "all tokens",
                "runs": len(rs),
                "tokens_per_s_median": float(np.median([r["tokens_per_s"] for r in rs])),
                "tokens_per_s_min": min(r["tokens_per_s"] for r in rs),
                "tokens_per_s_max": max(r["tokens_per_s"] for r in rs),
                "s_per_step_median": float(np.median([r["s_per_step"] for r in rs])),
                "loss_first_log": float(np.median([r["loss"] for r in rs])),
            }
        )
    ratio = summary[0]["tokens_per_s_median"] / summary[1]["tokens_per_s_median"]
    res = {
        "benchmark": "training",
        "model": "smollm2-135m-instruct (fp32, CPU)",
        "lora": "r=16 alpha=32 all-linear",
        "steps": a.steps,
        "batch": a.batch,
        "examples": len(rows),
        "tokens_per_run": n_tokens,
        "supervised_tokens_masked": supervised,
        "threads": a.threads,
        "runs": runs,
        "summary": summary,
        "mask_over_nomask_speed": ratio,
        "machine": machine(),
        "busy_processes": busy_processes(),
        "loadavg_end": loadavg(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    path = save_result(a.out, res)
    print(table(summary))
    print(f"masked / unmasked throughput: {ratio:.3f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 2.6), dpi=100)
    for i, m in enumerate((True, False)):
        ys = [r["tokens_per_s"] for r in runs if r["mask"] == m]
        ax.scatter([i] * len(ys), ys, color="tab:blue" if m else "tab:orange", zorder=3)
        ax.bar(i, np.median(ys), color="tab:blue" if m else "tab:orange", alpha=0.4)
    ax.set_xticks([0, 1], ["span masks", "all tokens"])
    ax.set(ylabel="tokens/s", title=f"LoRA SFT throughput, SmolLM2-135M, {a.threads} CPU threads")
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "08_training.png")
    print("results:", os.path.relpath(path), " figure:", os.path.relpath(FIGURES / "08_training.png"))


if __name__ == "__main__":
    main()
