"""retllm_utils: the thin helper package behind the RET-LLM / MemLLM notebooks.

Modules, one concern each: `api` (both memory-API text dialects), `memory` (SQLite triple table + faiss
vectors), `controller` (user ↔ model ↔ memory), `models` (offline LLM and phrase encoders), `prompts`
(one prompt format for training and inference), `training` (span-masked LoRA SFT on TRL), `paths`.
Import what you need from the module itself; nothing heavy is imported here.
"""
__version__ = "0.1.0"
