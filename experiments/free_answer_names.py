"""Free answers with their names free, held, and held with their pairs (`answer_names`, `answer_pairs`): notebook 03's
two free-answer passes in each setting.

    .venv/bin/python experiments/free_answer_names.py  # -> experiments/results/free_answer_names.json (~46 min)
    .venv/bin/python experiments/free_answer_names.py --settings "names and pairs held"  # one setting, kept beside

Notebook 03 scores the committed whole-sequence cpu adapter with the answer in the model's own words on its first
168 test examples and the 120 paraphrase examples ("RET-LLM, free answer" in results/03_retllm.json): call terms are
copied, and, with its `answer_names` on, every capitalised word the answer writes must be one of the reply's subjects
and objects or a run of the user's words (`copying.CopyAnswerNames`), and the answer ends at a sentence it says a
second time (`controller.repeated_sentence`); with `answer_pairs` (on in notebook 03) the reply's names one sentence
says must also go together as the reply pairs them. Here the same passes (same adapter, rows, LSH memory, MiniLM,
transformers fp32, names and relations copied, reads by words and likelihood) run with the names free, held, and held
with their pairs; the table prints each setting in the results file.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

from peft import PeftModel
from transformers import set_seed

from retllm_utils.models import load_embedder, load_model
from retllm_utils.paths import ROOT, run_dir
from retllm_utils.retllm.config import RetLLMConfig
from retllm_utils.retllm.evaluation import evaluate_retllm, summarize
from retllm_utils.retllm.synthetic import company_names, load_synthetic, relation_vocabulary

OUT = Path(__file__).resolve().parent / "results" / "free_answer_names.json"


SETTINGS = {"names free": (False, False), "names held": (True, False), "names and pairs held": (True, True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, of: {', '.join(SETTINGS)}")
    settings = ap.parse_args().settings.split(",")
    if unknown := set(settings) - set(SETTINGS):
        raise SystemExit(f"unknown settings {sorted(unknown)}; choose from {list(SETTINGS)}")
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    set_seed(0)
    config = RetLLMConfig.for_profile("cpu", phrasings="wide")
    dd = load_synthetic("cpu", 0, "wide")
    splits = {
        "test": [dd["test"][i] for i in range(config.ablation_n)],
        "paraphrase": [dd["paraphrase"][i] for i in range(len(dd["paraphrase"]))],
    }
    base, tokenizer = load_model("smollm2-135m-instruct")
    model = PeftModel.from_pretrained(base, run_dir("retllm", "cpu") / "adapter_nomask").eval()
    embedder = load_embedder("all-minilm-l6-v2")
    out = json.loads(OUT.read_text()) if OUT.is_file() else {}  # the settings not run here are kept
    for split, examples in splits.items():
        out.setdefault(split, {})
        for name in settings:
            held, pairs = SETTINGS[name]
            t0 = time.perf_counter()
            df = evaluate_retllm(
                model,
                tokenizer,
                examples,
                embedder,
                index="lsh",
                max_new_tokens=config.max_new_tokens,
                copy_names=True,
                known_names=company_names(),
                relation_names=relation_vocabulary(),
                read_relations="likely",
                answer_names=held,
                answer_pairs=pairs,
                desc=f"{split}, {name}",
            )
            secs = time.perf_counter() - t0
            t = summarize(df)
            reads = df[df["kind"] == "read"]
            out[split][name] = {
                "n": len(df),
                "questions": len(reads),
                "facts_acc": float(t.loc["all", "facts_acc"]),
                "answer_acc": float(t.loc["all", "answer_acc"]),
                "invented_rate": float(t.loc["all", "invented_rate"]),
                "per_type_facts_acc": {
                    q: float(v) for q, v in t["facts_acc"].drop(["write", "all"], errors="ignore").items()
                },
                "seconds": secs,
                "misses": [
                    {"id": m["id"], "query_type": m["query_type"], "answer": m["answer"], "invented": m["invented"]}
                    for _, m in reads[~reads["facts_ok"].astype(bool) | reads["invented"].map(bool)].iterrows()
                ],
            }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("| split | free answer | answers (facts) | answers (names) | invented |")
    print("| --- | --- | --- | --- | --- |")
    for split, by_name in out.items():
        for name, r in by_name.items():
            print(f"| {split} | {name} | {r['facts_acc']:.3f} | {r['answer_acc']:.3f} | {r['invented_rate']:.3f} |")
    print(f"-> {OUT.relative_to(ROOT)}; {sum(out[s][n]['seconds'] for s in out for n in settings):.0f} s this run")


if __name__ == "__main__":
    main()
