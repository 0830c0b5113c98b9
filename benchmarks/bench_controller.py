"""End-to-end latency of RET-LLM chat turns (write turns and read turns, `--repeats` of each) on CPU.

    .venv/bin/python benchmarks/bench_controller.py   # -> benchmarks/results/controller.json, figures/08_controller.png

Each turn runs `RetLLMController.chat` as notebook 09's chat does (names copied, answers held to the reply's facts)
with `HFGenerator` on SmolLM2-135M on CPU, once per decoding variant (`models.for_chat`): the LoRA adapter merged in
fp32 with transformers' default (dynamic) KV cache — the path every notebook uses, and the "before" —, bf16 weights,
and a static KV cache with the decoding step compiled by torch.compile, in fp32 and bf16; and, on request (`--variants
llama.cpp --llama-cpp-src DIR`, llama-cpp-python installed), `llamacpp.LlamaCppGenerator`: the shipped Q4_1 GGUF in
llama.cpp with the adapter converted to a GGUF LoRA, the same pauses and processors; and, among the default variants,
the llama.cpp library that `make install` brings (PyPI's prebuilt xllamacpp wheel, `chat.xllama`; no source tree):
`xllamacpp`, the model with the adapter merged into its weights as Q8_0 (`chat.lora_gguf`), as notebook 09 runs it,
drafting by prompt lookup in what the model call has generated so far (`chat.xllama.XLlamaGenerator` draft=16,
draft_from="output": the tokens that followed the last three earlier in that output are checked in one batch, so a
repeated write call is drafted from the first; `drafted` / `draft_kept` count them), `xllamacpp without drafting` (one
token at a time), `xllamacpp + drafting from the context` (prompt lookup in the whole context, the prompt and the
memory's reply included), and `xllamacpp + LoRA at run time`, the shipped Q4_1 GGUF with the adapter converted to a
GGUF LoRA (drafting as notebook 09's engine). Every variant gets the same turns on a fresh copy of the memory, in a
fresh process (`--same-process` runs them all in one: in an earlier run, not kept, llama-cpp-python run after fp32 in
one process measured 1.52 s per read turn against 1.26 s alone);
`same_output` counts turns whose calls and answer equal the first variant's (greedy decoding: a variant that
changes numerics may change a token). A TripleMemory
(the bundled MiniLM encoder; the 100k-triple HNSW memory built by bench_memory.py if present, copied, else
an empty one), on user turns of the synthetic test split. Time is split into
- generation: inside `model.generate`, less the pause checks;
- memory: inside `memory.write` / `memory.read` (of which the encoder: embedding new or fuzzy phrases);
- overhead: the rest (chat template, tokenization, parsing the calls, formatting the reply), of which the
  per-token checks: the pause check (decodes and parses the generated text) and the logits processors that copy
  names and hold the answer to the reply (`processors_ms`).
`tokens` counts the tokens the model generated, a repeated write call that the controller drops included (it is
generated before the controller can tell it repeats one); `generation_ms_per_token` divides the generation time, which
includes evaluating the prompt and the memory's reply, by them.
The first turn of each kind warms up (allocator, caches, and for a compiled variant the compilation; its time is
`warmup_ms`) and is not in the medians.
A broad read (e.g. `>>investor in>>` on 100k triples) matches thousands of triples; the controller hands the
model only the newest `max_results` (30), and `read_dropped` counts the rest.
If notebook 02 trained an adapter under runs/retllm/cpu/ (the whole-sequence one that notebook 09 chats with, else
the masked one) it is loaded with peft and merged; otherwise the base
model, which does not know the API, has the API call forced token by token (as
tests/test_controller.py::test_pause_memory_resume_on_the_real_model), then generates the answer freely.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import (
    CACHE,
    CHAT_TARGETS,
    FIGURES,
    busy_processes,
    loadavg,
    machine,
    save_result,
    set_threads,
    table,
)


def find_adapter(root: Path) -> Path | None:
    """Notebook 09's chat adapter: notebook 02's whole-sequence one, else its masked one (the paper's loss)."""
    hits = [root / d for d in ("adapter_nomask", "adapter") if (root / d / "adapter_config.json").is_file()]
    return hits[0] if hits else None


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
        self._memory = memory

    def __len__(self) -> int:  # copy_names asks the memory's size (it lists stored phrases only from small ones)
        return len(self._memory)

    def __iter__(self):
        return iter(self._memory)


LLAMA_CPP = "llama.cpp"  # optional: llama-cpp-python, the adapter converted to GGUF (retllm_utils.chat.llamacpp)
XLLAMA = "xllamacpp"  # the default install's llama.cpp: PyPI's prebuilt xllamacpp wheel (retllm_utils.chat.xllama)
XLLAMA_LORA = "xllamacpp + LoRA at run time"  # the same library on the shipped Q4_1 GGUF, the adapter not merged
XLLAMA_ONE = "xllamacpp without drafting"  # the merged model, one token at a time
XLLAMA_DRAFT = "xllamacpp + drafting from the context"  # the merged model, prompt lookup in the whole context
DRAFTING = {XLLAMA_ONE: (0, "output"), XLLAMA_DRAFT: (16, "context")}  # (draft, draft_from) unlike notebook 09's
CPP = (LLAMA_CPP, XLLAMA, XLLAMA_LORA, *DRAFTING)  # the variants that run a GGUF and handle the adapter themselves
VARIANTS = {  # name: (weights dtype, static KV cache + compiled decoding step)
    "fp32": ("float32", False),
    "bf16": ("bfloat16", False),
    "fp32 + static cache + compile": ("float32", True),
    "bf16 + static cache + compile": ("bfloat16", True),
    LLAMA_CPP: ("q4_1", False),  # llama.cpp multiplies the 4-bit weights as stored
    XLLAMA: ("q8_0", False),  # the adapter merged into the weights (chat.llamacpp.merged_gguf), as notebook 09 runs
    XLLAMA_LORA: ("q4_1", False),
    XLLAMA_ONE: ("q8_0", False),
    XLLAMA_DRAFT: ("q8_0", False),
}


def llama_cpp_generator(variant: str, adapter: Path, tok, src: str | None, threads: int, max_new_tokens: int):
    """A llama.cpp variant's generator, as notebook 09 builds it (`chat.loading.cpp_generator`)."""
    from retllm_utils.chat.loading import cpp_generator

    engine = "llama.cpp" if variant == LLAMA_CPP else "xllamacpp"
    gen = cpp_generator(engine, adapter, tok, src, threads, max_new_tokens, merged=variant in (XLLAMA, *DRAFTING))
    if variant in DRAFTING:
        gen.draft, gen.draft_from = DRAFTING[variant]
    return gen


MEDIANS = (
    "total_ms",
    "generation_ms",
    "memory_ms",
    "encoder_ms",
    "pause_check_ms",
    "processors_ms",
    "overhead_ms",
    "tokens",
    "drafted",
    "draft_kept",
    "generation_ms_per_token",
    "loadavg",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="turns of each kind (different test examples)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=96, help="per model call, as notebook 09's chat")
    ap.add_argument(
        "--adapter", default="auto", help="'auto' (runs/retllm/cpu/adapter_nomask, else adapter), a path, or 'none'"
    )
    hf = [v for v in VARIANTS if v != LLAMA_CPP]  # xllamacpp comes with `make install`; llama-cpp-python does not
    ap.add_argument("--variants", default=",".join(hf), help=f"comma-separated, of: {'; '.join(VARIANTS)}")
    ap.add_argument("--llama-cpp-src", default=os.environ.get("LLAMA_CPP_SRC"), help="for the llama.cpp variant")
    ap.add_argument("--memory", type=Path, default=CACHE / "memories" / "100k-hnsw.sqlite")
    ap.add_argument("--out", default="controller")
    ap.add_argument(
        "--same-process",
        action="store_true",
        help="run every variant in this process (default: each in a fresh one, so that no variant inherits the "
        "threads and memory of the ones before it)",
    )
    ap.add_argument("--part", type=Path, help=argparse.SUPPRESS)  # internal: one variant's turns to this file
    a = ap.parse_args()
    variants = [v.strip() for v in a.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    if len(variants) > 1 and not a.same_process:
        return run_apart(a, variants)

    import torch
    from transformers import LogitsProcessorList

    from retllm_utils import controller as ctl
    from retllm_utils.chat import copying
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import for_chat, load_embedder, load_model
    from retllm_utils.paths import RUNS
    from retllm_utils.prompts import chat_prompt
    from retllm_utils.retllm.synthetic import company_names, fact_sentence, load_synthetic

    torch.set_num_threads(a.threads)
    set_threads(a.threads)
    adapter = (
        None
        if a.adapter == "none"
        else find_adapter(RUNS / "retllm" / "cpu")
        if a.adapter == "auto"
        else Path(a.adapter)
    )
    mode = f"trained LoRA adapter {os.path.relpath(adapter)} (merged)" if adapter else "base model, API call forced"
    print("model:", mode, flush=True)

    embedder = load_embedder()
    timer = Timed()
    pending_read = ctl.retllm_pending_read
    pause_call = ctl._PauseCriterion.__call__
    ctl._PauseCriterion.__call__ = lambda self, *x, **kw: timer.wrap("pause_check", pause_call)(self, *x, **kw)
    for proc in (copying.CopyTerms, copying.StateFacts):
        proc.__call__ = (lambda call: lambda self, *x, **kw: timer.wrap("processors", call)(self, *x, **kw))(
            proc.__call__
        )
    embedder.encode = timer.wrap("encoder", embedder.encode)

    test = load_synthetic("cpu")["test"]
    # one more example of each kind than timed: the first warms up (allocator, caches, compilation)
    examples = {
        "write": [r for r in test if r["kind"] == "write"][: a.repeats + 1],
        "read": [r for r in test if r["kind"] == "read" and r["triples"]][: a.repeats + 1],
    }
    rows, turns, loads, first = [], [], {}, {}
    for variant in variants:
        dtype, compiled = VARIANTS[variant]
        t0 = time.perf_counter()
        model, tok = load_model(device="cpu")
        if adapter is not None and variant not in CPP:  # llama.cpp applies the converted adapter itself
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        if variant in CPP:
            if adapter is None:
                raise SystemExit(f"the {variant} variant needs a trained adapter")
            cpp = llama_cpp_generator(variant, adapter, tok, a.llama_cpp_src, a.threads, a.max_new_tokens)
            ctl.retllm_pending_read = timer.wrap("pause_check", pending_read)  # called by the generator itself
        else:
            model = for_chat(model, dtype=getattr(torch, dtype), compile=compiled)
            model.generate = timer.wrap("generate", model.generate)
            ctl.retllm_pending_read = pending_read
        loads[variant] = time.perf_counter() - t0
        tmp = Path(tempfile.mkdtemp(prefix="bench_ctl"))
        mem_path = tmp / "memory.sqlite"
        if a.memory.exists():  # a fresh copy per variant: every variant sees the same memory
            for suffix in ("", ".entity.faiss", ".relation.faiss"):
                shutil.copy(f"{a.memory}{suffix}", f"{mem_path}{suffix}")
            memory_desc = f"copy of {os.path.relpath(a.memory)}"
        else:
            memory_desc = "new, empty"
        memory = TripleMemory(mem_path, embedder=embedder, index="hnsw")
        n_before = len(memory)
        warmup = {}
        for kind in ("write", "read"):
            for i, ex in enumerate(examples[kind]):
                memory.write_many(ex["memory"])  # the scene the example assumes (not timed)
                prompt = chat_prompt(tok, ex["user"])
                kw = {"max_new_tokens": a.max_new_tokens}
                if adapter is None:
                    base = tok(prompt, add_special_tokens=False)["input_ids"]
                    full = tok(prompt + ex["api"], add_special_tokens=False)["input_ids"]
                    kw["logits_processor"] = LogitsProcessorList([ctl.ForceThenFree(len(base), full[len(base) :])])
                gen = timer.wrap("generate", cpp) if variant in CPP else ctl.HFGenerator(model, tok, **kw)
                controller = ctl.RetLLMController(
                    gen,
                    TimedMemory(memory, timer),
                    lambda u: chat_prompt(tok, u),
                    copy_names=adapter is not None,
                    known_names=company_names() if adapter is not None else (),
                    answer_form=fact_sentence if adapter is not None else None,
                )
                timer.s.clear()
                drafted0 = (getattr(cpp, "drafted", 0), getattr(cpp, "accepted", 0)) if variant in CPP else (0, 0)
                load0 = loadavg()[0]
                t0 = time.perf_counter()
                turn = controller.chat(ex["user"])
                total = time.perf_counter() - t0
                if i == 0:
                    warmup[kind] = total * 1e3
                    continue
                # generated tokens: the model's own text, kept or not (a repeated write call that ends the turn is
                # generated, then dropped: a "skip" event); the memory's reply is appended, not generated
                n_new = sum(
                    len(tok(e["text"], add_special_tokens=False)["input_ids"])
                    for e in turn.trace
                    if e["event"] in ("model", "skip")
                )
                s = dict(timer.s)
                # the pause check and the processors run inside generate: generation is the model's own time
                checks = s.get("pause_check", 0.0) + s.get("processors", 0.0)
                generation = s.get("generate", 0.0) - checks
                memory_s = s.get("memory", 0.0)
                reads = [e for e in turn.trace if e["event"] == "read"]
                key = (kind, ex["user"])
                first.setdefault(key, (turn.model_text, turn.answer))
                turns.append(
                    {
                        "variant": variant,
                        "kind": kind,
                        "user": ex["user"],
                        "model_text": turn.model_text,
                        "answer": turn.answer,
                        "same_output": first[key] == (turn.model_text, turn.answer),
                        "read_results": sum(len(e["results"]) for e in reads),
                        "read_dropped": sum(e["dropped"] for e in reads),
                        "events": [e["event"] for e in turn.trace],
                        "api_ok": turn.model_text.startswith(ex["api"]),
                        "total_ms": total * 1e3,
                        "generation_ms": generation * 1e3,
                        "memory_ms": memory_s * 1e3,
                        "encoder_ms": s.get("encoder", 0.0) * 1e3,
                        "pause_check_ms": s.get("pause_check", 0.0) * 1e3,
                        "processors_ms": s.get("processors", 0.0) * 1e3,
                        "overhead_ms": (total - generation - memory_s) * 1e3,
                        "tokens": n_new,
                        # prompt lookup (xllamacpp): tokens evaluated ahead in a batch, and of them those kept
                        "drafted": getattr(cpp, "drafted", 0) - drafted0[0] if variant in CPP else 0,
                        "draft_kept": getattr(cpp, "accepted", 0) - drafted0[1] if variant in CPP else 0,
                        "generation_ms_per_token": generation * 1e3 / max(n_new, 1),
                        "loadavg": load0,
                    }
                )
        memory.close()
        shutil.rmtree(tmp)
        for kind in ("write", "read"):
            rs = [r for r in turns if r["kind"] == kind and r["variant"] == variant]
            rows.append(
                {
                    "variant": variant,
                    "turn": kind,
                    "n": len(rs),
                    **{k: float(np.median([r[k] for r in rs])) for k in MEDIANS},
                    "max_total_ms": max(r["total_ms"] for r in rs),
                    "warmup_ms": warmup[kind],
                    "same_output": sum(r["same_output"] for r in rs),
                    "api_ok": sum(r["api_ok"] for r in rs),
                    "read_dropped": sum(r["read_dropped"] for r in rs),
                }
            )
        print(table(rows[-2:], ["variant", "turn", "total_ms", "generation_ms_per_token", "same_output"]), flush=True)
        del model
    if a.part:  # a child of run_apart: hand the turns to the parent
        part = {"mode": mode, "memory": memory_desc, "memory_triples": n_before, "loads": loads, "rows": rows}
        a.part.write_text(json.dumps({**part, "turns": turns, "adapter": adapter and str(adapter)}, default=float))
        return
    finish(a, variants, rows, turns, loads, mode, adapter, memory_desc, n_before)


def run_apart(a: argparse.Namespace, variants: list[str]) -> None:
    """Each variant in a fresh process, one after another; `same_output` then compares with the first variant."""
    parts = []
    with tempfile.TemporaryDirectory(prefix="bench_ctl") as tmp:
        for v in variants:
            part = Path(tmp) / "part.json"
            cmd = [sys.executable, __file__, *sys.argv[1:], "--variants", v, "--part", str(part)]
            subprocess.run(cmd, check=True)
            parts.append(json.loads(part.read_text()))
    turns = [t for p in parts for t in p["turns"]]
    first: dict[tuple[str, str], tuple[str, str]] = {}
    for t in turns:
        key = (t["kind"], t["user"])
        first.setdefault(key, (t["model_text"], t["answer"]))
        t["same_output"] = first[key] == (t["model_text"], t["answer"])
    rows = [r for p in parts for r in p["rows"]]
    for r in rows:
        r["same_output"] = sum(
            t["same_output"] for t in turns if (t["variant"], t["kind"]) == (r["variant"], r["turn"])
        )
    loads = {v: s for p in parts for v, s in p["loads"].items()}
    adapter = parts[0]["adapter"] and Path(parts[0]["adapter"])
    finish(a, variants, rows, turns, loads, parts[0]["mode"], adapter, parts[0]["memory"], parts[0]["memory_triples"])


def finish(
    a: argparse.Namespace,
    variants: list[str],
    rows: list[dict],
    turns: list[dict],
    loads: dict[str, float],
    mode: str,
    adapter: Path | None,
    memory_desc: str,
    n_before: int,
) -> None:
    """Save the results, print the tables, draw the figure."""
    res = {
        "benchmark": "controller",
        "model": "smollm2-135m-instruct (CPU)",
        "mode": mode,
        "adapter": None if adapter is None else os.path.relpath(adapter),
        "controller": "copy_names, known_names, answer_form=fact_sentence (notebook 09's chat)" if adapter else "plain",
        "memory": memory_desc,
        "memory_triples": n_before,
        "index": "hnsw",
        "threads": a.threads,
        "max_new_tokens": a.max_new_tokens,
        "variants": {v: {"dtype": VARIANTS[v][0], "compiled": VARIANTS[v][1], "load_s": loads[v]} for v in variants},
        "processes": "one" if a.same_process or len(variants) == 1 else "one per variant",
        "summary_median": rows,
        "turns": turns,
        "machine": machine(),
        "busy_processes": busy_processes(),
        "loadavg_end": loadavg(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    path = save_result(a.out, res)
    print(
        table(
            rows,
            [
                "variant",
                "turn",
                "n",
                "total_ms",
                "max_total_ms",
                "warmup_ms",
                "generation_ms",
                "memory_ms",
                "overhead_ms",
                "pause_check_ms",
                "processors_ms",
                "tokens",
                "drafted",
                "draft_kept",
                "generation_ms_per_token",
                "same_output",
                "api_ok",
                "loadavg",
            ],
        )
    )
    for r in [t for t in turns if t["variant"] == variants[0]][:1] + [t for t in turns if t["kind"] == "read"][:1]:
        print(f"{r['kind']}: {r['user']!r} -> {r['model_text'][:160]!r}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 0.5 + 0.45 * len(rows)), dpi=100)
    left = np.zeros(len(rows))
    labels = [f"{r['turn']}: {r['variant']}" for r in rows]
    for part, color in (("generation_ms", "tab:blue"), ("memory_ms", "tab:green"), ("overhead_ms", "tab:gray")):
        vals = np.array([r[part] for r in rows])
        ax.barh(labels, vals, left=left, color=color, label=part.replace("_ms", ""))
        left += vals
    for kind in ("write", "read"):
        target = CHAT_TARGETS[f"{kind}_ms"]
        ax.axvline(target, color="tab:red", lw=0.8, ls="--")
        ax.text(target, len(rows) - 0.5, f" {kind} target", color="tab:red", fontsize=7, va="top")
    ax.invert_yaxis()
    ax.set(xlabel="ms per turn (median)", title=f"RET-LLM turn on CPU ({'adapter' if adapter else 'forced API'})")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "08_controller.png")
    print("results:", os.path.relpath(path), " figure:", os.path.relpath(FIGURES / "08_controller.png"))


if __name__ == "__main__":
    main()
