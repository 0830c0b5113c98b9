"""Does a faster decoding path change notebook 03's scores? The test split through the controller, per variant.

    .venv/bin/python experiments/chat_accuracy.py --variants bf16     # -> experiments/results/chat_accuracy.json
    .venv/bin/python experiments/chat_accuracy.py --variants llama.cpp --llama-cpp-src DIR --out chat_accuracy_llamacpp
    .venv/bin/python experiments/chat_accuracy.py --variants xllamacpp --loss whole_sequence \
        --out chat_accuracy_xllamacpp_whole_sequence   # the prebuilt llama.cpp, notebook 09's default engine
    .venv/bin/python experiments/chat_accuracy.py --variants xllamacpp --loss whole_sequence --notebook-03 \
        --out chat_accuracy_xllamacpp_notebook03       # with every rule notebook 03 decodes with today

Every variant is notebook 02's cpu adapter on one of benchmarks/bench_controller.py's decoding paths
(`models.for_chat`; llama-cpp-python with the adapter converted to a GGUF LoRA; or the prebuilt xllamacpp with the
adapter merged into the weights as Q8_0, as notebook 09 runs it), scored as notebook 03 scored its passes when the
first of these ran (names copied, answers held to the reply's facts, LSH memory, MiniLM with the calibrated thresholds),
or, with `--notebook-03`, with every rule notebook 03's parameters turn on by default now (the relation rules, the read
rules, the write rules, the answer's names held and the reply's facts in order); `differs`
counts examples whose calls or answer differ from notebook 03's own pass of the same adapter (the adapter
unmerged, fp32), the reference row:
`--loss paper` (the default: the adapter the controller benchmark times) is notebook 03's "paper's loss mask" pass,
`--loss whole_sequence` its "RET-LLM" pass. Without notebook 03's rows under runs/ (a checkout with the committed
adapters but notebook 03 not re-run) the first variant is the reference instead.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.bench_controller import CPP, VARIANTS, llama_cpp_generator
from benchmarks.common import machine, save_result, set_threads, table

RESULTS = Path(__file__).resolve().parent / "results"  # experiments/results/


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
    ap.add_argument(
        "--loss", choices=("paper", "whole_sequence"), default="paper", help="which of notebook 02's adapters"
    )
    ap.add_argument("--phrasings", default="wide", help="the synthetic build notebook 03 scored (its default: wide)")
    ap.add_argument("--llama-cpp-src", default=os.environ.get("LLAMA_CPP_SRC"), help="for the llama.cpp variant")
    ap.add_argument("--out", default="chat_accuracy")
    ap.add_argument("--notebook-03", action="store_true", help="decode with notebook 03's default rules (see above)")
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
    from retllm_utils.retllm.synthetic import company_names, load_synthetic, relation_vocabulary

    set_threads(a.threads)
    rows = list(load_synthetic("cpu", 0, a.phrasings)["test"])[: a.n]
    embedder = load_embedder()
    adapter = run_dir("retllm", "cpu") / {"paper": "adapter", "whole_sequence": "adapter_nomask"}[a.loss]
    ref_file = run_dir("retllm", "cpu") / {"paper": "test_RET-LLM_papers_loss_mask.jsonl"}.get(
        a.loss, "test_RET-LLM.jsonl"
    )
    ref, reference = None, variants[0]
    out = {}
    if ref_file.is_file():
        ref, reference = pd.read_json(ref_file, lines=True).iloc[: len(rows)], ref_file.name
        out = {"notebook 03": _row("notebook 03 (fp32, adapter unmerged)", summarize(ref), len(ref), 0)}
    rules = {}
    if a.notebook_03:  # notebook 03's parameters' defaults, as its RET-LLM passes pass them to evaluate_retllm
        rules = dict(
            relation_names=relation_vocabulary(),
            read_relations="likely",
            answer_names=True,
            facts_in_order=True,
            either_order=True,
            either_role=True,
            read_names_from_user=True,
            coordinated_writes=True,
            named_writes=True,
            write_every_name=True,
        )
    runs = {}
    for v in variants:
        dtype, compiled = VARIANTS[v]
        base, tok = load_model(device="cpu")
        if v in CPP:
            generator = llama_cpp_generator(v, adapter, tok, a.llama_cpp_src, a.threads, 128)
            model = None
        else:
            model = for_chat(PeftModel.from_pretrained(base, adapter), dtype=getattr(torch, dtype), compile=compiled)
            generator = None
        t0 = time.perf_counter()
        df = evaluate_retllm(
            model,
            tok,
            rows,
            embedder,
            index="lsh",
            copy_names=True,
            state_facts=True,
            known_names=company_names(),  # as notebook 03
            desc=v,
            generator=generator,
            **rules,
        )
        seconds = time.perf_counter() - t0
        ref = df if ref is None else ref
        assert list(df["id"]) == list(ref["id"]), "the test split is not the reference's"
        differs = int(((df["pred_api"] != ref["pred_api"]) | (df["answer"] != ref["answer"])).sum())
        t = summarize(df)
        runs[v] = {
            "adapter": str(adapter.relative_to(adapter.parents[2])),
            "reference": reference,
            "rules": sorted(rules) or "names copied, answers held to the reply's facts",
            "seconds": seconds,
            "differs": differs,
            "scores": t.round(6).to_dict(orient="index"),  # 4 digits rounded 206/226 to 0.9115, printed 0.911
        }
        out[v] = {**_row(v, t, len(df), differs), "minutes": seconds / 60}
        print(table([out[v]]), flush=True)
    save_result(a.out, {"benchmark": "chat_accuracy", "runs": runs, "machine": machine()}, RESULTS)
    print(table(list(out.values())))


if __name__ == "__main__":
    main()
