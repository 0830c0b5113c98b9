"""MemLLM's write model against its training size: write recall and precision (Table 4's embedding match) per point.

Each point is a write adapter trained as notebook 05 trains its own on the first N training documents for E epochs
and scored by `write_levers.py` on the same slice (first 3 focus sentences of dev documents 0–29, 494 gold triples,
late stopping K = 5): experiments/results/write_levers*.json. The adapters under runs/levers/gpu/ were trained on a
lent GPU in fp32 (write_scaling_gpu.sh; their train_meta_gpu_*.json beside the scores), 180 x 2 once on each device
to show what the device alone changes; the rest on 2 CPU cores. Training tokens are counted with the kit's current
write-row builder and tokenizer (N documents' rows x E). A line recall = a + b log10(tokens) is fitted per decoding
over every point (least squares; a handful of points, so a rough guide, not a law) and solved for the kit's goal
(recall 0.30) and the paper's MW[dev] recall (0.578, Table 4 "+ 10xAnnot.").

    .venv/bin/python experiments/write_scaling.py  # -> results/05_write_scaling.json, figures/05_write_scaling.png

Both outputs sit with notebook 05's (its figure and results), which points to them; the scores it reads stay in
experiments/results/.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from retllm_utils.paths import ROOT

RESULTS = ROOT / "experiments" / "results"
DECODINGS = ("free, late", "constrained, late")  # notebook 06's MW[dev] decoding first
PAPER_RECALL, GOAL_RECALL = 0.578, 0.30
SLICE_GOLD = 494  # gold triples of the slice every point is scored on (write_levers.py --sentences 3)


def tokens_per_epoch(n_docs: int) -> int:
    """SmolLM2 tokens of the write rows of the first `n_docs` training documents (write_levers.train's rows)."""
    from retllm_utils.memllm.config import MemLLMConfig
    from retllm_utils.memllm.dataset import render
    from retllm_utils.memllm.docred import load_docred, relation_names
    from retllm_utils.memllm.examples import build_write_rows
    from retllm_utils.models import load_model
    from retllm_utils.paths import DATA
    from retllm_utils.training import build_sft_dataset

    config = MemLLMConfig.for_profile("cpu")
    red = DATA / "redocred"
    docs, rel = load_docred(red / "test_revised.json"), relation_names(red / "rel_info.json")
    rules = config.as_dict(("seed", "drop_empty", "max_pretext_chars", "empty_evidence", "max_triples"))
    rows, _ = build_write_rows(docs, rel, range(n_docs), split="train", **rules)
    _, tok = load_model("smollm2-135m-instruct", device="cpu")
    return sum(len(x) for x in build_sft_dataset(tok, rows, render, config.max_length)["input_ids"])


def _device(adapter: str) -> str:
    """Where an adapter was trained: its train_meta.json's device, kept beside the scores for the GPU ones."""
    if "/gpu/" not in adapter:
        return "cpu"
    meta = json.loads((RESULTS / f"train_meta_gpu_{adapter.rsplit('/', 1)[-1]}.json").read_text())
    return f"{meta['device']}, {meta['dtype']}"


def points() -> list[dict]:
    """One point per scored adapter in experiments/results/write_levers*.json whose file names N x E."""
    out = []
    for f in sorted(RESULTS.glob("write_levers*.json")):
        report = json.loads(f.read_text())
        for key, scores in report.items():
            m = re.search(r"(\d+) ?(?:x|documents x) ?(\d+)", key) or re.search(r"(\d+)x(\d+)", f.stem)
            if key in ("training", "source", "eval") or not isinstance(scores, dict) or not m:
                continue
            if scores[DECODINGS[0]]["gold"] != SLICE_GOLD:  # scored on another slice: not comparable
                print(f"left out: {key} in {f.name}, scored against {scores[DECODINGS[0]]['gold']} gold triples")
                continue
            n_docs, epochs = int(m.group(1)), int(m.group(2))
            row = {"adapter": key, "file": f.name, "train_docs": n_docs, "epochs": epochs, "device": _device(key)}
            out.append(row | {d: {k: scores[d][k] for k in ("emb. P", "emb. R")} for d in DECODINGS})
    return out


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = points()
    per_doc = {n: tokens_per_epoch(n) for n in sorted({p["train_docs"] for p in pts})}
    for p in pts:
        p["tokens_per_epoch"], p["tokens"] = per_doc[p["train_docs"]], per_doc[p["train_docs"]] * p["epochs"]
    fits = {}
    for d in DECODINGS:
        x = np.log10([p["tokens"] for p in pts])
        y = np.array([p[d]["emb. R"] for p in pts])
        b, a = np.polyfit(x, y, 1)
        fits[d] = {"a": a, "b per decade": b, "points": len(pts)}
        for name, target in (("goal 0.30", GOAL_RECALL), ("paper 0.578", PAPER_RECALL)):
            fits[d][f"tokens for recall {name}"] = 10 ** ((target - a) / b) if b > 0 else math.inf
    same = {}  # one training recipe on both devices: the difference is the device's alone
    for a in pts:
        for b in pts:
            if (a["train_docs"], a["epochs"]) == (b["train_docs"], b["epochs"]) and a["device"] == "cpu" != b["device"]:
                same[f"{a['train_docs']}x{a['epochs']}"] = {
                    d: {m: b[d][m] - a[d][m] for m in ("emb. P", "emb. R")} for d in DECODINGS
                } | {"gpu minus cpu": b["device"]}
    res = {
        "eval": "dev documents 0-29, first 3 focus sentences, 494 gold triples",
        "points": pts,
        "fits": fits,
        "device check": same,
    }
    (ROOT / "results" / "05_write_scaling.json").write_text(json.dumps(res, indent=1) + "\n")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), dpi=100)
    grid = np.logspace(math.log10(min(p["tokens"] for p in pts)) - 0.1, 7, 50)
    for ax, metric in zip(axes, ("emb. R", "emb. P")):
        for d, color in zip(DECODINGS, ("tab:blue", "tab:orange")):
            for gpu in (False, True):
                sel = [p for p in pts if (p["device"] != "cpu") == gpu]
                ax.scatter(
                    [p["tokens"] for p in sel],
                    [p[d][metric] for p in sel],
                    color=color,
                    marker="^" if gpu else "o",
                    label=f"{d} ({'GPU' if gpu else 'CPU'}-trained)",
                    zorder=3,
                )
            for p in pts if d == DECODINGS[0] else ():
                ax.annotate(
                    f"{p['train_docs']}x{p['epochs']}",
                    (p["tokens"], p[d][metric]),
                    fontsize=6,
                    xytext=(3, -8),
                    textcoords="offset points",
                )
            if metric == "emb. R":
                f = fits[d]
                ax.plot(grid, f["a"] + f["b per decade"] * np.log10(grid), color=color, ls="--", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("training tokens (write rows x epochs)")
        ax.set_ylabel(f"write {'recall' if metric == 'emb. R' else 'precision'} (embedding match)")
    axes[0].axhline(PAPER_RECALL, color="k", ls=":", label="paper MW[dev] recall 0.578")
    axes[0].axhline(GOAL_RECALL, color="gray", ls="-.", label="kit goal 0.30")
    axes[0].legend(fontsize=7)
    fig.suptitle("MemLLM write model (SmolLM2-135M) on 30 dev documents vs its training size", fontsize=10)
    fig.tight_layout()
    fig.savefig(ROOT / "figures" / "05_write_scaling.png")
    for p in pts:
        print(p["train_docs"], "x", p["epochs"], p["device"], p["tokens"], {d: p[d] for d in DECODINGS})
    print(json.dumps({"fits": fits, "device check": same}, indent=1))


if __name__ == "__main__":
    main()
