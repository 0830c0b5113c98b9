"""Chat extras beyond both papers, each module imported only where it is used (nothing is imported here).

- `session`: notebook 09's RET-LLM chat and MemLLM write/continue pad over live memories; turns as trace lines.
- `widgets`: notebook 09's ipywidgets tabs over a session (the chat box, the memory table, the MemLLM pad).
- `loading`: notebook 09's chat models: the RET-LLM adapter (transformers or llama.cpp) and MemLLM's two adapters.
- `copying`: decoding that keeps call names copies of the user's words or stored phrases, answers to the reply's facts.
- `coordination`: the facts a list of names implies that a turn did not write ("Ann Lee and Bo Wu work at BMW").
- `llamacpp`: RET-LLM chat turns on llama.cpp (optional, CPU): the shipped GGUF with notebook 02's adapter converted.
"""
