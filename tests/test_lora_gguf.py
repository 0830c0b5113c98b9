"""The peft -> GGUF LoRA converter that needs no llama.cpp source tree: names, the adapter keys, and the rotary
permutation of q/k's lora_B, which a converter that skips it gets silently wrong; and the merge of an adapter into
the model's weights (Q8_0)."""

import json

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize, quantize
from safetensors.numpy import save_file

from retllm_utils.chat.lora_gguf import convert_peft_lora, merge_peft_lora, rotary_permute


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


def _base_with_weights(path, rng):
    """A 1-block Llama GGUF, d_model 32 (one Q4_1 block per row), 2 heads, 1 key-value head: q Q4_1, k and v F32."""
    Q41 = gguf.GGMLQuantizationType.Q4_1
    weights = {
        "blk.0.attn_q.weight": rng.standard_normal((32, 32)).astype(np.float32),
        "blk.0.attn_k.weight": rng.standard_normal((16, 32)).astype(np.float32),
        "blk.0.attn_v.weight": rng.standard_normal((16, 32)).astype(np.float32),
        "token_embd.weight": rng.standard_normal((4, 32)).astype(np.float32),
    }
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.attention.head_count", 2)
    w.add_uint32("llama.attention.head_count_kv", 1)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c", "d"])
    for name, x in weights.items():
        if name.endswith("attn_q.weight"):
            w.add_tensor(name, quantize(x, Q41), raw_dtype=Q41)
            weights[name] = dequantize(quantize(x, Q41), Q41)  # what the model really holds
        else:
            w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return weights


def test_a_merged_model_holds_w_plus_the_scaled_permuted_lora_and_copies_the_rest(tmp_path):
    rng = np.random.default_rng(1)
    base = _base_with_weights(tmp_path / "base.gguf", rng)
    folder, r, alpha = tmp_path / "adapter", 2, 8
    folder.mkdir()
    lora = {}
    for mod, rows in {"q_proj": 32, "k_proj": 16, "v_proj": 16}.items():
        p = f"base_model.model.model.layers.0.self_attn.{mod}"
        lora[mod] = (
            0.1 * rng.standard_normal((r, 32)).astype(np.float32),
            rng.standard_normal((rows, r)).astype(np.float32),
        )
        lora[f"{p}.lora_A.weight"], lora[f"{p}.lora_B.weight"] = lora[mod]
    save_file({k: v for k, v in lora.items() if k.startswith("base")}, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "lora_alpha": alpha, "r": r}))

    out = merge_peft_lora(folder, tmp_path / "merged.gguf", tmp_path / "base.gguf")
    reader = gguf.GGUFReader(str(out))
    assert reader.fields["llama.attention.head_count"].contents() == 2
    assert reader.fields["tokenizer.ggml.tokens"].contents() == ["a", "b", "c", "d"]
    got = {t.name: t for t in reader.tensors}
    for mod, heads in (("q", 2), ("k", 1), ("v", None)):
        a, b = lora[f"{mod}_proj"]
        delta = (alpha / r) * (b @ a)
        if heads:  # llama.cpp's rotary row order, as the weights it merges into
            delta = rotary_permute(delta, heads)
        t = got[f"blk.0.attn_{mod}.weight"]
        assert t.tensor_type == gguf.GGMLQuantizationType.Q8_0
        want = base[f"blk.0.attn_{mod}.weight"] + delta
        # Q8_0 rounds to 1/127 of each 32-value block's largest magnitude
        assert np.abs(dequantize(t.data, t.tensor_type) - want).max() <= np.abs(want).max() / 127
        assert np.abs(delta).max() > 10 * np.abs(want).max() / 127  # the change is far beyond that rounding
    assert got["token_embd.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert np.array_equal(np.asarray(got["token_embd.weight"].data), base["token_embd.weight"])


def test_a_merge_into_a_model_without_the_adapted_projection_is_refused_and_nothing_is_written(tmp_path):
    _base_with_weights(tmp_path / "base.gguf", np.random.default_rng(2))
    tensors = _adapter(tmp_path / "adapter")  # d_model 8: blocks of 8, not of the base model's 32
    folder = tmp_path / "adapter"
    (folder / "adapter_model.safetensors").unlink()
    extra = {k.replace("layers.0", "layers.3"): v for k, v in tensors.items() if "v_proj" in k}
    save_file(extra, str(folder / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match="no tensor 'blk.3.attn_v.weight'"):
        merge_peft_lora(folder, tmp_path / "merged.gguf", tmp_path / "base.gguf")
    assert not (tmp_path / "merged.gguf").exists() and not (tmp_path / "merged.gguf.part").exists()
