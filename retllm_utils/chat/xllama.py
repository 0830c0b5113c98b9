"""The llama.cpp chat engine from a prebuilt wheel: PyPI's `xllamacpp` ships llama.cpp compiled (manylinux x86-64,
AVX2), so no compiler is needed, unlike llama-cpp-python, which PyPI has only as source.

Why ctypes: xllamacpp's Python API is a server (JSON completions) with no per-token logits, but its extension module
`xllamacpp.abi3.so` exports llama.cpp's C API. This module declares the few functions and the three structs that
`LlamaCppGenerator` needs (load the shipped GGUF or a merged one, apply a GGUF LoRA, decode with the KV cache kept,
read the last token's logits, or every token's of a batch) and wraps them in `XLlama`, which has the part of
llama_cpp.Llama's interface the generator uses.

`XLlamaGenerator(draft=16)` drafts by prompt lookup: when the last three tokens occurred earlier, the tokens that
followed them there are evaluated in one batch with the new token and kept while each is the token greedy decoding
(with the same processors) picks anyway; the first that is not, and everything after it, leave the cache. So the
output is that of one-at-a-time decoding up to the rounding of a batched evaluation. Looked up in the whole context,
most drafts in read turns are wrong, and on 2 CPU cores a batch of wrong guesses costs more than the tokens it saves;
looked up only in what this model call has generated (`draft_from="output"`, as the chat runs it,
`loading.cpp_generator`), it keeps mainly the write call the model repeats; in long read answers it drafts more but
keeps few, and the three slowest such turns took 9-18% longer in the benchmark, though the median read turn did not
(benchmarks/README.md, "Controller").

The struct layouts are those of the llama.h in xllamacpp 2026.10.11549's source distribution, so that version is
pinned and checked before the library is opened: another version's structs may differ and would crash or misread.
"""

from __future__ import annotations

import ctypes as C
import functools
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..models import gguf_path
from .llamacpp import LlamaCppGenerator

__all__ = ["XLLAMACPP_VERSION", "XLlama", "XLlamaGenerator", "available", "load_xllama", "lookup_draft"]

XLLAMACPP_VERSION = "2026.10.11549"  # the llama.h the structs below copy

_p = C.c_void_p


class _ModelParams(C.Structure):
    """struct llama_model_params (80 bytes)."""

    _fields_ = [
        ("devices", _p),
        ("tensor_buft_overrides", _p),
        ("n_gpu_layers", C.c_int32),
        ("split_mode", C.c_int),
        ("load_mode", C.c_int),
        ("lazy_mode", C.c_int),
        ("main_gpu", C.c_int32),
        ("tensor_split", _p),
        ("progress_callback", _p),
        ("progress_callback_user_data", _p),
        ("kv_overrides", _p),
        *[(b, C.c_bool) for b in ("vocab_only", "check_tensors", "use_extra_bufts", "no_host", "no_alloc", "load_mtp")],
    ]


class _ContextParams(C.Structure):
    """struct llama_context_params (168 bytes)."""

    _fields_ = [
        *[
            (n, C.c_uint32)
            for n in ("n_ctx", "n_batch", "n_ubatch", "n_seq_max", "n_rs_seq", "n_outputs_max", "n_outputs_max_per_seq")
        ],
        ("n_threads", C.c_int32),
        ("n_threads_batch", C.c_int32),
        *[(n, C.c_int) for n in ("ctx_type", "rope_scaling_type", "pooling_type", "attention_type", "flash_attn_type")],
        *[
            (n, C.c_float)
            for n in ("rope_freq_base", "rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor", "yarn_beta_fast")
        ],
        ("yarn_beta_slow", C.c_float),
        ("yarn_orig_ctx", C.c_uint32),
        ("defrag_thold", C.c_float),
        ("cb_eval", _p),
        ("cb_eval_user_data", _p),
        ("type_k", C.c_int),
        ("type_v", C.c_int),
        ("moe_cache_size", C.c_size_t),
        ("abort_callback", _p),
        ("abort_callback_data", _p),
        *[(b, C.c_bool) for b in ("embeddings", "offload_kqv", "no_perf", "op_offload", "swa_full", "kv_unified")],
        ("samplers", _p),
        ("n_samplers", C.c_size_t),
        ("ctx_other", _p),
    ]


