"""Write-recall levers for MemLLM's write model (Table 4, notebook 06), measured on a slice of dev beside the notebooks.

Two steps, each optional:
- `--train-docs N --epochs E --adapter-out DIR`: train a write adapter as notebook 05 does (same rows as notebook 04
  builds them, the cpu profile's LoRA and learning rate), on the first N training documents (Re-DocRED test, as the
  kit's training split) for E epochs: a different split of the same CPU budget between documents and epochs. An
  adapter already in DIR that was trained the same way is reused (`training.train_or_reuse`).
- `--adapters A,B --eval-docs a:b --variants ...`: score write adapters on dev documents a..b-1 (`--sentences`: the
  first 3 focus sentences of each, the slice every write-scaling point is scored on; 0 for every sentence, as
  notebook 06's Table 4 on the cpu profile), late stopping K = 5 with greedy read off the same pass, exact and
  embedding-matched P/R. Variants: "free", "constrained" (`WriteGrammar`), "distinct" (constrained, and a subject
  takes each relation once per call: the model cannot loop, so it writes until "})" or the token limit).

    .venv/bin/python experiments/write_levers.py --train-docs 180 --epochs 1 --adapter-out runs/levers/write180x1
    .venv/bin/python experiments/write_levers.py --adapters runs/memllm/cpu/write,runs/levers/write180x1 \
        --eval-docs 0:10 --variants free,constrained --out experiments/results/write_levers.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

from retllm_utils.memllm.config import MemLLMConfig
from retllm_utils.memllm.docred import load_docred, relation_names
from retllm_utils.memllm.examples import build_write_rows, write_examples
from retllm_utils.paths import DATA, ROOT

RED = DATA / "redocred"
CPU = MemLLMConfig.for_profile("cpu")  # the sizes notebooks 04–06 use on the cpu profile


def train(
    n_docs: int, epochs: float, out: Path, *, seed: int = 0, model_id: str = "smollm2-135m-instruct", fp32: bool = False
) -> dict:
    """A write adapter on the first `n_docs` training documents: notebook 04's rows and notebook 05's training
    (`MemLLMConfig`'s cpu profile with these epochs, `training.train_or_reuse`: an adapter already in `out` that was
    trained the same way is reused). `fp32`: fp32 weights and no bf16 autocast on a GPU too, the CPU's arithmetic,
    so that a point trained on a GPU differs from the CPU's points by the device alone."""
    import torch
    import transformers

    from retllm_utils.memllm.dataset import render
    from retllm_utils.models import load_model, pick_device
    from retllm_utils.training import build_sft_dataset, train_or_reuse

    config = MemLLMConfig.for_profile("cpu", seed=seed, epochs=epochs)
    docs, rel = load_docred(RED / "test_revised.json"), relation_names(RED / "rel_info.json")
    rules = config.as_dict(("seed", "drop_empty", "max_pretext_chars", "empty_evidence", "max_triples"))
    rows, _ = build_write_rows(docs, rel, range(n_docs), split="train", **rules)
    model, tok = load_model(model_id, dtype=torch.float32 if fp32 else None)
    ds = build_sft_dataset(tok, rows, render, config.max_length)
    device = pick_device()
    info = {
        "adapter": "write",
        "train_docs": n_docs,
        "device": torch.cuda.get_device_name() if device == "cuda" else device,
        "dtype": str(model.dtype).removeprefix("torch."),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    sft_kw = {"bf16": False} if fp32 else {}
    return train_or_reuse(out, ds, config, model_id=model_id, tokenizer=tok, model=model, info=info, **sft_kw).meta


def evaluate(
    adapter: Path, docs: range, variants: list[str], *, sentences: int = 3, model_id: str = "smollm2-135m-instruct"
) -> dict:
    """Table 4's columns for each variant, greedy and late stopping (K = 5), on the first `sentences` focus sentences
    (0: all) of dev documents `docs`."""
    from peft import PeftModel

    from retllm_utils.memllm.write_quality import table4_scores, write_calls
    from retllm_utils.models import load_embedder, load_model

    dev, rel = load_docred(RED / "dev_revised.json"), relation_names(RED / "rel_info.json")
    rows = {d: write_examples(dev[d], rel, max_pretext_chars=CPU.max_pretext_chars)[: sentences or None] for d in docs}
    gold = {d: [tuple(t) for r in rs for t in r["triples"]] for d, rs in rows.items()}
    model, tok = load_model(model_id)
    model = PeftModel.from_pretrained(model, str(adapter), adapter_name="write").eval()
    emb = load_embedder("all-minilm-l6-v2")
    out: dict[str, Any] = {}
    for v in variants:
        relations = None if v == "free" else list(rel.values())
        t0 = time.perf_counter()
        calls = {
            d: write_calls(
                model,
                tok,
                rs,
                relations=relations,
                distinct_pairs=v == "distinct",
                late_stopping=5,
                max_new_tokens=CPU.max_write_tokens,
            )
            for d, rs in rows.items()
        }
        seconds = time.perf_counter() - t0
        for name, per in (("greedy", {d: [c.greedy for c in cs] for d, cs in calls.items()}), ("late", calls)):
            row = {**table4_scores(per, gold, emb), "seconds": seconds}
            out[f"{v}, {name}"] = row
            print(
                f"{adapter.name} {v}, {name}: "
                + ", ".join(f"{k} {x:.3f}" for k, x in row.items() if k.endswith((" P", " R")))
                + f", {row['triples']} triples / {row['gold']} gold, ends {row[next(k for k in row if 'calls' in k)]}",
                flush=True,
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train-docs", type=int)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--adapter-out", type=Path)
    ap.add_argument("--fp32", action="store_true", help="train in fp32 on a GPU too (the CPU's arithmetic)")
    ap.add_argument("--adapters", default="", help="comma-separated adapter folders to score")
    ap.add_argument("--eval-docs", default="0:10", help="dev documents a:b")
    ap.add_argument("--variants", default="free,constrained")
    ap.add_argument("--sentences", type=int, default=3, help="first N focus sentences per document (0: every one)")
    ap.add_argument("--out", type=Path, help="JSON file for the scores (and training metadata)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    report: dict[str, Any] = {}
    if a.train_docs:
        if a.adapter_out is None:
            ap.error("--train-docs needs --adapter-out")
        meta = train(a.train_docs, a.epochs, a.adapter_out, fp32=a.fp32)
        report["training"] = {k: v for k, v in meta.items() if k != "log_history"}
    lo, hi = (int(x) for x in a.eval_docs.split(":"))
    for adapter in filter(None, a.adapters.split(",")):
        path = Path(adapter)
        report[str(path.relative_to(ROOT) if path.is_absolute() else path)] = evaluate(
            path, range(lo, hi), a.variants.split(","), sentences=a.sentences
        )
        report["eval"] = {"dev_docs": [lo, hi], "sentences": a.sentences or "all"}
    if a.out:
        a.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
