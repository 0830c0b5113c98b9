"""RET-LLM chat turns on llama.cpp: the GGUF the kit ships, notebook 02's LoRA adapter converted to GGUF, the same
controller, pauses and decoding constraints. Optional and CPU-only; transformers stays every notebook's default.

Why: on 2 CPU cores transformers decodes SmolLM2-135M at 45–75 ms per token, llama.cpp at 8–10 (11–12 with the LoRA
applied at run time), and a chat turn on this path at 15–16 ms per generated token, prompt, memory reply, loop and
processors included (benchmarks/README.md, "Controller"). What it costs: llama-cpp-python has no wheel for Linux
x86-64 on PyPI, so `pip install llama-cpp-python` compiles llama.cpp (~5 min on 2 cores, needs a C++ compiler and
cmake); the adapter is converted to a GGUF LoRA by `lora_gguf` with PyPI's gguf package (llama.cpp's own
`convert_lora_to_gguf.py` from its source tree is still accepted, `llama_cpp_src`). llama.cpp multiplies the 4-bit
(Q4_1) weights as they are stored, where transformers multiplies them dequantised to fp32: greedy outputs can differ
(experiments/chat_accuracy.py measures notebook 03's test split both ways).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..controller import HFGenerator, Pause
from ..models import DEFAULT_MODEL, _resolve, gguf_path, load_model
from .copying import AllowedTerms

__all__ = ["LlamaCppGenerator", "convert_lora", "load_llama", "lora_gguf", "merged_gguf"]


def convert_lora(adapter_dir: str | os.PathLike, out: str | os.PathLike, llama_cpp_src: str | os.PathLike) -> Path:
    """A peft LoRA adapter of the offline model as a GGUF LoRA file, with llama.cpp's converter (module docstring)."""
    src = Path(llama_cpp_src)
    script = src / "convert_lora_to_gguf.py"
    if not script.is_file():
        raise FileNotFoundError(f"no convert_lora_to_gguf.py in {src}: give the llama.cpp source folder")
    # the HF checkpoint the converter reads the base model's shapes from
    load_model(DEFAULT_MODEL, device="cpu")
    base = _resolve(DEFAULT_MODEL, None)[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(src / "gguf-py")])}
    cmd = [
        sys.executable,
        str(script),
        "--base",
        str(base),
        "--outtype",
        "f32",
        "--outfile",
        str(out),
        str(adapter_dir),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"convert_lora_to_gguf.py failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Path(out)


def _up_to_date(built: Path, adapter_dir: str | os.PathLike) -> bool:
    """Whether a file built from the adapter exists and is not older than the adapter's weights (a retrained one)."""
    weights = Path(adapter_dir) / "adapter_model.safetensors"
    return built.is_file() and built.stat().st_mtime >= weights.stat().st_mtime


def lora_gguf(adapter_dir: str | os.PathLike, llama_cpp_src: str | os.PathLike | None = None) -> Path:
    """The adapter as GGUF, kept beside it: converted on first use, again when the adapter's weights are newer; by
    `lora_gguf.convert_peft_lora` (PyPI's gguf only), or by llama.cpp's converter where its source folder is given."""
    out = Path(adapter_dir) / "adapter.gguf"
    if _up_to_date(out, adapter_dir):
        return out
    src = llama_cpp_src or os.environ.get("LLAMA_CPP_SRC")
    if src:
        return convert_lora(adapter_dir, out, src)
    from .lora_gguf import convert_peft_lora

    return convert_peft_lora(adapter_dir, out, gguf_path())


def merged_gguf(adapter_dir: str | os.PathLike) -> Path:
    """The shipped model with the adapter merged into its weights, as Q8_0 GGUF (`lora_gguf.merge_peft_lora`), kept
    beside the adapter: built on first use (~7 s on 2 cores), again when the adapter's weights are newer."""
    out = Path(adapter_dir) / "merged_q8_0.gguf"
    if _up_to_date(out, adapter_dir):
        return out
    from .lora_gguf import merge_peft_lora

    return merge_peft_lora(adapter_dir, out, gguf_path())


def load_llama(lora: str | os.PathLike | None = None, *, threads: int = 2, n_ctx: int = 2048) -> Any:
    """The shipped GGUF in llama.cpp, with a converted LoRA adapter applied (`convert_lora`) or none."""
    try:
        import llama_cpp
    except ImportError:
        raise ImportError(
            "llama-cpp-python is not installed: pip install llama-cpp-python (compiles llama.cpp)"
        ) from None
    return llama_cpp.Llama(
        model_path=str(gguf_path()),
        lora_path=None if lora is None else str(lora),
        n_threads=threads,
        n_threads_batch=threads,
        n_ctx=n_ctx,
        verbose=False,
    )


class LlamaCppGenerator(HFGenerator):
    """`HFGenerator`'s contract on llama.cpp: greedy, the same token ids (SmolLM2's tokenizer; the GGUF has the same
    vocabulary), the same pause check and logits processors, llama.cpp's KV cache kept for the common prefix."""

    def __init__(
        self, llm: Any, tokenizer: Any, *, max_new_tokens: int = 96, end: str | None = None, logits_processor=()
    ):
        super().__init__(llm, tokenizer, max_new_tokens=max_new_tokens, end=end)
        # as HFGenerator's generate(logits_processor=...): e.g. ForceThenFree
        self.extra = list(logits_processor)

    def _logits(self) -> torch.Tensor:
        import llama_cpp

        llm = self.model
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        return torch.from_numpy(row.copy())[None]

    def _feed(self, prompt_ids: list[int]) -> None:
        """Evaluate `prompt_ids`, reusing the cached prefix; the last token always runs, for its logits."""
        llm = self.model
        cached = llm.input_ids[: llm.n_tokens].tolist()
        keep = 0
        while keep < min(len(cached), len(prompt_ids) - 1) and cached[keep] == prompt_ids[keep]:
            keep += 1
        llm.n_tokens = keep  # eval() drops the cache past n_tokens first
        llm.eval(prompt_ids[keep:])

    @torch.no_grad()
    def __call__(
        self,
        text: str | tuple[str, ...],
        pause: Pause | None = None,
        allowed: AllowedTerms | None = None,
        answer: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        pairs: Sequence[tuple[str, str]] | None = None,
        in_order: bool = False,
    ) -> tuple[str, bool]:
        text, prompt_ids = self._prompt(text)
        processors = self.extra + self._processors(len(prompt_ids), allowed, answer, names, pairs, in_order)
        self._feed(prompt_ids)
        ids, new = list(prompt_ids), []
        for _ in range(self.max_new_tokens):
            scores = self._logits()
            for p in processors:
                scores = p(torch.tensor([ids]), scores)
            token = int(scores.argmax())
            new.append(token)
            if token == self.end_id:
                break
            ids.append(token)
            if pause is not None and pause(self.tokenizer.decode(new, skip_special_tokens=False)):
                break
            self._advance(ids)
        return self._done(text, prompt_ids, new)

    def score(self, text: str, continuations: Sequence[str]) -> list[float]:
        """As `HFGenerator.score`: the prefix evaluated once (its cache kept), each continuation token by token."""
        prefix = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        self._feed(prefix)
        last, result = self._logits(), []
        for cont in continuations:
            new, rows = self.tokenizer(cont, add_special_tokens=False)["input_ids"], [last]
            for token in new[:-1]:
                self.model.eval([token])
                rows.append(self._logits())
            self.model.n_tokens = len(prefix)  # the next eval drops this continuation from the cache
            logp = torch.cat(rows).float().log_softmax(-1)
            result.append(float(logp[torch.arange(len(new)), torch.tensor(new)].sum()))
        return result

    def _advance(self, ids: list[int]) -> None:
        """Evaluate the token just chosen (the last of `ids`), so `_logits` gives the next position's."""
        self.model.eval(ids[-1:])
