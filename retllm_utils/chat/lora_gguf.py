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

`merge_peft_lora` instead writes the whole model with the adapter merged into its weights (W + B·A·alpha/r, per
projection, in the same layout), stored as Q8_0: llama.cpp then runs no LoRA at decoding time. Why Q8_0 and not the
shipped Q4_1: a LoRA's change to a weight is mostly smaller than Q4_1's rounding step, so re-rounding the merged
weights to Q4_1 would snap most of it back to the base model; Q8_0's step is ~16x finer. On 2 cores, write and read
turns on the merged Q8_0 model ran faster than on Q4_1 with the LoRA applied at run time (benchmarks/README.md,
"Controller").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["convert_peft_lora", "merge_peft_lora", "rotary_permute"]

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


def head_counts(base_gguf: Any) -> tuple[int, int]:
    """(attention heads, key-value heads) of the base model, read from its GGUF (a path, or a `gguf.GGUFReader`
    already open: reading the file parses its whole vocabulary, seconds): the permutation needs both."""
    import gguf

    reader = base_gguf if isinstance(base_gguf, gguf.GGUFReader) else gguf.GGUFReader(str(base_gguf))
    fields = reader.fields
    arch = fields["general.architecture"].contents()
    if arch != "llama":
        raise ValueError(f"the base GGUF is {arch!r}: this converter handles the 'llama' architecture only")
    return int(fields["llama.attention.head_count"].contents()), int(fields["llama.attention.head_count_kv"].contents())


def _lora_tensors(adapter_dir: Path, base_gguf: Any) -> tuple[dict, dict[str, np.ndarray]]:
    """(adapter config, {llama.cpp name + ".lora_a"/".lora_b": float32 array}), q/k's lora_B permuted; refuses what
    llama.cpp's single-alpha format cannot hold (DoRA, rsLoRA, per-module ranks)."""
    from safetensors.numpy import load_file

    cfg = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    if cfg.get("peft_type") != "LORA" or cfg.get("use_dora") or cfg.get("use_rslora") or cfg.get("modules_to_save"):
        raise ValueError(f"{adapter_dir}: only a plain LoRA converts (no DoRA, rsLoRA or modules_to_save)")
    if cfg.get("rank_pattern") or cfg.get("alpha_pattern"):
        raise ValueError(f"{adapter_dir}: per-module rank or alpha patterns do not fit one adapter.lora.alpha")
    n_head, n_head_kv = head_counts(base_gguf)
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    named = {}
    for key in sorted(tensors):
        m = _KEY.match(key)
        if m is None or m.group(2) not in MODULES:
            raise ValueError(f"{adapter_dir}: unexpected tensor {key!r} (a Llama LoRA on the linear projections)")
        block, module, ab = int(m.group(1)), m.group(2), m.group(3)
        data = tensors[key].astype(np.float32)
        if ab == "B" and module in ("self_attn.q_proj", "self_attn.k_proj"):
            data = rotary_permute(data, n_head if module == "self_attn.q_proj" else n_head_kv)
        named[f"blk.{block}.{MODULES[module]}.weight.lora_{ab.lower()}"] = np.ascontiguousarray(data)
    return cfg, named


def _write(writer: Any, out: Path, tmp: Path) -> Path:
    """Write header, metadata and tensors, then move the file into place: a failure leaves no half-written file."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


def convert_peft_lora(adapter_dir: str | Path, out: str | Path, base_gguf: str | Path) -> Path:
    """Write `adapter_dir`'s LoRA (adapter_config.json + adapter_model.safetensors) to `out` as a GGUF LoRA for the
    model in `base_gguf`."""
    import gguf

    cfg, named = _lora_tensors(Path(adapter_dir), base_gguf)
    out = Path(out)
    tmp = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(cfg["lora_alpha"]))
    for name, data in named.items():
        writer.add_tensor(name, data)
    return _write(writer, out, tmp)


def merge_peft_lora(adapter_dir: str | Path, out: str | Path, base_gguf: str | Path) -> Path:
    """Write the model of `base_gguf` with `adapter_dir`'s LoRA merged into its weights to `out`: every metadata key
    and untouched tensor copied as stored, each adapted projection dequantized, W + B·A·alpha/r, stored as Q8_0."""
    import gguf
    from gguf.quants import dequantize, quantize

    reader = gguf.GGUFReader(str(base_gguf))
    cfg, named = _lora_tensors(Path(adapter_dir), reader)
    scale = float(cfg["lora_alpha"]) / float(cfg["r"])
    out = Path(out)
    tmp = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(str(tmp), reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    for field in reader.fields.values():  # as gguf's own gguf_new_metadata script copies them
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    merged = set()
    for t in reader.tensors:
        a, b = named.get(t.name + ".lora_a"), named.get(t.name + ".lora_b")
        if a is None:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            continue
        w = dequantize(t.data, t.tensor_type) + scale * (b @ a)
        writer.add_tensor(t.name, quantize(w, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        merged.add(t.name)
    missing = {n.rsplit(".", 1)[0] for n in named} - merged
    if missing:
        raise ValueError(f"{adapter_dir}: the base model has no tensor {sorted(missing)[0]!r} to merge into")
    return _write(writer, out, tmp)
