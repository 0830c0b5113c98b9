"""Peak memory of one optimizer step at the gpu profile's micro-batch: notebook 02's RET-LLM adapter and notebook 05's
MemLLM adapters, trained as the notebooks train them (`training.train_or_reuse` with the gpu profile's config:
micro-batches of 4, gradient accumulation, gradient checkpointing), on SmolLM2-135M on the CPU.

    .venv/bin/python -m benchmarks.bench_gpu_memory   # -> benchmarks/results/gpu_memory.json

Every example is exactly the profile's `max_length` tokens (RET-LLM 384, MemLLM 1,024; the notebooks cut or refuse
anything longer), so the micro-batch is the largest the profile lets through: what memory a step needs does not
depend on the words, only on the shapes. The tokens are real text (notebook 01's cpu training examples; Re-DocRED
test documents), every one supervised. A step is `--micro-batches` micro-batches of the profile's `micro_batch`
(default 2 of 4, so the accumulation runs; the profile's whole batch, RET-LLM 8 and MemLLM 4 micro-batches, should
hold no more at once, as accumulating adds into the LoRA gradients the first micro-batch allocates: not measured).
Each paper runs in its own process; peak = the process's peak resident set (getrusage ru_maxrss), beside the
resident set once the model is loaded.

Peak RSS counts the whole process (Python, torch, the tokenizer, the data) with fp32 weights: an upper bound of what
the same model's tensors take on a GPU, where bf16 halves weights and activations; a GPU adds its CUDA context, which
this does not measure. A 7B model is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from benchmarks.common import ROOT, busy_processes, loadavg, machine, rss_mib, save_result, set_threads

PAPERS = ("retllm", "memllm")


def exact_length_rows(paper: str, tokenizer, n: int, length: int) -> dict[str, list[list[int]]]:
    """`n` examples of exactly `length` tokens of real text, every token supervised (labels = input_ids)."""
    if paper == "retllm":
        from retllm_utils.prompts import retllm_example_text

        rows = [json.loads(line) for line in (ROOT / "data/retllm_synthetic/train.jsonl").open(encoding="utf-8")]
        texts = (retllm_example_text(tokenizer, r)[0] for r in rows)
    else:
        docs = json.loads((ROOT / "data/redocred/test_revised.json").read_text(encoding="utf-8"))
        texts = (" ".join(" ".join(s) for s in d["sents"]) for d in docs)
    stream: list[int] = []
    for text in texts:
        stream += tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(stream) >= n * length:
            break
    ids = [stream[i * length : (i + 1) * length] for i in range(n)]
    assert all(len(x) == length for x in ids), "not enough text for the rows"
    return {"input_ids": ids, "labels": [list(x) for x in ids]}


def measure(paper: str, micro_batches: int, steps: int, threads: int) -> dict:
    """One paper's adapter: `steps` optimizer steps of `micro_batches` gpu-profile micro-batches; memory and time."""
    import torch
    from datasets import Dataset

    from retllm_utils.models import load_model
    from retllm_utils.training import train_or_reuse

    torch.set_num_threads(threads)
    set_threads(threads)
    if paper == "retllm":
        from retllm_utils.retllm.config import RetLLMConfig as Config
    else:
        from retllm_utils.memllm.config import MemLLMConfig as Config
    gpu = Config.for_profile("gpu")
    config = gpu.replace(batch_size=gpu.micro_batch * micro_batches, max_steps=steps)
    model, tokenizer = load_model(device="cpu")
    rss_loaded = rss_mib()
    ds = Dataset.from_dict(exact_length_rows(paper, tokenizer, config.batch_size * steps, config.max_length))
    load0 = loadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        meta = train_or_reuse(out, ds, config, model_id="smollm2-135m-instruct", tokenizer=tokenizer, model=model).meta
        seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "paper": paper,
        "notebook": "02" if paper == "retllm" else "05",
        "model": "smollm2-135m-instruct",
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "gpu_profile": {
            "batch_size": gpu.batch_size,
            "micro_batch": gpu.micro_batch,
            "gradient_checkpointing": gpu.gradient_checkpointing,
            "max_length": gpu.max_length,
        },
        "measured": {
            "micro_batch": meta["micro_batch"],
            "grad_accum": meta["grad_accum"],
            "gradient_checkpointing": meta["gradient_checkpointing"],
            "tokens_per_example": config.max_length,
            "steps": meta["steps"],
        },
        "rss_after_model_load_mib": round(rss_loaded),
        "peak_rss_mib": round(peak),
        "train_seconds": round(seconds, 1),
        "threads": threads,
        "loadavg_before": load0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper", choices=[*PAPERS, "all"], default="all")
    ap.add_argument("--micro-batches", type=int, default=2, help="micro-batches per optimizer step")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--one", action="store_true", help="measure --paper in this process and print its JSON")
    ap.add_argument("--out", default="gpu_memory")
    a = ap.parse_args()
    if a.one:
        import warnings

        warnings.filterwarnings("ignore", category=FutureWarning)
        print("RESULT " + json.dumps(measure(a.paper, a.micro_batches, a.steps, a.threads)), flush=True)
        return
    runs = []
    for paper in PAPERS if a.paper == "all" else (a.paper,):
        cmd = [sys.executable, "-m", "benchmarks.bench_gpu_memory", "--one", "--paper", paper]
        cmd += ["--micro-batches", str(a.micro_batches), "--steps", str(a.steps), "--threads", str(a.threads)]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if p.returncode:
            raise SystemExit(f"{paper}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
        run = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))[7:])
        print(
            f"{paper}: micro-batch {run['measured']['micro_batch']} x {run['measured']['tokens_per_example']} tokens,"
            f" {run['measured']['grad_accum']} accumulated, checkpointing {run['measured']['gradient_checkpointing']}:"
            f" peak RSS {run['peak_rss_mib']} MiB (model loaded: {run['rss_after_model_load_mib']} MiB),"
            f" {run['train_seconds']} s",
            flush=True,
        )
        runs.append(run)
    payload = {"what": __doc__.split("\n\n")[0], "runs": runs, "machine": machine(), "busy": busy_processes()}
    print("->", save_result(a.out, payload).relative_to(ROOT))


if __name__ == "__main__":
    main()
