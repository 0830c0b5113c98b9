"""A peft LoRA adapter of a Llama-architecture model (SmolLM2) as a llama.cpp GGUF LoRA file, with PyPI's `gguf`
package alone: no llama.cpp source tree, no compiler.

It does what llama.cpp's `convert_lora_to_gguf.py` does for `LlamaForCausalLM`: peft's tensor names mapped to
llama.cpp's (`...layers.N.self_attn.q_proj.lora_A.weight` -> `blk.N.attn_q.weight.lora_a`), the adapter keys
(`general.type` adapter, `adapter.type` lora, `adapter.lora.alpha`), and one step that is easy to miss: llama.cpp
stores the rows of W_q and W_k in its rotary layout (each head's two halves interleaved), so lora_B of q_proj and
k_proj is permuted the same way (with the attention and the key-value head counts); lora_A and the other modules
pass through. Compared once (outside the tests) on notebook 02's smoke adapter (r 16, 420 tensors), the output
equalled llama.cpp's converter's in every tensor's name, type, shape and data; only two descriptive metadata keys
differed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

__all__ = ["convert_peft_lora", "rotary_permute"]

MODULES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_KEY = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])\.weight$")


def rotary_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Rows of a q/k projection from transformers' rotary layout (halves) to llama.cpp's (interleaved), per head."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def head_counts(base_gguf: str | Path) -> tuple[int, int]:
    """(attention heads, key-value heads) of the base model, read from its GGUF: the permutation needs both."""
    import gguf

    fields = gguf.GGUFReader(str(base_gguf)).fields
    arch = fields["general.architecture"].contents()
    if arch != "llama":
        raise ValueError(f"the base GGUF is {arch!r}: this converter handles the 'llama' architecture only")
    return int(fields["llama.attention.head_count"].contents()), int(fields["llama.attention.head_count_kv"].contents())


def convert_peft_lora(adapter_dir: str | Path, out: str | Path, base_gguf: str | Path) -> Path:
    """Write `adapter_dir`'s LoRA (adapter_config.json + adapter_model.safetensors) to `out` as a GGUF LoRA for the
    model in `base_gguf`; refuses what llama.cpp's single-alpha format cannot hold (DoRA, rsLoRA, per-module ranks)."""
    import gguf
    from safetensors.numpy import load_file

    adapter_dir = Path(adapter_dir)
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    if cfg.get("peft_type") != "LORA" or cfg.get("use_dora") or cfg.get("use_rslora") or cfg.get("modules_to_save"):
        raise ValueError(f"{adapter_dir}: only a plain LoRA converts (no DoRA, rsLoRA or modules_to_save)")
    if cfg.get("rank_pattern") or cfg.get("alpha_pattern"):
        raise ValueError(f"{adapter_dir}: per-module rank or alpha patterns do not fit one adapter.lora.alpha")
    n_head, n_head_kv = head_counts(base_gguf)
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    out = Path(out)
    tmp = out.with_name(out.name + ".part")  # a failed conversion leaves no half-written adapter behind
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(cfg["lora_alpha"]))
    for key in sorted(tensors):
        m = _KEY.match(key)
        if m is None or m.group(2) not in MODULES:
            raise ValueError(f"{adapter_dir}: unexpected tensor {key!r} (a Llama LoRA on the linear projections)")
        block, module, ab = int(m.group(1)), m.group(2), m.group(3)
        data = tensors[key].astype(np.float32)
        if ab == "B" and module in ("self_attn.q_proj", "self_attn.k_proj"):
            data = rotary_permute(data, n_head if module == "self_attn.q_proj" else n_head_kv)
        writer.add_tensor(f"blk.{block}.{MODULES[module]}.weight.lora_{ab.lower()}", np.ascontiguousarray(data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out
