"""The gpu profile's code on the CPU: every numbered notebook executed with `profile = "gpu"`, its sizes shrunk through
papermill parameters, so what only the gpu profile does runs on a machine without a GPU.

What runs as on a GPU machine: notebook 01 builds the paper-size RET-LLM data set (10,000 / 500 / 1,200 / 600
examples) and notebooks 02–03 load it; 02 and 05 train through micro-batches with gradient accumulation and
gradient checkpointing on (the gpu profile's recipe; here batches of 2 as 2 micro-batches of 1, one or two optimizer
steps); notebook 04 builds the MemLLM data set with the gpu profile's rules (every document of the file, pretexts
of 1,500 characters), from the first documents of Re-DocRED (`train_path` / `dev_path`), and 06–07 score it with
small sizes; figures and results go to runs/gpu/ (here a temporary RETLLM_RUNS), never to figures/ or results/.

Part of `make test`: each notebook's sizes are shrunk (its time is printed per notebook with `pytest -s`;
docs/running.md gives a measured run).

What does not run without a GPU (docs/running.md, "The gpu profile"): bf16 / fp16 weights and bf16 training
(`models.default_dtype`, `training.sft_config`), loading a hub model (`model_id` a hub id) and the paper's models
themselves, and FSDP (docs/accelerate.md).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# the first Re-DocRED documents notebook 04 builds from (the gpu profile takes every document of the file it gets)
TRAIN_DOCS, DEV_DOCS = 4, 2
# two micro-batches accumulated, activations recomputed: the gpu way. Notebook 02 takes 2 steps: after one (at lr 0:
# the warm-up) its adapter would be the base model, whose chats in notebooks 02, 03 and 09 run to max_new_tokens
TRAIN = dict(batch_size=2, micro_batch=1, max_steps=1)

# a cell that runs this long has hung (the slowest cell took 21 s in one run alone on 2 cores): the test fails,
# showing the cell's source, instead of running into CI's own limit
CELL_TIMEOUT_S = 600

# per notebook: the papermill parameters that shrink it (profile="gpu" is added to each)
PARAMETERS: dict[str, dict] = {
    "01_synthetic_data": {},  # the paper-size data set itself (no size knob; 28 s measured on one core)
    "02_finetune_retllm": {**TRAIN, "max_steps": 2, "ablation": False, "eval_n": 1, "max_new_tokens": 24},
    "03_zero_shot_vs_retllm": dict(
        loss="paper",
        compare=False,
        ablation=False,
        free_answer=False,
        new_relations=False,
        test_n=1,
        paraphrase_n=1,
        max_new_tokens=24,
        n_boot=100,
    ),
    "04_docred_memllm_data": {},  # train_path / dev_path: set in `shrunk_redocred`
    "05_docred_finetune_memllm": {**TRAIN, "train_rows": 4},
    "06_docred_write_quality": dict(n_write_docs=1, write_sentences=2, max_write_tokens=16),
    "07_docred_perplexity_ablations": dict(
        n_eval_docs=1,
        max_doc_tokens=96,
        max_query_tokens=16,
        gold_memory_docs=1,
        argmax_docs=0,
        bootstrap=100,
        memory_sizes=[0, 20],
        size_docs=1,
        speed_docs=1,
        speed_max_tokens=40,
        max_write_tokens=16,
        demo_sentences=1,
        demo_new_tokens=8,
        quality_recalls=[0.5],
        quality_precisions=[0.5],
    ),
    "08_memory_scaling": {},  # reads the committed benchmark results, as on cpu
    "09_talk_to_the_memory": dict(loss="paper", max_new_tokens=16, script=["Ann Lee works for Pfizer."]),
}


def shrunk_redocred(folder: Path) -> dict[str, str]:
    """The first TRAIN_DOCS / DEV_DOCS documents of Re-DocRED's test and dev files, as notebook 04's file parameters."""
    red = ROOT / "data" / "redocred"
    paths = {}
    for name, file, n in (("train_path", "test_revised.json", TRAIN_DOCS), ("dev_path", "dev_revised.json", DEV_DOCS)):
        docs = json.loads((red / file).read_text(encoding="utf-8"))[:n]
        (folder / file).write_text(json.dumps(docs), encoding="utf-8")
        paths[name] = str(folder / file)
    return paths


def run_gpu_profile(names: list[str], runs: Path, out: Path, extra: dict[str, dict] | None = None) -> dict[str, float]:
    """Execute notebooks `names` in order on the gpu profile (RETLLM_RUNS must point at `runs` in this process);
    executed copies go to `out`. Returns the seconds each took."""
    import papermill as pm

    out.mkdir(parents=True, exist_ok=True)
    seconds = {}
    for name in names:
        params = {"profile": "gpu", **PARAMETERS[name], **(extra or {}).get(name, {})}
        t0 = time.perf_counter()
        pm.execute_notebook(
            str(NOTEBOOKS / f"{name}.ipynb"),
            str(out / f"{name}.ipynb"),
            parameters=params,
            kernel_name="python3",
            cwd=str(NOTEBOOKS),
            progress_bar=False,
            execution_timeout=CELL_TIMEOUT_S,
        )
        seconds[name] = time.perf_counter() - t0
        print(f"{name} (gpu, shrunk): {seconds[name]:.0f} s", flush=True)
    return seconds


@pytest.mark.model
def test_every_notebook_runs_the_gpu_profile_on_the_cpu(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("RETLLM_RUNS", str(runs))  # the kernels papermill starts inherit it
    names = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert names == sorted(PARAMETERS), "a new notebook needs its gpu-profile parameters here"
    extra = {"04_docred_memllm_data": shrunk_redocred(tmp_path)}
    run_gpu_profile(names, runs, tmp_path / "executed", extra)

    # the paper-size RET-LLM data set (notebook 01)
    build = json.loads((runs / "retllm" / "gpu" / "data_wide" / "build.json").read_text())
    assert [build[k] for k in ("n_train", "n_val", "n_test", "n_paraphrase")] == [10000, 500, 1200, 600]
    # both trainings took the gpu path: micro-batches accumulated, activations recomputed
    for adapter in (
        runs / "retllm" / "gpu" / "adapter",
        runs / "memllm" / "gpu" / "write",
        runs / "memllm" / "gpu" / "read",
    ):
        meta = json.loads((adapter / "train_meta.json").read_text())
        assert meta["profile"] == "gpu" and meta["steps"] == (2 if adapter.parent.parent.name == "retllm" else 1)
        assert (meta["micro_batch"], meta["grad_accum"], meta["gradient_checkpointing"]) == (1, 2, True), adapter
    # notebook 04 built from every document it was given, with the gpu profile's pretexts
    docred = json.loads((runs / "memllm_docred" / "gpu" / "build.json").read_text())
    assert docred["profile"] == "gpu" and docred["max_pretext_chars"] == 1500 and docred["n_train"] is None
    # results and figures of the gpu profile stay under runs/
    assert (runs / "gpu" / "results" / "03_retllm.json").is_file() and (
        runs / "gpu" / "results" / "07_table1.json"
    ).is_file()
    assert (runs / "gpu" / "figures" / "02_loss.png").is_file()
