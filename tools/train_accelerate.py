"""The LoRA adapters of notebooks 02 (RET-LLM) and 05 (MemLLM) trained in several processes through `accelerate launch`.

Same data, settings and training step as the notebooks: the paper's config for the profile (`retllm.config`,
`memllm.config`, with any option given here put over it) and `training.train_or_reuse`, which reuses an adapter
already in `--out` that was trained with the same model, data and settings (`--retrain` trains anyway). N processes
train one model (DDP: gradients averaged every step; FSDP: the model sharded). `--batch-size` is the notebooks' batch
(the global one): each process takes batch_size / N rows a step, in micro-batches of `--micro-batch` (gradient
accumulation), so a run takes the notebook's number of optimizer steps whatever N is. The adapter is saved once, by
the main process, with train_meta.json (the recipe, processes, steps, timings, loss log).

    accelerate launch --config_file configs/accelerate/cpu_2proc.yaml tools/train_accelerate.py retllm --profile smoke
    accelerate launch --config_file configs/accelerate/one_gpu.yaml tools/train_accelerate.py memllm --adapter write \\
        --profile gpu --model-id mistralai/Mistral-7B-v0.1
    accelerate launch --config_file configs/accelerate/fsdp_multi_gpu.yaml --num_processes 8 \\
        tools/train_accelerate.py memllm --adapter read --profile gpu --model-id mistralai/Mistral-7B-v0.1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `tools/train_accelerate.py` without installing the kit
    sys.path.insert(0, str(ROOT))

ADAPTERS = {"retllm": ("masked", "nomask"), "memllm": ("write", "read")}
FSDP_NEEDS_CUDA = "FSDP shards the model over GPUs"
# the config fields these options set; a value left out (None) is the profile's
OPTIONS = {
    "seed": int,
    "lr": float,
    "epochs": int,
    "batch_size": int,
    "micro_batch": int,
    "max_length": int,
    "max_steps": int,
    "lora_r": int,
    "lora_alpha": int,
    "lora_dropout": float,
    "train_rows": int,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paper", choices=sorted(ADAPTERS))
    ap.add_argument("--adapter", help="retllm: masked (default) | nomask (loss on every token); memllm: write | read")
    ap.add_argument("--profile", default="cpu", help="smoke | cpu | gpu: the paper's config (sizes, hyper-parameters)")
    ap.add_argument("--model-id", default="smollm2-135m-instruct", help="offline alias, or a hub id on a GPU machine")
    for name, kind in OPTIONS.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=kind, help="None: the profile's")
    ap.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, help="None: the profile's")
    ap.add_argument("--retrain", action="store_true", help="train even if --out holds an adapter trained the same way")
    ap.add_argument("--out", type=Path, help="default runs/<paper>/<profile>/accelerate/<adapter>")
    ap.add_argument("--fingerprint-dir", type=Path, help="each process writes rank<i>.json: its LoRA weights' sha1")
    a = ap.parse_args(argv)
    a.adapter = a.adapter or ADAPTERS[a.paper][0]
    if a.adapter not in ADAPTERS[a.paper]:
        ap.error(f"--adapter for {a.paper} is one of {ADAPTERS[a.paper]}")
    return a


def config_of(a: argparse.Namespace):
    """The paper's config for `a.profile` with the options given put over it (raises naming a bad one)."""
    from retllm_utils.memllm.config import MemLLMConfig
    from retllm_utils.retllm.config import RetLLMConfig

    given = {k: getattr(a, k) for k in (*OPTIONS, "gradient_checkpointing") if getattr(a, k) is not None}
    return (RetLLMConfig if a.paper == "retllm" else MemLLMConfig).for_profile(a.profile, **given)


def training_set(a: argparse.Namespace, config, tokenizer):
    """The notebook's pre-tokenized training set for this adapter."""
    from retllm_utils.training import build_sft_dataset

    if a.paper == "retllm":
        from retllm_utils.prompts import retllm_example_text
        from retllm_utils.retllm.synthetic import load_synthetic

        rows = load_synthetic(a.profile, config.seed)["train"]
        return build_sft_dataset(tokenizer, rows, retllm_example_text, config.max_length, mask=a.adapter == "masked")
    from retllm_utils.memllm.dataset import load_or_build, render, training_rows

    rows = training_rows(load_or_build(a.profile, seed=config.seed)[0], a.adapter, config)
    return build_sft_dataset(tokenizer, rows, render, config.max_length)


def lora_sha1(model) -> str:
    """A checksum of the trainable (LoRA) weights: equal in every process iff they hold one model."""
    h = hashlib.sha1()
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        if p.requires_grad:
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    config = config_of(a)  # a bad option stops here, before any process group starts
    import datasets
    import torch
    from accelerate import PartialState

    from retllm_utils.models import load_model
    from retllm_utils.paths import run_dir
    from retllm_utils.training import train_or_reuse

    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    datasets.disable_progress_bars()
    # FSDP as the launcher sets it: PartialState reports only the process layout (MULTI_GPU); the FSDP state is made
    # later, by the Trainer's Accelerator
    fsdp = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if fsdp and not torch.cuda.is_available():
        # accelerate 1.15 turns FSDP on only over GPUs (and XPU, NPU ...): on the CPU it would train unsharded (DDP)
        raise SystemExit(
            f"{FSDP_NEEDS_CUDA}: this machine has no CUDA; configs/accelerate/cpu_2proc.yaml runs on the CPU"
        )
    # the launcher's processes, gloo on a machine without CUDA (accelerate makes MULTI_CPU only when told cpu=True)
    state = PartialState(cpu=not torch.cuda.is_available())
    world = state.num_processes
    config.batch_split(world)  # a batch that does not split over the processes stops here, in every process
    out = a.out or run_dir(a.paper, a.profile, "accelerate", a.adapter)
    # FSDP loads on the CPU and shards; otherwise each process puts its replica on its own device
    device = "cpu" if fsdp or not torch.cuda.is_available() else f"cuda:{state.local_process_index}"
    dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else None
    with state.main_process_first():  # the main process converts the GGUF and builds/saves the data set once
        model, tokenizer = load_model(a.model_id, device=device, dtype=dtype)
        ds = training_set(a, config, tokenizer)
    info = {"paper": a.paper, "adapter": a.adapter, "distributed_type": "FSDP" if fsdp else state.distributed_type.name}
    done = train_or_reuse(
        out,
        ds,
        config,
        model_id=a.model_id,
        tokenizer=tokenizer,
        model=model,
        retrain=a.retrain,
        processes=world,
        info=info,
        # LoRA uses every adapter weight each step: skip DDP's extra graph walk
        ddp_find_unused_parameters=False,
    )
    # FSDP shards the weights: no process holds them whole
    if done.trainer is not None and a.fingerprint_dir and not fsdp:
        a.fingerprint_dir.mkdir(parents=True, exist_ok=True)
        record = {"rank": state.process_index, "world": world, "sha1": lora_sha1(done.trainer.model)}
        (a.fingerprint_dir / f"rank{state.process_index}.json").write_text(json.dumps(record))
    if state.is_main_process and done.trainer is not None:
        seconds = done.meta["train_seconds"]
        print(f"{a.paper} {a.adapter}: {done.meta['steps']} steps in {seconds:.0f} s on {world} processes -> {out}")
    state.wait_for_everyone()


if __name__ == "__main__":
    main()
