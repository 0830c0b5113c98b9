"""Relations never trained on: does mixing simple statements over other relations, said in the user's words, into
notebook 02's wide training teach RET-LLM to write and read relations it never saw? (RET-LLM §1, §3: a general
write-read memory.)

The committed adapter (notebook 02, wide build) learnt other relations only from Re-DocRED sentences under Wikidata's
names, and writes none of the held-out relations' statements exactly (notebook 03). This trains a second adapter
on the same rows plus `--open-n` rows of `retllm.open_relations` (simple statements and questions over 22 relations
whose stored name is the predicate as said: "Ann grew up in Lyon" -> (Ann, grew up in, Lyon)), the same recipe as
notebook 02's whole-sequence adapter (cpu profile), and scores both adapters on:

- open relations held out (`open_relations.HELD_OUT`, 8 relations, never in a training row; test-pool people):
  statements (the write call exact; each statement then read back by its relation's question in the same memory)
  and questions over a scene of facts (the read call exact, the answer naming the stored object);
- open relations trained on (the same, test-pool people too);
- notebook 03's test and paraphrase splits (what the new rows cost the five people–company relations) and Re-DocRED's
  held-out relations (`new_relations`). Both adapters decode on xllamacpp with the adapter merged, as notebook 09
  chats (fast on 2 cores; it decoded 12 of 336 test examples differently from transformers fp32 with the adapter merged:
  experiments/results/chat_accuracy_xllamacpp_drafting.json), so compare the two adapters here with each other,
  not with results/03_retllm.json.

    .venv/bin/python experiments/open_relations.py            # -> experiments/results/open_relations.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _people(seed: int) -> dict[str, list[str]]:
    """Notebook 01's name pools for the wide cpu build: open training rows take train people from the far end of the
    train pool, evaluation rows test people."""
    from retllm_utils.paths import DATA
    from retllm_utils.retllm.config import RetLLMConfig
    from retllm_utils.retllm.generator import load_names, name_pools

    c = RetLLMConfig.for_profile("cpu", seed=seed, phrasings="wide")
    sizes = {"train": c.n_train, "validation": c.n_val, "test": c.n_test, "paraphrase": c.n_paraphrase}
    pools = name_pools(
        seed, load_names(DATA / "first_names.txt"), load_names(DATA / "last_names.txt"), sizes, c.scene_size
    )
    return {"train": pools["train"][::-1][:2000], "test": pools["test"]}


def _scores(df: Any) -> dict[str, Any]:
    """One pass per query type: call exact, answers naming the gold names (reads), write P/R, invented, stand-ins."""
    from retllm_utils.retllm.evaluation import summarize

    t = summarize(df)
    keep = [
        "n",
        "api_em",
        "answer_acc",
        "facts_acc",
        "write_precision",
        "write_recall",
        "invented_rate",
        "false_sub_rate",
    ]
    return {
        q: {k: (None if v != v else float(v)) for k, v in r.items() if k in keep}
        for q, r in t.round(6).to_dict(orient="index").items()
    }


def markdown(result: dict[str, Any]) -> str:
    """The comparison table experiments/README.md shows, from the saved JSON."""
    p = result["passes"]
    names = list(p)

    def cell(path: list[str]) -> str:
        vals = []
        for n in names:
            v: Any = p[n]
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            vals.append("–" if v is None else f"{v:.3f}")
        return " | ".join(vals)

    back, sc = "per_relation_write_read_back", "scores"
    rows = [
        (
            "held-out open relations, statements: first fact written exactly",
            ["held-out relations", back, "all", "write_exact"],
        ),
        ("  every fact of the statement written exactly", ["held-out relations", back, "all", "writes_all"]),
        (
            "  names exact, relation matched by meaning",
            ["held-out relations", back, "all", "write_names_relation_fuzzy"],
        ),
        ("  read back: the answer names the object", ["held-out relations", back, "all", "answer_ok"]),
        ("held-out open relations, questions: read call exact", ["held-out relations", sc, "per_rel", "api_em"]),
        ("  the answer names the stored object", ["held-out relations", sc, "per_rel", "answer_acc"]),
        ("trained open relations: first fact written exactly", ["trained relations", back, "all", "write_exact"]),
        ("  questions: read call exact", ["trained relations", sc, "per_rel", "api_em"]),
        ("  questions: the answer names the stored object", ["trained relations", sc, "per_rel", "answer_acc"]),
        ("test split: calls exact", ["test", sc, "all", "api_em"]),
        ("  answers (facts)", ["test", sc, "all", "facts_acc"]),
        ("  statements written exactly", ["test", sc, "write", "api_em"]),
        ("paraphrase split: calls exact", ["paraphrase", sc, "all", "api_em"]),
        ("  answers (facts)", ["paraphrase", sc, "all", "facts_acc"]),
        ("  statements written exactly", ["paraphrase", sc, "write", "api_em"]),
        (
            "Re-DocRED held-out relations: names exact",
            ["Re-DocRED held-out relations", "per_relation", "all", "names_exact"],
        ),
        (
            "  names exact, relation matched by meaning",
            ["Re-DocRED held-out relations", "per_relation", "all", "write_names_relation_fuzzy"],
        ),
        (
            "  read back: the answer names the object",
            ["Re-DocRED held-out relations", "per_relation", "all", "answer_ok"],
        ),
    ]
    out = [f"| pass (xllamacpp) | {' | '.join(names)} |", "| --- |" + " --- |" * len(names)]
    out += [f"| {label.replace('  ', '… ')} | {cell(path)} |" for label, path in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--open-n", type=int, default=360, help="open-relation training rows (half statements)")
    ap.add_argument("--eval-n", type=int, default=96, help="held-out evaluation rows (half statements)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--adapter-out", default="runs/retllm/cpu/open_relations/adapter_nomask")
    ap.add_argument("--skip-splits", action="store_true", help="leave out the test, paraphrase and Re-DocRED passes")
    ap.add_argument("--skip-committed", action="store_true", help="score only the new adapter")
    ap.add_argument("--out", default="open_relations")
    a = ap.parse_args()

    import torch

    from benchmarks.common import machine, save_result
    from retllm_utils.chat.loading import cpp_generator
    from retllm_utils.models import load_embedder, load_model
    from retllm_utils.paths import ROOT, run_dir
    from retllm_utils.prompts import retllm_example_text
    from retllm_utils.retllm import open_relations as op
    from retllm_utils.retllm.config import RetLLMConfig
    from retllm_utils.retllm.evaluation import evaluate_retllm
    from retllm_utils.retllm.new_relations import evaluate_new_relations, summarize_new_relations
    from retllm_utils.retllm.synthetic import company_names, load_synthetic
    from retllm_utils.training import build_sft_dataset, train_or_reuse

    torch.set_num_threads(a.threads)
    config = RetLLMConfig.for_profile("cpu", seed=a.seed, phrasings="wide")
    dd = load_synthetic("cpu", a.seed, "wide")
    people = _people(a.seed)
    open_train = op.rows(a.open_n, people["train"], held_out=False, seed=a.seed, split="train")
    _, tok = load_model()
    rows = [dict(r) for r in dd["train"]] + open_train
    train_ds = build_sft_dataset(tok, rows, retllm_example_text, config.max_length, mask=False)
    out_dir = ROOT / a.adapter_out
    info = {"experiment": "open_relations", "open_rows": a.open_n, "wide_rows": dd["train"].num_rows}
    meta = train_or_reuse(out_dir, train_ds, config, model_id="smollm2-135m-instruct", tokenizer=tok, info=info).meta
    print(f"trained {meta['train_seconds'] / 60:.1f} min, {meta['steps']} steps, {meta.get('tokens_per_epoch')} tokens")

    embedder = load_embedder()
    evals = {
        "held-out relations": op.rows(a.eval_n, people["test"], held_out=True, seed=a.seed, split="open_test"),
        "trained relations": op.rows(a.eval_n // 2, people["test"], held_out=False, seed=a.seed, split="open_test"),
    }
    adapters = {"committed (notebook 02)": run_dir("retllm", "cpu") / "adapter_nomask", "with open relations": out_dir}
    if a.skip_committed:
        del adapters["committed (notebook 02)"]
    result: dict[str, Any] = {
        "experiment": "open_relations",
        "decoding": "xllamacpp, adapter merged (Q8_0), names copied, answers state reply facts, lsh index",
        "open_rows": a.open_n,
        "held_out": list(op.HELD_OUT),
        "train": {k: meta.get(k) for k in ("train_seconds", "steps", "tokens_per_epoch", "examples")},
        "passes": {},
    }
    save = lambda: save_result(a.out, {**result, "machine": machine()}, RESULTS)  # noqa: E731
    common = dict(index="lsh", copy_names=True, known_names=company_names())
    for label, adapter in adapters.items():
        gen = cpp_generator("xllamacpp", adapter, tok, None, a.threads, 128)
        res = result["passes"].setdefault(label, {})
        for name, ev in evals.items():
            t0, said = time.perf_counter(), {r["id"]: r["user"] for r in ev}
            df = evaluate_retllm(None, tok, ev, embedder, state_facts=True, generator=gen, desc=name, **common)
            stmts = [r for r in ev if r["kind"] == "write"]
            back = evaluate_new_relations(
                None,
                tok,
                stmts,
                embedder,
                generator=gen,
                question_of=op.question,
                prefill=True,
                desc=f"{name}, read back",
                **common,
            )
            res[name] = {
                "seconds": time.perf_counter() - t0,
                "scores": _scores(df),
                "per_relation_write_read_back": summarize_new_relations(back).round(6).to_dict(orient="index"),
                "examples": [
                    {"user": r.user, "gold": r.gold, "written": r.written, "question": r.question, "answer": r.answer}
                    for r in back.head(8).itertuples()
                ],
                "read_examples": [
                    {"user": said[i], "gold": g, "got": p, "answer": s}
                    for i, g, p, s in df[df["kind"] == "read"][["id", "gold_api", "pred_api", "answer"]].head(8).values
                ],
            }
            print(label, name, json.dumps(res[name]["scores"].get("all")), flush=True)
            save()
        if not a.skip_splits:
            for split in ("test", "paraphrase"):
                t0 = time.perf_counter()
                df = evaluate_retllm(
                    None, tok, list(dd[split]), embedder, state_facts=True, generator=gen, desc=split, **common
                )
                writes = df[df["kind"] == "write"]
                res[split] = {
                    "seconds": time.perf_counter() - t0,
                    "scores": _scores(df),
                    "writes_exact_by_phrasing": writes.groupby("phrasing")["api_em"]
                    .agg(["sum", "size"])
                    .to_dict("index"),
                }
                print(label, split, json.dumps(res[split]["scores"].get("all")), flush=True)
                save()
            t0 = time.perf_counter()
            nr = evaluate_new_relations(None, tok, list(dd["new_relations"]), embedder, generator=gen, **common)
            res["Re-DocRED held-out relations"] = {
                "seconds": time.perf_counter() - t0,
                "per_relation": summarize_new_relations(nr).round(6).to_dict(orient="index"),
            }
            save()
    print(
        json.dumps(
            {k: {n: v["scores"]["all"] for n, v in p.items() if "scores" in v} for k, p in result["passes"].items()},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
