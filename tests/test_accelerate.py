"""Multi-process training through `accelerate launch` (tools/train_accelerate.py): two processes on the CPU train one
RET-LLM adapter on the smoke data (DDP over gloo, configs/accelerate/cpu_2proc.yaml), saved once with its
train_meta.json, loss logged; launched again with the same settings, they reuse it.

The GPU configs (configs/accelerate/one_gpu.yaml, fsdp_multi_gpu.yaml) cannot run here: no GPU. Note that
`accelerate launch --cpu --num_processes 2` would start ONE process without MPI; cpu_2proc.yaml says why and how.
"""

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.model
def test_two_processes_train_one_retllm_adapter_then_reuse_it(tmp_path):
    out, fp = tmp_path / "adapter", tmp_path / "fingerprints"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RETLLM_RUNS": str(tmp_path / "runs"), "PYTHONPATH": str(ROOT)}

    def launch(*extra: str) -> subprocess.CompletedProcess:
        cmd = [
            sys.executable,
            "-m",
            "accelerate.commands.accelerate_cli",
            "launch",
            "--config_file",
            str(ROOT / "configs/accelerate/cpu_2proc.yaml"),
            "--main_process_port",
            str(_free_port()),
            str(ROOT / "tools/train_accelerate.py"),
            "retllm",
            "--profile",
            "smoke",
            "--max-steps",
            "2",
            "--out",
            str(out),
            *extra,
        ]
        p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
        return p

    p = launch("--fingerprint-dir", str(fp))
    # two processes, and after training both hold the same LoRA weights: one model, not two
    ranks = sorted((json.loads(f.read_text()) for f in fp.glob("rank*.json")), key=lambda r: r["rank"])
    assert [(r["rank"], r["world"]) for r in ranks] == [(0, 2), (1, 2)]
    assert ranks[0]["sha1"] == ranks[1]["sha1"]
    meta = json.loads((out / "train_meta.json").read_text())
    assert meta["processes"] == 2 and meta["distributed_type"] == "MULTI_CPU"
    # the notebook's batch (smoke: 4), split over the processes
    assert meta["micro_batch"] * meta["grad_accum"] * 2 == meta["batch_size"] == 4
    assert meta["steps"] == 2 and [h["step"] for h in meta["log_history"] if "loss" in h] == [1, 2]
    assert all(math.isfinite(h["loss"]) and h["loss"] > 0 for h in meta["log_history"] if "loss" in h)
    assert meta["loss"] == "masked" and meta["model_id"] == "smollm2-135m-instruct" and len(meta["data"]) == 64
    # saved once, by the main process: one adapter, one closing line
    assert [f.name for f in out.rglob("adapter_model.safetensors")] == ["adapter_model.safetensors"]
    assert p.stdout.count("done: 2 steps") == 1 and p.stdout.count("on 2 processes") == 1
    from safetensors.numpy import load_file

    weights = load_file(out / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and any(abs(v).max() > 0 for v in lora_b)  # B starts at zero: non-zero means it trained
    # the same settings again: both processes reuse the adapter (one line says so), nothing is trained or written
    stamp = (out / "adapter_model.safetensors").stat().st_mtime_ns
    again = launch()
    assert again.stdout.count("adapter: reusing") == 1 and "done:" not in again.stdout
    assert (out / "adapter_model.safetensors").stat().st_mtime_ns == stamp


def test_the_fsdp_config_on_a_machine_without_cuda_stops_with_why_instead_of_training_unsharded(tmp_path):
    # accelerate 1.15 turns FSDP on only over GPUs: on the CPU, fsdp_multi_gpu.yaml would raise in accelerate's FSDP
    # plugin ("There are currently no available devices found, must be one of 'XPU', 'CUDA', ...": its
    # sync_module_states), and without that option train plain DDP while the config says FSDP. Both processes stop
    # first, saying why, before any model is loaded.
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine runs FSDP")
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.accelerate_cli",
        "launch",
        "--config_file",
        str(ROOT / "configs/accelerate/fsdp_multi_gpu.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        str(_free_port()),
        str(ROOT / "tools/train_accelerate.py"),
        "retllm",
        "--profile",
        "smoke",
        "--out",
        str(tmp_path / "adapter"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RETLLM_RUNS": str(tmp_path / "runs"), "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and (p.stdout + p.stderr).count("FSDP shards the model over GPUs") >= 1, p.stderr[-3000:]
    assert not (tmp_path / "adapter").exists()
