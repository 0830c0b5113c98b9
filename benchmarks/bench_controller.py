"""End-to-end latency of RET-LLM chat turns (one write turn, one read turn) with the default model on CPU.

    .venv/bin/python benchmarks/bench_controller.py            # -> results/controller.json, figures/08_controller.png

Each turn runs `RetLLMController.chat` with `HFGenerator` on SmolLM2-135M (fp32, CPU) and a TripleMemory
(the bundled MiniLM encoder; the 100k-triple HNSW memory built by bench_memory.py if present, copied, else
an empty one), on user turns of the synthetic test split. Time is split into
- generation: inside `model.generate`, less the pause checks;
- memory: inside `memory.write` / `memory.read` (of which the encoder: embedding new or fuzzy phrases);
- overhead: the rest (chat template, tokenization, the pause check that decodes and parses the generated
  text after each token, parsing the calls, formatting the reply).
A broad read (e.g. `>>investor in>>` on 100k triples) matches thousands of triples; the controller hands the
model only the newest `max_results` (30), and `read_dropped` counts the rest.
If a trained LoRA adapter exists under runs/retllm/cpu/ it is loaded with peft and merged; otherwise the base
model, which does not know the API, has the API call forced token by token (as
tests/test_controller.py::test_pause_memory_resume_on_the_real_model), then generates the answer freely.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from common import CACHE, FIGURES, busy_processes, loadavg, machine, save_result, set_threads, table


def find_adapter(root: Path) -> Path | None:
    hits = sorted(root.glob("**/adapter_config.json")) if root.is_dir() else []
    return hits[0].parent if hits else None


class Timed:
    """Accumulates seconds spent in wrapped callables, by label."""

    def __init__(self):
        self.s: dict[str, float] = {}

    def wrap(self, label, fn):
        def inner(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.s[label] = self.s.get(label, 0.0) + time.perf_counter() - t0

        return inner


class TimedMemory:
    """The memory as the controller sees it (write, read), timed."""

    def __init__(self, memory, timer: Timed):
        self.write = timer.wrap("memory", memory.write)
        self.read = timer.wrap("memory", memory.read)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="turns of each kind (different test examples)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--adapter", default="auto", help="'auto' (runs/retllm/cpu), a path, or 'none'")
    ap.add_argument("--memory", type=Path, default=CACHE / "memories" / "100k-hnsw.sqlite")
    ap.add_argument("--out", default="controller")
    a = ap.parse_args()

    import torch
    from transformers import LogitsProcessorList

    from retllm_utils import controller as ctl
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import load_embedder, load_model
    from retllm_utils.paths import RUNS
    from retllm_utils.prompts import chat_prompt
    from retllm_utils.retllm.synthetic import load_synthetic

    torch.set_num_threads(a.threads)
    set_threads(a.threads)
    t0 = time.perf_counter()
    model, tok = load_model(device="cpu")
    load_s = time.perf_counter() - t0
    adapter = (
        None
        if a.adapter == "none"
        else find_adapter(RUNS / "retllm" / "cpu")
        if a.adapter == "auto"
        else Path(a.adapter)
    )
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().eval()
    mode = f"trained LoRA adapter {os.path.relpath(adapter)} (merged)" if adapter else "base model, API call forced"
    print("model:", mode, flush=True)

    embedder = load_embedder()
    tmp = Path(tempfile.mkdtemp(prefix="bench_ctl"))
    mem_path = tmp / "memory.sqlite"
    if a.memory.exists():
        for suffix in ("", ".entity.faiss", ".relation.faiss"):
            shutil.copy(f"{a.memory}{suffix}", f"{mem_path}{suffix}")
        memory_desc = f"copy of {os.path.relpath(a.memory)}"
    else:
        memory_desc = "new, empty"
    memory = TripleMemory(mem_path, embedder=embedder, index="hnsw")
    n_before = len(memory)

    timer = Timed()
    model.generate = timer.wrap("generate", model.generate)
    pause_call = ctl._PauseCriterion.__call__
    ctl._PauseCriterion.__call__ = lambda self, *x, **kw: timer.wrap("pause_check", pause_call)(self, *x, **kw)
    embedder.encode = timer.wrap("encoder", embedder.encode)

    test = load_synthetic("cpu")["test"]
    # one more example of each kind than timed: the first warms up (allocator, caches) and is not recorded
    examples = {
        "write": [r for r in test if r["kind"] == "write"][: a.repeats + 1],
        "read": [r for r in test if r["kind"] == "read" and r["triples"]][: a.repeats + 1],
    }
    rows, turns = [], []
    for kind in ("write", "read"):
        for i, ex in enumerate(examples[kind]):
            memory.write_many(ex["memory"])  # the scene the example assumes (not timed)
            prompt = chat_prompt(tok, ex["user"])
            kw = {"max_new_tokens": a.max_new_tokens}
            if adapter is None:
                base = tok(prompt, add_special_tokens=False)["input_ids"]
                full = tok(prompt + ex["api"], add_special_tokens=False)["input_ids"]
                kw["logits_processor"] = LogitsProcessorList([ctl.ForceThenFree(len(base), full[len(base) :])])
            gen = ctl.HFGenerator(model, tok, **kw)
            controller = ctl.RetLLMController(gen, TimedMemory(memory, timer), lambda u: chat_prompt(tok, u))
            timer.s.clear()
            load0 = loadavg()[0]
            t0 = time.perf_counter()
            turn = controller.chat(ex["user"])
            total = time.perf_counter() - t0
            if i == 0:
                continue
            # generated tokens: the model's own text (the memory's reply is appended, not generated)
            n_new = sum(
                len(tok(e["text"], add_special_tokens=False)["input_ids"]) for e in turn.trace if e["event"] == "model"
            )
            s = dict(timer.s)
            generation = s.get("generate", 0.0) - s.get("pause_check", 0.0)
            memory_s = s.get("memory", 0.0)
            reads = [e for e in turn.trace if e["event"] == "read"]
            rec = {
                "kind": kind,
                "user": ex["user"],
                "model_text": turn.model_text,
                "answer": turn.answer,
                "read_results": sum(len(e["results"]) for e in reads),
                "read_dropped": sum(e["dropped"] for e in reads),
                "events": [e["event"] for e in turn.trace],
                "api_ok": turn.model_text.startswith(ex["api"]),
                "total_ms": total * 1e3,
                "generation_ms": generation * 1e3,
                "memory_ms": memory_s * 1e3,
                "encoder_ms": s.get("encoder", 0.0) * 1e3,
                "pause_check_ms": s.get("pause_check", 0.0) * 1e3,
                "overhead_ms": (total - generation - memory_s) * 1e3,
                "tokens": n_new,
                "generation_ms_per_token": generation * 1e3 / max(n_new, 1),
                "loadavg": load0,
            }
            turns.append(rec)
    for kind in ("write", "read"):
        rs = [r for r in turns if r["kind"] == kind]
        med = {
            k: float(np.median([r[k] for r in rs]))
            for k in (
                "total_ms",
                "generation_ms",
                "memory_ms",
                "encoder_ms",
                "pause_check_ms",
                "overhead_ms",
                "tokens",
                "generation_ms_per_token",
                "loadavg",
            )
        }
        rows.append(
            {
                "turn": kind,
                "n": len(rs),
                **med,
                "max_total_ms": max(r["total_ms"] for r in rs),
                "read_dropped": sum(r["read_dropped"] for r in rs),
            }
        )
    res = {
        "benchmark": "controller",
        "model": "smollm2-135m-instruct (fp32, CPU)",
        "mode": mode,
        "adapter": None if adapter is None else os.path.relpath(adapter),
        "memory": memory_desc,
        "memory_triples": n_before,
        "index": "hnsw",
        "threads": a.threads,
        "max_new_tokens": a.max_new_tokens,
        "model_load_s": load_s,
        "summary_median": rows,
        "turns": turns,
        "machine": machine(),
        "busy_processes": busy_processes(),
        "loadavg_end": loadavg(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    memory.close()
    shutil.rmtree(tmp)
    path = save_result(a.out, res)
    print(
        table(
            rows,
            [
                "turn",
                "n",
                "total_ms",
                "max_total_ms",
                "read_dropped",
                "generation_ms",
                "memory_ms",
                "encoder_ms",
                "overhead_ms",
                "pause_check_ms",
                "tokens",
                "generation_ms_per_token",
                "loadavg",
            ],
        )
    )
    for r in turns[:1] + [t for t in turns if t["kind"] == "read"][:1]:
        print(f"{r['kind']}: {r['user']!r} -> {r['model_text'][:160]!r}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.4), dpi=100)
    left = np.zeros(len(rows))
    for part, color in (("generation_ms", "tab:blue"), ("memory_ms", "tab:green"), ("overhead_ms", "tab:gray")):
        vals = np.array([r[part] for r in rows])
        ax.barh([r["turn"] for r in rows], vals, left=left, color=color, label=part.replace("_ms", ""))
        left += vals
    ax.set(xlabel="ms per turn (median)", title=f"RET-LLM turn on CPU ({'adapter' if adapter else 'forced API'})")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "08_controller.png")
    print("results:", os.path.relpath(path), " figure: figures/08_controller.png")


if __name__ == "__main__":
    main()
