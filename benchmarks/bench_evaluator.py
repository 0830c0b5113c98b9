"""Speed of MemLLM's memory-aware evaluator against the token-by-token reference (notebook 07's speed cell, alone).

    .venv/bin/python benchmarks/bench_evaluator.py              # -> benchmarks/results/evaluator.json
    .venv/bin/python benchmarks/bench_evaluator.py --profile    # and where the fast evaluator's time goes
    .venv/bin/python benchmarks/bench_evaluator.py --merged --out evaluator_epyc_row7_merged --rows "⑦ ⑥ + gold queries"

The setting of notebook 07's speed test on the cpu profile: notebook 05's read adapter (runs/memllm/cpu/read),
the gold memory of every dev document (HNSW, MiniLM, the memory's MemLLM thresholds), the first 3 dev documents cut
to 200 tokens, rows ⑦ (gold queries) and ⑥ (the model's own queries). Per row: one plain forward pass per document
(the floor), the fast evaluator (`perplexity.fast_doc`: one cached pass, a branch per read) and the reference
(`perplexity.reference_doc`: every context run again at every token), their mean NLL, the largest per-token
difference between them (`agree`: below 1e-4, as the tests require) and reference / fast. The fast evaluator is timed
after a warm-up pass of the same row; the reference, which takes minutes, once after it. `--merged` runs both on the
base model with the read adapter merged into its weights (notebook 07 keeps two adapters on one model, unmerged).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
import warnings

import numpy as np

from benchmarks.common import loadavg, machine, save_result, set_threads, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (notebook 07: torch's default, 2 here)")
    ap.add_argument("--docs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--rows", default="⑦ ⑥ + gold queries,⑥ ⑤ + gold positions")
    ap.add_argument("--profile", action="store_true", help="print the fast evaluator's top functions (cProfile)")
    ap.add_argument(
        "--merged",
        action="store_true",
        help="the read adapter merged into the weights (peft merge_and_unload): no LoRA matrices at run time",
    )
    ap.add_argument("--out", default="evaluator", help="benchmarks/results/<out>.json")
    a = ap.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    import torch
    from peft import PeftModel

    from retllm_utils.memllm.dataset import load_or_build
    from retllm_utils.memllm.docred import gold_triples, load_docred, relation_names
    from retllm_utils.memllm.perplexity import TABLE1_ROWS, evaluate, memory_lookup, plain_pass, prepare_doc
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import load_embedder, load_model
    from retllm_utils.paths import DATA, run_dir

    torch.set_num_threads(a.threads)
    set_threads(a.threads)
    dd, _ = load_or_build("cpu")
    dev, rel = load_docred(DATA / "redocred" / "dev_revised.json"), relation_names(DATA / "redocred" / "rel_info.json")
    memory = TripleMemory(None, embedder=load_embedder("all-minilm-l6-v2"), index="hnsw", q_thr=30)
    memory.write_many(list(dict.fromkeys(tuple(t) for d in dev for _, t in gold_triples(d, rel))))
    model, tok = load_model("smollm2-135m-instruct")
    model = PeftModel.from_pretrained(model, str(run_dir("memllm", "cpu") / "read"), adapter_name="read").eval()
    if a.merged:
        model = model.merge_and_unload()
    docs = [prepare_doc(tok, dd["docs_dev"][i], a.max_tokens) for i in range(a.docs)]
    rows, profiles = [], {}
    for name in a.rows.split(","):
        setup, lookup = TABLE1_ROWS[name], memory_lookup(memory)
        plain_s = sum(plain_pass(model, d) for d in docs)
        evaluate(model, tok, docs, setup, lookup)  # warm-up (allocator, the adapter's first calls)
        load0, prof = loadavg()[0], cProfile.Profile()
        if a.profile:
            prof.enable()
        fast, fast_docs = evaluate(model, tok, docs, setup, lookup)
        prof.disable()
        ref, ref_docs = evaluate(model, tok, docs, setup, lookup, fast=False)
        diff = max(float(np.nanmax(np.abs(x.nll - y.nll))) for x, y in zip(fast_docs, ref_docs))
        rows.append(
            {
                "row": name,
                "tokens": sum(len(d.ids) for d in docs),
                "reads (fast / reference)": f"{fast.n_reads} / {ref.n_reads}",
                "mean NLL fast": fast.overall,
                "mean NLL reference": ref.overall,
                "largest per-token difference": diff,
                "agree": diff < 1e-4,
                "plain pass s": plain_s,
                "fast s": fast.seconds,
                "reference s": ref.seconds,
                "speed-up": ref.seconds / fast.seconds,
                "fast / plain pass": fast.seconds / plain_s,
                "profiled": a.profile,
                "loadavg": load0,
            }
        )
        print(table(rows[-1:]), flush=True)
        if a.profile:
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
            profiles[name] = out.getvalue()
            print(profiles[name])
    res = {
        "benchmark": "evaluator",
        "threads": a.threads,
        "merged": a.merged,
        "rows": rows,
        "machine": machine(),
        "time": time.ctime(),
    }
    if not a.profile:  # a profiled run slows the fast evaluator: its speed-up is not the one to keep
        save_result(a.out, res)


if __name__ == "__main__":
    main()
