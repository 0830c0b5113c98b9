"""The peft -> GGUF LoRA converter that needs no llama.cpp source tree: names, the adapter keys, and the rotary
permutation of q/k's lora_B, which a converter that skips it gets silently wrong."""

import json

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from retllm_utils.chat.lora_gguf import convert_peft_lora, rotary_permute


def test_rotary_permute_interleaves_each_heads_two_halves():
    rows = np.arange(8, dtype=np.float32)[:, None]  # 2 heads of 4 rows: halves [0,1 | 2,3] -> 0,2,1,3
    assert rotary_permute(rows, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def _base(path, n_head=2, n_head_kv=1):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.attention.head_count", n_head)
    w.add_uint32("llama.attention.head_count_kv", n_head_kv)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _adapter(folder, r=2, **cfg):
    folder.mkdir()
    rng = np.random.default_rng(0)
    shapes = {"q_proj": 8, "k_proj": 4, "v_proj": 4}  # d_model 8, 2 heads of 4; 1 key-value head
    tensors = {}
    for mod, rows in shapes.items():
        p = f"base_model.model.model.layers.0.self_attn.{mod}"
        tensors[f"{p}.lora_A.weight"] = rng.standard_normal((r, 8)).astype(np.float32)
        tensors[f"{p}.lora_B.weight"] = rng.standard_normal((rows, r)).astype(np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    conf = {"peft_type": "LORA", "lora_alpha": 32, "r": r, **cfg}
    (folder / "adapter_config.json").write_text(json.dumps(conf))
    return tensors


def test_a_peft_adapter_converts_with_llama_cpp_names_alpha_and_permuted_q_k(tmp_path):
    tensors = _adapter(tmp_path / "adapter")
    out = convert_peft_lora(tmp_path / "adapter", tmp_path / "adapter.gguf", _base(tmp_path / "base.gguf"))
    reader = gguf.GGUFReader(str(out))
    assert reader.fields["general.type"].contents() == "adapter"
    assert reader.fields["adapter.type"].contents() == "lora"
    assert reader.fields["adapter.lora.alpha"].contents() == 32.0
    got = {t.name: np.asarray(t.data).reshape([int(d) for d in reversed(t.shape)]) for t in reader.tensors}
    p = "base_model.model.model.layers.0.self_attn"
    assert sorted(got) == sorted(f"blk.0.attn_{m}.weight.lora_{ab}" for m in ("q", "k", "v") for ab in ("a", "b"))
    assert np.array_equal(got["blk.0.attn_q.weight.lora_a"], tensors[f"{p}.q_proj.lora_A.weight"])
    assert np.array_equal(got["blk.0.attn_q.weight.lora_b"], rotary_permute(tensors[f"{p}.q_proj.lora_B.weight"], 2))
    assert np.array_equal(got["blk.0.attn_k.weight.lora_b"], rotary_permute(tensors[f"{p}.k_proj.lora_B.weight"], 1))
    assert np.array_equal(got["blk.0.attn_v.weight.lora_b"], tensors[f"{p}.v_proj.lora_B.weight"])  # not permuted
    assert not np.array_equal(got["blk.0.attn_q.weight.lora_b"], tensors[f"{p}.q_proj.lora_B.weight"])


def test_an_adapter_llama_cpp_cannot_hold_is_refused_and_nothing_is_written(tmp_path):
    _adapter(tmp_path / "adapter", use_dora=True)
    with pytest.raises(ValueError, match="plain LoRA"):
        convert_peft_lora(tmp_path / "adapter", tmp_path / "adapter.gguf", _base(tmp_path / "base.gguf"))
    assert not (tmp_path / "adapter.gguf").exists()
