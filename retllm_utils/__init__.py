"""retllm_utils: the thin helper package behind the RET-LLM / MemLLM notebooks.

A flat core both papers share, and one subpackage per paper. Import from the module itself; nothing heavy is
imported here.

Core:
- `api`: the two memory-API text dialects, formatted and parsed (RET-LLM §3.2, MemLLM §3.2; every notebook).
- `escaping`: backslash escapes inside API terms: escape, split, find and unescape in linear time (for `api`).
- `memory`: the papers' reads — RET-LLM exact-then-fuzzy, MemLLM τ / Q_thr — as `MemoryReads` over any backend, and
  `TripleMemory`, them on SQLite (notebooks 03, 06, 07).
- `triple_store`: `TripleStore`, the one store interface both backends inherit: term checks and the term-length
  cap, writes, updates, inspection, import / export, written once.
- `phrase_index`: one faiss index per phrase kind (flat, LSH as RET-LLM, HNSW as MemLLM; notebook 08).
- `memory_io`: DataFrame / CSV / SQL import and export of a memory (any object with `__iter__` and `write_many`).
- `controller`: user ↔ model ↔ memory, hiding the API (RET-LLM Figures 3–5; notebooks 03, 09), paper-neutral.
- `models`: the offline LLM (SmolLM2 for Alpaca-7B / Mistral-7B) and phrase encoders (MiniLM for Contriever).
- `thresholds`: the encoders' similarity thresholds, papers' and measured ones (results/thresholds.md says how).
- `prompts`: one prompt format for RET-LLM training and inference (notebooks 02–03).
- `training`: span-masked LoRA SFT on TRL's SFTTrainer; `train_or_reuse`, retraining only when the recipe changed.
- `progress`: what a training shows: a live bar with the loss in JupyterLab / Colab, text lines elsewhere.
- `metrics`: precision/recall with one rule for empty sides, whole-word mentions (notebooks 02, 03, 06).
- `paths`: where data, figures and runs live; the profile names.
- `config`: typed per-profile settings: `ProfileConfig` (fields checked by name), `TrainConfig` (LoRA SFT).
- `colab`: the Colab set-up every notebook's install cell runs (pip, runs/ on Drive, the GPU); nothing elsewhere.

`backends/` — where a memory's triples live, each a `triple_store.TripleStore`; the package imports nothing:
- `sqlite`: `SqliteStore`, triples, phrases and vectors in one SQLite file, faiss indexes beside it (the papers').
- `postgres`: `PgTripleMemory` on PostgreSQL + pgvector, beyond both papers, so imported only when used (the
  `postgres` extra); `local_server`, `open_memory`.
- `pg_phrases`: the Postgres backend's `?`-placeholder connection, phrase ids and pgvector nearest-phrase search.

`chat/` — chat extras beyond both papers, each module imported only when used (notebook 09; 03 for `copying`):
- `session`: `ChatSession`, a RET-LLM chat and a MemLLM write/continue pad over live memories; `trace_lines`.
- `widgets`: notebook 09's ipywidgets tabs over a session: chat box, memory table and fact picker, MemLLM pad.
- `loading`: notebook 09's chat models (notebook 02's adapter, on transformers or llama.cpp; 05's two adapters).
- `copying`: decoding that copies call names from the user or the memory, answers held to the reply's facts.
- `llamacpp`: RET-LLM chat turns on llama.cpp (optional, CPU): the shipped GGUF, the adapter converted.
- `lora_gguf`: a peft LoRA adapter as a GGUF LoRA, or merged into the model's weights (Q8_0), with PyPI's gguf
  package (no llama.cpp source tree).
- `xllama`: llama.cpp from the prebuilt `xllamacpp` wheel through ctypes, for `llamacpp`'s generator (no compiler).

`fuzzy/` — calibrating RET-LLM's fuzzy read, beyond both papers (notebook 03): who may stand in for a term:
- `stress`: a labelled stress set of near misses (typos, namesakes, company forms, relation paraphrases).
- `matching`: that set scored by cosine and character similarity, threshold sweeps, calibration, plots.
- `aliases`: acronyms that may stand in ("USA" / "United States"), calibrated on Re-DocRED's entity mentions.
- `alias_report`: that calibration's numbers written to results/fuzzy_aliases.json and results/thresholds.md.

`retllm/` — RET-LLM (Modarressi et al., 2023):
- `synthetic`: the people–company data set from a `RetLLMConfig`, saved and loaded (§3.3, Tables 1–2; notebook 01).
- `generator`: how `synthetic` draws each example: name pools, query-type slots, scenes, statements, questions.
- `answers`: the memory's exact reply and the answer sentences that state it (`stated_facts` reads them back).
- `wide`: the wide build (`phrasings="wide"`): many more shapes, Re-DocRED relations, held-out splits.
- `wide_phrasings`: its shapes in one table, trained on or held out, and their templates.
- `wide_lexicon`: its words per relation, held-out words marked.
- `docred_mix`: Re-DocRED test-split sentences and gold triples for it; the relations held out entirely.
- `phrasings`: how that data set states each relation and asks each query type (the tables `generator` draws from).
- `evaluation`: held-out API exact match, answer accuracy, zero-shot baseline (§4, Figures 3–5; notebooks 02–03).
- `shape_report`: every metric per phrasing shape, trained or held out (notebook 03, wide build).
- `stand_ins`: false stand-ins, a fuzzy read's stored phrase that does not mean the gold term (notebook 03).
- `new_relations`: statements over relations held out of training, written and read back (notebook 03, wide build).
- `open_relations`: simple statements over other relations, stored in the user's words, some held out
  (experiments/open_relations.py).
- `config`: `RetLLMConfig`, the smoke / cpu / gpu settings of notebooks 01–03 and tools/train_accelerate.py.

`memllm/` — MemLLM (Modarressi et al., 2024):
- `docred`: Re-DocRED documents, gold triples, gold-memory lookups (§4; notebook 04).
- `examples`: the write training rows (§3.2, §3.3.1, App. D; notebook 04).
- `reads`: the read training rows and the dev documents Table 1 scores (§3.3.2, App. B–C; notebook 04).
- `dataset`: the DatasetDict notebook 04 builds and saves (`make_dataset`, `render`) and notebooks 05–06 load.
- `controller`: `MemLLMController` (§3.2): the write model per sentence, the read model reading mid-text.
- `generation`: the model step and the write call (App. A late stopping), decoded once for notebooks 05–07.
- `reading`: the read model's decoders on the same step: a read query as the official evaluation parses it, text.
- `perplexity`: Table 1 — OVERALL / TARGET / ENTITY NLL with memory reads, reference and fast evaluators (notebook 07).
- `table1`: Table 1's rows and documents (`prepare_doc`), the paper's numbers, aggregation, bootstrap intervals.
- `write_quality`: Table 4 — memory-write precision / recall, exact and embedding-matched (App. F; notebook 06).
- `submission`: the write model's triples in Re-DocRED's submission format, scored as its `evaluation.py` (nb. 06).
- `memory_quality`: memories of chosen recall and precision from gold triples: how good must a memory be (nb. 07).
- `config`: `MemLLMConfig`, the smoke / cpu / gpu settings of notebooks 04–07 and tools/train_accelerate.py.
"""

__version__ = "0.1.0"