class _Batch(C.Structure):
    """struct llama_batch."""

    _fields_ = [("n_tokens", C.c_int32), *[(n, _p) for n in ("token", "embd", "pos", "n_seq_id", "seq_id", "logits")]]


assert C.sizeof(_ModelParams) == 80 and C.sizeof(_ContextParams) == 168 and C.sizeof(_Batch) == 56

_LOG = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)
_quiet = _LOG(lambda level, text, user: None)  # kept alive for as long as llama.cpp may call it

_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "llama_backend_init": (None, []),
    "llama_log_set": (None, [_LOG, _p]),
    "llama_model_default_params": (_ModelParams, []),
    "llama_context_default_params": (_ContextParams, []),
    "llama_model_load_from_file": (_p, [C.c_char_p, _ModelParams]),
    "llama_init_from_model": (_p, [_p, _ContextParams]),
    "llama_model_free": (None, [_p]),
    "llama_free": (None, [_p]),
    "llama_adapter_lora_init": (_p, [_p, C.c_char_p]),
    "llama_set_adapters_lora": (C.c_int32, [_p, C.POINTER(_p), C.c_size_t, C.POINTER(C.c_float)]),
    "llama_model_get_vocab": (_p, [_p]),
    "llama_vocab_n_tokens": (C.c_int32, [_p]),
    "llama_get_memory": (_p, [_p]),
    "llama_memory_seq_rm": (C.c_bool, [_p, C.c_int32, C.c_int32, C.c_int32]),
    "llama_batch_get_one": (_Batch, [C.POINTER(C.c_int32), C.c_int32]),
    "llama_decode": (C.c_int32, [_p, _Batch]),
    "llama_get_logits_ith": (C.POINTER(C.c_float), [_p, C.c_int32]),
}


@functools.cache
def _lib() -> C.CDLL:
    """xllamacpp's shared library with the functions declared, once per process; refuses any other version."""
    try:
        version = importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"xllamacpp is not installed: pip install xllamacpp=={XLLAMACPP_VERSION}") from None
    if version != XLLAMACPP_VERSION:
        raise ImportError(
            f"xllamacpp {version} is installed, but retllm_utils.chat.xllama binds the C structs of xllamacpp "
            f"{XLLAMACPP_VERSION} exactly: pip install xllamacpp=={XLLAMACPP_VERSION}"
        )
    spec = importlib.util.find_spec("xllamacpp")  # finds the folder without importing the package
    so = Path(next(iter(spec.submodule_search_locations))) / "xllamacpp.abi3.so"
    try:
        lib = C.CDLL(str(so))
    except OSError as e:  # the wheel does not bundle OpenMP's runtime
        raise ImportError(f"cannot open {so}: {e} (it needs the system's libgomp.so.1: apt install libgomp1)") from e
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    lib.llama_backend_init()
    return lib


def available() -> bool:
    """Whether this machine can open the pinned xllamacpp library (chat.loading's "auto" engine asks)."""
    try:
        _lib()
    except ImportError:
        return False
    return True


