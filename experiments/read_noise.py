"""Row ③ with a read adapter trained on replies as poor as the write model's memory (MemLLM Table 1, notebook 07).

Notebook 05's read adapter trains on replies from a simulated memory that keeps 70% of the gold triples (recall
~0.7); the memory it reads in row ③, MW[dev], was written by the kit's write model: recall 0.197, precision 0.340
(notebook 06, late stopping, embedding match). This trains a second read adapter exactly as notebook 05 trains its
own (the cpu profile's rows, LoRA and schedule) but with the simulated memory at the write model's quality
(`memory_drop` 0.8: recall ~0.2; `memory_wrong` 1.9 wrong triples per kept one: precision ~0.35), then scores rows
#2, ③, ⑤ and ⑦ with it on the 30 documents notebook 07 scores, and #2 − ③ with paired 95% intervals, beside the
committed adapter's rows from results/07_table1.json (not re-run here).

    .venv/bin/python experiments/read_noise.py   # -> runs/levers/read_noisy, experiments/results/read_noise.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from retllm_utils.memllm.config import MemLLMConfig
from retllm_utils.paths import DATA, ROOT, run_dir

RED = DATA / "redocred"
ROWS = ("#2 read model, memory disabled", "③ MW[dev] memory", "⑤ gold dev triples", "⑦ ⑥ + gold queries")


def train(config: MemLLMConfig, out: Path, model_id: str) -> tuple[dict, dict]:
    """The read adapter on notebook 04's read rows rebuilt with `config`'s simulated memory (`train_or_reuse`)."""
    from retllm_utils.memllm.dataset import make_dataset, render, training_rows
    from retllm_utils.memllm.docred import load_docred, relation_names
    from retllm_utils.models import load_model
    from retllm_utils.training import build_sft_dataset, train_or_reuse

    t0 = time.perf_counter()
    train_docs, dev_docs = load_docred(RED / "test_revised.json"), load_docred(RED / "dev_revised.json")
    dd, counts = make_dataset(train_docs, dev_docs[:3], relation_names(RED / "rel_info.json"), config)
    print(f"read rows built in {time.perf_counter() - t0:.0f} s; simulated memory {counts['memory']}", flush=True)
    _, tok = load_model(model_id, device="cpu")
    ds = build_sft_dataset(tok, training_rows(dd, "read", config), render, config.max_length)
    info = {"adapter": "read", "memory": counts["memory"]}
    return train_or_reuse(out, ds, config, model_id=model_id, tokenizer=tok, info=info).meta, counts["memory"]


def score(adapter: Path, model_id: str, seed: int, n_docs: int | None = None, doc_tokens: int | None = None) -> dict:
    """Rows #2, ③, ⑤, ⑦ on notebook 07's documents, and the ③ − #2 intervals, with the read adapter in `adapter`."""
    from peft import PeftModel

    from retllm_utils.memllm.dataset import load_or_build
    from retllm_utils.memllm.docred import gold_triples, load_docred, relation_names
    from retllm_utils.memllm.perplexity import (
        TABLE1_ROWS,
        aggregate,
        claim_intervals,
        evaluate,
        memory_lookup,
        prepare_doc,
    )
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import load_embedder, load_model

    c = MemLLMConfig.for_profile("cpu", seed=seed)
    dd, _ = load_or_build("cpu", seed=seed)
    dev, rel = load_docred(RED / "dev_revised.json"), relation_names(RED / "rel_info.json")
    mw = json.loads((run_dir("memllm", "cpu") / "mw_dev.json").read_text())  # notebook 06's MW[dev]
    embedder = load_embedder("all-minilm-l6-v2")

    def memory(triples):
        mem = TripleMemory(None, embedder=embedder, index="hnsw", q_thr=c.q_thr)
        mem.write_many(list(dict.fromkeys(tuple(t) for t in triples)))
        return mem

    memories = {"mw_dev": memory(mw["triples"]), "gold_dev": memory(t for d in dev for _, t in gold_triples(d, rel))}
    model, tok = load_model(model_id)
    model = PeftModel.from_pretrained(model, str(adapter), adapter_name="read").eval()
    n = min(n_docs or c.n_eval_docs, mw["n_docs"])
    docs = [prepare_doc(tok, dd["docs_dev"][i], doc_tokens or c.max_doc_tokens) for i in range(n)]
    per_doc, rows, queries = {}, {}, {}
    for name in ROWS:
        setup = TABLE1_ROWS[name]
        lookup = memory_lookup(memories[setup.memory]) if setup.memory else None
        s, per_doc[name] = evaluate(
            model, tok, docs, setup, lookup, max_query_tokens=c.max_query_tokens, query_cache=queries
        )
        rows[name] = {"OVERALL": s.overall, "TARGET": s.target, "ENTITY": s.entity, "reads": s.n_reads}
        rows[name] |= {"read points": s.n_attempts, "seconds": s.seconds}
        print(name, {k: round(v, 3) for k, v in rows[name].items()}, flush=True)
    assert aggregate(docs, per_doc[ROWS[0]]).overall == rows[ROWS[0]]["OVERALL"]
    pairs = [(ROWS[0], ROWS[1]), (ROWS[0], ROWS[2])]  # (a, b): the claim b < a
    return {"documents": len(docs), "rows": rows, "intervals": claim_intervals(docs, per_doc, pairs, seed=seed)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drop", type=float, default=0.8, help="share of gold triples left out of the training memory")
    ap.add_argument("--wrong", type=float, default=1.9, help="wrong triples per kept one")
    ap.add_argument("--adapter-out", type=Path, default=ROOT / "runs/levers/read_noisy")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/read_noise.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-id", default="smollm2-135m-instruct")
    ap.add_argument("--smoke", action="store_true", help="a check of the script: 2 steps, 1 document cut to 96 tokens")
    a = ap.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    small = dict(n_train=3, n_train_write=3, max_steps=2) if a.smoke else {}
    config = MemLLMConfig.for_profile("cpu", seed=a.seed, memory_drop=a.drop, memory_wrong=a.wrong, **small)
    meta, memory = train(config, a.adapter_out, a.model_id)
    report = {
        "training memory": {"memory_drop": a.drop, "memory_wrong": a.wrong, **memory},
        "training": {k: v for k, v in meta.items() if k != "log_history"},
        "noisy-reply read adapter": score(a.adapter_out, a.model_id, a.seed, *((1, 96) if a.smoke else ())),
    }
    committed = json.loads((ROOT / "results/07_table1.json").read_text())
    report["committed read adapter (results/07_table1.json)"] = {
        "rows": {k: v for k, v in committed["table1_written_docs"].items() if k in ROWS},
        "intervals": [r for r in committed["intervals"] if r["claim"] == "③ < #2"],
    }
    a.out.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=float) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
