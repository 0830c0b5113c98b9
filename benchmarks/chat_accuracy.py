"""Does a faster decoding path change notebook 03's scores? The test split through the controller, per variant.

    .venv/bin/python benchmarks/chat_accuracy.py --variants bf16     # -> results/chat_accuracy.json

Every variant is `models.for_chat` on notebook 02's cpu adapter (see bench_controller.py's VARIANTS), scored exactly
as notebook 03 scores its "RET-LLM" pass (names copied, answers held to the reply's facts, LSH memory, MiniLM with
the calibrated thresholds); `differs` counts examples whose calls or answer differ from notebook 03's own pass
(`runs/retllm/cpu/test_RET-LLM.jsonl`: the adapter unmerged, fp32), which is the reference row.
"""

from __future__ import annotations

import argparse
import time

from bench_controller import VARIANTS
from common import machine, save_result, set_threads, table


def _row(name: str, t, n: int, differs: int) -> dict:
    """One printed row: the overall scores and the weakest query type of a `summarize` table."""
    return {
        "variant": name,
        "n": n,
        "calls": t.loc["all", "api_em"],
        "answer (facts)": t.loc["all", "facts_acc"],
        "worst type (facts)": t["facts_acc"].drop(["all", "write"], errors="ignore").min(),
        "invented": t.loc["all", "invented_rate"],
        "differs": differs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="bf16", help=f"comma-separated, of: {'; '.join(VARIANTS)}")
    ap.add_argument("--n", type=int, default=None, help="first n test examples (default: all 336)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    variants = [v.strip() for v in a.variants.split(",")]
    if unknown := [v for v in variants if v not in VARIANTS]:
        ap.error(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")

    import pandas as pd
    import torch
    from peft import PeftModel

    from retllm_utils.models import for_chat, load_embedder, load_model
    from retllm_utils.paths import run_dir
    from retllm_utils.retllm.evaluation import evaluate_retllm, summarize
    from retllm_utils.retllm.synthetic import load_synthetic

    set_threads(a.threads)
    rows = list(load_synthetic("cpu", 0)["test"])[: a.n]
    embedder = load_embedder()
    ref_file = run_dir("retllm", "cpu") / "test_RET-LLM.jsonl"
    ref = pd.read_json(ref_file, lines=True).iloc[: len(rows)]
    out = {"notebook 03": _row("notebook 03 (fp32, adapter unmerged)", summarize(ref), len(ref), 0)}
    runs = {}
    for v in variants:
        dtype, compiled = VARIANTS[v]
        base, tok = load_model(device="cpu")
        model = for_chat(
            PeftModel.from_pretrained(base, run_dir("retllm", "cpu") / "adapter"),
            dtype=getattr(torch, dtype),
            compile=compiled,
        )
        t0 = time.perf_counter()
        df = evaluate_retllm(model, tok, rows, embedder, index="lsh", copy_names=True, state_facts=True, desc=v)
        seconds = time.perf_counter() - t0
        assert list(df["id"]) == list(ref["id"]), "the test split is not notebook 03's"
        differs = int(((df["pred_api"] != ref["pred_api"]) | (df["answer"] != ref["answer"])).sum())
        t = summarize(df)
        runs[v] = {"seconds": seconds, "differs": differs, "scores": t.round(4).to_dict(orient="index")}
        out[v] = {**_row(v, t, len(df), differs), "minutes": seconds / 60}
        print(table([out[v]]), flush=True)
    save_result("chat_accuracy", {"benchmark": "chat_accuracy", "runs": runs, "machine": machine()})
    print(table(list(out.values())))


if __name__ == "__main__":
    main()