class XLlama:
    """The shipped GGUF in llama.cpp with the part of llama_cpp.Llama that `LlamaCppGenerator` uses: `eval`,
    `input_ids`, `n_tokens` (set it lower and the next `eval` drops the cache past it), `n_vocab`, plus `logits`."""

    def __init__(
        self,
        model_path: str | os.PathLike,
        lora_path: str | os.PathLike | None = None,
        *,
        n_threads: int = 2,
        n_ctx: int = 2048,
        lora_scale: float = 1.0,
        verbose: bool = False,
        max_outputs: int = 64,
    ):
        self._lib = lib = _lib()
        lib.llama_log_set(None if verbose else _quiet, None)  # NULL: llama.cpp's own log to stderr
        self.model = self.ctx = None
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0  # CPU build: keep every layer on the CPU
        self.model = lib.llama_model_load_from_file(str(model_path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {model_path}")
        cp = lib.llama_context_default_params()
        cp.n_ctx, cp.n_batch = n_ctx, min(n_ctx, cp.n_batch)
        # `eval_rows` reads up to max_outputs tokens' logits from one batch (the default context keeps one per batch)
        cp.n_outputs_max, cp.n_outputs_max_per_seq = max_outputs, 0
        cp.n_threads = cp.n_threads_batch = n_threads
        cp.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not create a context of {n_ctx} tokens")
        self.n_batch, self.max_outputs = cp.n_batch, max_outputs
        if lora_path is not None:
            adapter = lib.llama_adapter_lora_init(self.model, str(lora_path).encode())  # freed with the model
            if not adapter:
                raise RuntimeError(f"llama.cpp could not load the LoRA {lora_path} (not a GGUF LoRA of this model?)")
            if lib.llama_set_adapters_lora(self.ctx, (_p * 1)(adapter), 1, (C.c_float * 1)(lora_scale)):
                raise RuntimeError(f"llama.cpp could not apply the LoRA {lora_path}")
        self._n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.model))
        self._memory = lib.llama_get_memory(self.ctx)
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)  # the tokens in the KV cache, as Llama.input_ids
        self.n_tokens = 0

    def n_vocab(self) -> int:
        """The vocabulary size, the length of a logits row."""
        return self._n_vocab

    def eval(self, tokens: Sequence[int]) -> None:
        """As Llama.eval: drop the cache past `n_tokens`, then decode `tokens` after it in `n_batch` chunks."""
        if self.n_tokens + len(tokens) > len(self.input_ids):
            raise ValueError(f"{self.n_tokens} + {len(tokens)} tokens exceed the context of {len(self.input_ids)}")
        self._lib.llama_memory_seq_rm(self._memory, -1, self.n_tokens, -1)
        for start in range(0, len(tokens), self.n_batch):
            chunk = [int(t) for t in tokens[start : start + self.n_batch]]
            ids = (C.c_int32 * len(chunk))(*chunk)
            rc = self._lib.llama_decode(self.ctx, self._lib.llama_batch_get_one(ids, len(chunk)))
            if rc:
                raise RuntimeError(f"llama_decode returned {rc}")
            self.input_ids[self.n_tokens : self.n_tokens + len(chunk)] = chunk
            self.n_tokens += len(chunk)

    def eval_rows(self, tokens: Sequence[int]) -> np.ndarray:
        """As `eval` for at most `max_outputs` tokens in one batch, returning every token's logits (one row each)."""
        n = len(tokens)
        if not 0 < n <= self.max_outputs or self.n_tokens + n > len(self.input_ids):
            raise ValueError(f"eval_rows takes 1 to {self.max_outputs} tokens within the context; got {n}")
        self._lib.llama_memory_seq_rm(self._memory, -1, self.n_tokens, -1)
        ints = C.c_int32 * n
        seq0 = (C.c_int32 * 1)(0)
        seq = (C.POINTER(C.c_int32) * n)(*[C.cast(seq0, C.POINTER(C.c_int32))] * n)
        arrays = (
            ints(*tokens),
            ints(*range(self.n_tokens, self.n_tokens + n)),
            ints(*[1] * n),
            seq,
            (C.c_int8 * n)(*[1] * n),
        )
        tok, pos, n_seq, seq_ids, out = (C.cast(a, _p) for a in arrays)
        rc = self._lib.llama_decode(self.ctx, _Batch(n, tok, None, pos, n_seq, seq_ids, out))
        if rc:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.input_ids[self.n_tokens : self.n_tokens + n] = tokens
        self.n_tokens += n
        rows = [self._lib.llama_get_logits_ith(self.ctx, i) for i in range(n)]
        return np.stack([np.ctypeslib.as_array(r, shape=(self._n_vocab,)) for r in rows])

    def logits(self) -> np.ndarray:
        """The last evaluated token's logits (a copy: the next decode overwrites llama.cpp's buffer)."""
        ptr = self._lib.llama_get_logits_ith(self.ctx, -1)
        if not ptr:
            raise RuntimeError("no logits: evaluate a token first")
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)).copy()

    def close(self) -> None:
        """Free the context and the model (and with it the adapter) now rather than at garbage collection."""
        if self.ctx:
            self._lib.llama_free(self.ctx)
        if self.model:
            self._lib.llama_model_free(self.model)
        self.ctx = self.model = None

    def __del__(self) -> None:
        """llama.cpp's memory is not Python's: free it when the object goes."""
        if getattr(self, "_lib", None) is not None:
            self.close()


