"""The LoRA adapters of notebooks 02 (RET-LLM) and 05 (MemLLM) trained in several processes through `accelerate launch`.

Same data, profiles and hyper-parameters as the notebooks (`retllm.profiles`, `memllm.profiles`, the notebooks'
parameter defaults, `training.sft_config` / `train_lora`); N processes train one model (DDP: gradients averaged every
step; FSDP: the model sharded). `--batch-size` is the notebooks' batch (the global one): each process takes
batch_size / N rows a step, so a run takes the notebook's number of optimizer steps whatever N is. The adapter is saved
once, by the main process, with run.json (settings, processes, steps, loss log).

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
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as `tools/train_accelerate.py` without installing the kit
    sys.path.insert(0, str(ROOT))

# The notebooks' parameter defaults (02: RET-LLM; 05: MemLLM, paper App. E where it applies); None: the profile's.
DEFAULTS = {
    "retllm": dict(lr=1e-3, lora_r=16, lora_alpha=32, lora_dropout=0.05, epochs=None, max_length=384),
    "memllm": dict(lr=1e-3, lora_r=16, lora_alpha=8, lora_dropout=0.1, epochs=2, max_length=1024),
}
ADAPTERS = {"retllm": ("masked", "nomask"), "memllm": ("write", "read")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paper", choices=sorted(DEFAULTS))
    ap.add_argument("--adapter", help="retllm: masked (default) | nomask (loss on every token); memllm: write | read")
    ap.add_argument("--profile", default="cpu", help="smoke | cpu | gpu (sizes from the paper's profiles module)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-id", default="smollm2-135m-instruct", help="offline alias, or a hub id on a GPU machine")
    ap.add_argument("--lr", type=float)
    ap.add_argument("--lora-r", type=int)
    ap.add_argument("--lora-alpha", type=int)
    ap.add_argument("--lora-dropout", type=float)
    ap.add_argument("--epochs", type=int, help="None: the notebook's (RET-LLM: the profile's; MemLLM: 2)")
    ap.add_argument("--batch-size", type=int, help="global batch, as in the notebooks; None: the profile's")
    ap.add_argument("--max-length", type=int)
    ap.add_argument("--max-steps", type=int, help="None: the profile's (smoke: a few; cpu, gpu: every step)")
    ap.add_argument("--train-rows", type=int, help="MemLLM: training rows; None: the profile's")
    ap.add_argument("--out", type=Path, help="default runs/<paper>/<profile>/accelerate/<adapter>")
    ap.add_argument("--fingerprint-dir", type=Path, help="each process writes rank<i>.json: its LoRA weights' sha1")
    a = ap.parse_args(argv)
    a.adapter = a.adapter or ADAPTERS[a.paper][0]
    if a.adapter not in ADAPTERS[a.paper]:
        ap.error(f"--adapter for {a.paper} is one of {ADAPTERS[a.paper]}")
    for key, value in DEFAULTS[a.paper].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    return a


def training_rows(a: argparse.Namespace, tokenizer) -> tuple[object, dict]:
    """The notebook's pre-tokenized training set for this adapter, and the profile sizes it used."""
    from retllm_utils.training import build_sft_dataset

    if a.paper == "retllm":
        from retllm_utils.prompts import retllm_example_text
        from retllm_utils.retllm import profiles
        from retllm_utils.retllm.synthetic import load_synthetic

        sizes = profiles.settings(a.profile, epochs=a.epochs, batch_size=a.batch_size, max_steps=a.max_steps)
        rows = load_synthetic(a.profile, a.seed)["train"]
        ds = build_sft_dataset(tokenizer, rows, retllm_example_text, a.max_length, mask=a.adapter == "masked")
    else:
        from retllm_utils.memllm import profiles
        from retllm_utils.memllm.dataset import load_or_build, render

        sizes = profiles.settings(a.profile, batch_size=a.batch_size, max_steps=a.max_steps, train_rows=a.train_rows)
        sizes["epochs"] = a.epochs
        rows = load_or_build(a.profile, seed=a.seed)[0][f"{a.adapter}_train"]
        if sizes["train_rows"]:
            rows = rows.select(range(min(sizes["train_rows"], len(rows))))
        ds = build_sft_dataset(tokenizer, rows, render, a.max_length)
    return ds, sizes


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
    import datasets
    import torch
    from accelerate import PartialState
    from transformers import set_seed

    from retllm_utils.models import load_model
    from retllm_utils.paths import check_profile, run_dir
    from retllm_utils.training import lora_config, sft_config, train_lora

    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    datasets.disable_progress_bars()
    check_profile(a.profile)
    # the launcher's processes, gloo on a machine without CUDA (accelerate makes MULTI_CPU only when told cpu=True)
    state = PartialState(cpu=not torch.cuda.is_available())
    world, fsdp = state.num_processes, state.distributed_type.name == "FSDP"
    out = a.out or run_dir(a.paper, a.profile, "accelerate", a.adapter)
    # FSDP loads on the CPU and shards; otherwise each process puts its replica on its own device
    device = "cpu" if fsdp or not torch.cuda.is_available() else f"cuda:{state.local_process_index}"
    dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else None
    set_seed(a.seed)
    with state.main_process_first():  # the main process converts the GGUF and builds/saves the data set once
        model, tokenizer = load_model(a.model_id, device=device, dtype=dtype)
        ds, sizes = training_rows(a, tokenizer)
    if sizes["batch_size"] % world:
        raise SystemExit(f"batch size {sizes['batch_size']} does not split over {world} processes")
    args = sft_config(
        str(Path(out) / "trainer"),
        lr=a.lr,
        epochs=sizes["epochs"],
        batch_size=sizes["batch_size"] // world,
        max_length=a.max_length,
        seed=a.seed,
        max_steps=sizes["max_steps"] or -1,
        logging_steps=1 if a.profile == "smoke" else 5,
        ddp_find_unused_parameters=False,  # LoRA uses every adapter weight each step: skip DDP's extra graph walk
    )
    t0 = time.perf_counter()
    trainer = train_lora(model, tokenizer, ds, args, lora_config(a.lora_r, a.lora_alpha, a.lora_dropout))
    seconds = time.perf_counter() - t0
    if a.fingerprint_dir and not fsdp:  # FSDP shards the weights: no process holds them whole
        a.fingerprint_dir.mkdir(parents=True, exist_ok=True)
        record = {"rank": state.process_index, "world": world, "sha1": lora_sha1(trainer.model)}
        (a.fingerprint_dir / f"rank{state.process_index}.json").write_text(json.dumps(record))
    if fsdp:  # PEFT's FSDP guide: gather the whole adapter before saving it
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(out))  # the main process writes; the others wait
    if state.is_main_process:
        run = {
            "paper": a.paper,
            "adapter": a.adapter,
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
            "profile_sizes": sizes,
            "processes": world,
            "distributed_type": state.distributed_type.name,
            "per_process_batch": sizes["batch_size"] // world,
            "examples": len(ds),
            "steps": trainer.state.global_step,
            "train_seconds": seconds,
            "log": [h for h in trainer.state.log_history if "loss" in h],
        }
        (Path(out) / "run.json").write_text(json.dumps(run, indent=1))
        print(f"{a.paper} {a.adapter}: {run['steps']} steps in {seconds:.0f} s on {world} processes -> {out}")
    state.wait_for_everyone()


if __name__ == "__main__":
    main()
