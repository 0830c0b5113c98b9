"""The committed cpu checkpoints (checkpoints/memllm/cpu, checkpoints/retllm/cpu) are intact and are what the
notebooks say they are.

They let notebooks 06 and 07 re-run without notebook 05's 90 min of training, so they must match the SHA-256 sums
beside them, the LoRA settings of notebook 05's parameters cell, the training rows notebook 04 committed, and the
write-model memory notebook 06 reported in results/06_table4.json; RET-LLM's two adapters, notebook 02's settings and
the data set notebook 01 builds. Checked on the files (that data set rebuilt and tokenized); no adapter is loaded.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "checkpoints" / "memllm" / "cpu"
RCKPT = ROOT / "checkpoints" / "retllm" / "cpu"


def _sums(folder: Path = CKPT) -> dict[str, str]:
    lines = (folder / "SHA256SUMS").read_text().splitlines()
    return {name.strip(): digest for digest, name in (line.split(maxsplit=1) for line in lines if line.strip())}


def _notebook_parameters(name: str) -> dict:
    """The literal defaults of a notebook's `parameters` cell."""
    nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    (cell,) = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    out = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            out[target.id] = ast.literal_eval(node.value)
    return out


@pytest.mark.parametrize("folder", [CKPT, RCKPT], ids=["memllm", "retllm"])
def test_every_checkpoint_file_matches_its_sha256(folder):
    sums = _sums(folder)
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"SHA256SUMS", "README.md"}
    assert present == set(sums), (
        f"files without a sum: {present - set(sums)}; sums without a file: {set(sums) - present}"
    )
    for name, digest in sums.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, f"{name}: SHA-256 differs"


@pytest.mark.parametrize("kind", ["adapter", "adapter_nomask"])
def test_retllm_adapters_were_trained_as_notebook_02_says_on_the_wide_build(kind):
    from retllm_utils.retllm.config import RetLLMConfig

    cpu = RetLLMConfig.for_profile("cpu", phrasings=_notebook_parameters("02_finetune_retllm.ipynb")["phrasings"])
    config = json.loads((RCKPT / kind / "adapter_config.json").read_text())
    meta = json.loads((RCKPT / kind / "train_meta.json").read_text())
    assert (config["r"], config["lora_alpha"], config["lora_dropout"]) == (cpu.lora_r, cpu.lora_alpha, cpu.lora_dropout)
    assert meta["profile"] == "cpu" and meta["epochs"] == cpu.epochs and meta["lr"] == cpu.lr
    assert meta["examples"] == cpu.n_train + cpu.open_rows  # the wide build's rows and its open-relation rows
    assert meta["loss"] == ("masked" if kind == "adapter" else "whole_sequence")


def test_retllm_adapters_were_trained_on_the_data_set_notebook_01_builds_today():
    """The recipe's data fingerprint is that of the cpu wide build as the code makes it now: a change to the
    generator or its config that the committed adapters never saw fails here (~15 s: build and tokenize)."""
    from retllm_utils.models import load_model
    from retllm_utils.prompts import retllm_example_text
    from retllm_utils.retllm.config import RetLLMConfig
    from retllm_utils.retllm.synthetic import make_dataset
    from retllm_utils.training import build_sft_dataset, data_fingerprint

    params = _notebook_parameters("02_finetune_retllm.ipynb")
    config = RetLLMConfig.for_profile("cpu", phrasings=params["phrasings"], seed=params["seed"])
    tokenizer = load_model(params["model_id"])[1]
    train = make_dataset(config)["train"]
    for kind, mask in (("adapter", True), ("adapter_nomask", False)):
        ds = build_sft_dataset(tokenizer, train, retllm_example_text, config.max_length, mask=mask)
        meta = json.loads((RCKPT / kind / "train_meta.json").read_text())
        assert meta["data"] == data_fingerprint(ds), f"{kind} was trained on another data set"


def _notebook_05_cpu_settings() -> dict:
    """Notebook 05's parameters on the cpu profile: a parameter left at None takes MemLLMConfig's cpu value."""
    from retllm_utils.memllm.config import MemLLMConfig

    cpu = MemLLMConfig.for_profile("cpu")
    params = _notebook_parameters("05_docred_finetune_memllm.ipynb")
    return {
        k: getattr(cpu, k) if params.get(k) is None else params[k]
        for k in ("lora_r", "lora_alpha", "lora_dropout", "epochs", "lr")
    }


@pytest.mark.parametrize("kind", ["write", "read"])
def test_adapters_were_trained_as_notebook_05_says_on_notebook_04s_rows(kind):
    params = _notebook_05_cpu_settings()
    config = json.loads((CKPT / kind / "adapter_config.json").read_text())
    meta = json.loads((CKPT / kind / "train_meta.json").read_text())
    assert (config["r"], config["lora_alpha"], config["lora_dropout"]) == (
        params["lora_r"],
        params["lora_alpha"],
        params["lora_dropout"],
    )
    assert meta["profile"] == "cpu" and meta["epochs"] == params["epochs"] and meta["lr"] == params["lr"]
    n_rows = sum(1 for _ in (ROOT / "data" / "memllm_docred" / f"{kind}_train.jsonl").open(encoding="utf-8"))
    assert meta["examples"] == n_rows, f"{kind} adapter trained on {meta['examples']} rows, notebook 04 saved {n_rows}"


def test_write_memory_is_the_one_notebook_06_reported():
    mw = json.loads((CKPT / "mw_dev.json").read_text(encoding="utf-8"))
    table4 = json.loads((ROOT / "results" / "06_table4.json").read_text())
    assert mw["n_docs"] == table4["n_docs"]
    assert len(mw["triples"]) == table4["table4"][mw["decoding"]]["triples"]
    assert all(len(t) == 3 and all(isinstance(x, str) and x for x in t) for t in mw["triples"])


def test_notebook_07_read_the_committed_write_memory():
    mw = json.loads((CKPT / "mw_dev.json").read_text(encoding="utf-8"))
    table1 = json.loads((ROOT / "results" / "07_table1.json").read_text())
    assert table1["mw_dev"] == {"decoding": mw["decoding"], "n_docs": mw["n_docs"], "triples": len(mw["triples"])}


def test_stored_write_calls_are_the_committed_write_adapters():
    """Notebook 06 scores the stored calls only if they came from this adapter: the key names its SHA-256."""
    import hashlib

    store = json.loads((CKPT / "write_calls.json").read_text(encoding="utf-8"))
    sha = hashlib.sha256((CKPT / "write" / "adapter_model.safetensors").read_bytes()).hexdigest()
    assert store["key"]["adapter_sha256"] == sha
    table4 = json.loads((ROOT / "results" / "06_table4.json").read_text())
    calls = store["calls"][""]
    assert (
        len(calls) >= table4["n_docs"]
        and sum(len(calls[str(d)]) for d in range(table4["n_docs"])) == table4["n_sentences"]
    )