def load_xllama(
    lora: str | os.PathLike | None = None,
    *,
    threads: int = 2,
    n_ctx: int = 2048,
    model_path: str | os.PathLike | None = None,
) -> XLlama:
    """As `llamacpp.load_llama`, on xllamacpp's prebuilt llama.cpp: the shipped GGUF (or `model_path`, e.g. a merged
    one from `llamacpp.merged_gguf`), a converted LoRA or none."""
    return XLlama(model_path or gguf_path(), lora, n_threads=threads, n_ctx=n_ctx)


def lookup_draft(ids: Sequence[int], k: int, ngram: int = 3, start: int = 0) -> list[int]:
    """Up to `k` tokens that followed the latest earlier occurrence of the last `ngram` of `ids` (prompt lookup),
    searched from `start` on (e.g. only the text this call generated)."""
    if k <= 0 or len(ids) <= ngram:
        return []
    tail = list(ids[-ngram:])
    for j in range(len(ids) - ngram - 1, max(start, 0) - 1, -1):
        if ids[j] == tail[0] and list(ids[j : j + ngram]) == tail:
            return list(ids[j + ngram : j + ngram + k])
    return []


class XLlamaGenerator(LlamaCppGenerator):
    """`LlamaCppGenerator` on an `XLlama`: the same greedy tokens, processors and cache reuse; the logits are read
    through this binding. `draft` > 0: tokens found earlier in the context are drafted and checked in one batch (at
    most `draft`); `draft_from="output"` looks only in what this call has generated so far (a write call repeated, a
    name said twice), where prompt lookup over the whole context mostly guesses wrong in read turns."""

    DRAFT_FROM = ("context", "output")

    def __init__(self, llm: XLlama, tokenizer: Any, *, draft: int = 0, draft_from: str = "context", **kw: Any):
        super().__init__(llm, tokenizer, **kw)
        if not (isinstance(draft, int) and 0 <= draft < llm.max_outputs):
            raise ValueError(f"draft must be an int from 0 to {llm.max_outputs - 1} (the context's max_outputs - 1)")
        if draft_from not in self.DRAFT_FROM:
            raise ValueError(f"draft_from must be one of {self.DRAFT_FROM}, not {draft_from!r}")
        self.draft, self.draft_from = draft, draft_from
        self.drafted = self.accepted = 0  # tokens drafted and kept, over this generator's life (benchmarks)

    def _feed(self, prompt_ids: list[int]) -> None:
        """The prompt as `LlamaCppGenerator` feeds it; nothing drafted yet."""
        super()._feed(prompt_ids)
        self._rows, self._drafted = [], []  # _rows[i]: the logits after the chosen tokens and _drafted[:i]
        self._start = len(prompt_ids) if self.draft_from == "output" else 0  # where drafts are looked up

    def _logits(self) -> torch.Tensor:
        """The next position's logits as the processors take them, a (1, vocab) tensor: from the last batch's rows
        while a draft is being checked, else the last evaluated token's."""
        return torch.from_numpy(self._rows.pop(0) if self._rows else self.model.logits())[None]

    def _advance(self, ids: list[int]) -> None:
        """Keep the chosen token if it is the next drafted one (already in the cache), else drop the rest of the
        draft from the cache and evaluate the token with a new draft (none when `draft` is 0)."""
        llm, token = self.model, ids[-1]
        if self._drafted and self._drafted[0] == token:
            self._drafted.pop(0)
            self.accepted += 1
            return
        llm.n_tokens -= len(self._drafted)  # a guess that greedy decoding did not make: it leaves the cache
        self._drafted = lookup_draft(ids, min(self.draft, len(llm.input_ids) - llm.n_tokens - 1), start=self._start)
        self.drafted += len(self._drafted)
        if self._drafted:
            self._rows = list(llm.eval_rows([token, *self._drafted]))
        else:
            self._rows = []
            llm.eval([token])
