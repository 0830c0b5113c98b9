"""Training progress users can see: a live bar with the loss in JupyterLab and Colab, text lines elsewhere.

`training.train_lora` adds `TrainingProgress` to every training (notebooks 02 and 05, tools/train_accelerate.py).
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any

from transformers import TrainerCallback

__all__ = ["TrainingProgress", "live_frontend"]


def live_frontend() -> bool:
    """True in a kernel that a Jupyter server (JupyterLab, Notebook) or Colab displays live: there a widget bar moves.

    papermill's kernel has no live view (it saves a widget's first frame, a bar frozen at 0%), nor has a terminal.
    """
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    if shell is None or "IPKernelApp" not in shell.config:
        return False
    return "JPY_SESSION_NAME" in os.environ or "google.colab" in sys.modules


def _duration(seconds: float) -> str:
    """h:mm:ss or m:ss, as tqdm writes them."""
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


class TrainingProgress(TrainerCallback):
    """Training progress users can see: a tqdm bar with the loss where it updates live, else a text line every N steps.

    The lines (step, %, loss, lr, elapsed, left) go to stdout, so papermill keeps them in the notebook and prints them
    with `--log-output`; `every=None` prints about 20 lines per training, at logging steps (`logging_steps`).
    """

    def __init__(self, *, bar: bool | None = None, every: int | None = None, file: Any = None) -> None:
        self.bar, self.every, self.file = bar, every, file
        self._tqdm: Any = None

    @property
    def _out(self) -> Any:
        """Where the lines go: `file`, else stdout at call time (papermill and pytest swap it)."""
        return self.file or sys.stdout

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0, self._printed = time.monotonic(), 0
        self._every = self.every or max(args.logging_steps, math.ceil(state.max_steps / 20))
        if self.bar if self.bar is not None else live_frontend():
            from tqdm.auto import tqdm

            self._tqdm = tqdm(total=state.max_steps, desc="training", unit="step", dynamic_ncols=True)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._tqdm is not None:
            self._tqdm.update(state.global_step - self._tqdm.n)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        # the closing summary: steps logged every N end short of 100%
        if self._tqdm is None and "train_loss" in logs:
            took = _duration(time.monotonic() - self._t0)
            print(
                f"done: {state.global_step} steps · mean loss {logs['train_loss']:.4f} · {took}",
                file=self._out,
                flush=True,
            )
            return
        if "loss" not in logs:
            return
        if self._tqdm is not None:
            self._tqdm.set_postfix(loss=f"{logs['loss']:.4f}", refresh=True)
            return
        step, total = state.global_step, state.max_steps
        if step - self._printed < self._every and step < total:
            return
        self._printed = step
        spent = time.monotonic() - self._t0
        left = spent / step * (total - step) if step else 0.0
        lr = f" · lr {logs['learning_rate']:.2e}" if "learning_rate" in logs else ""
        print(
            f"step {step}/{total} ({100 * step / total:.0f}%) · loss {logs['loss']:.4f}{lr}"
            f" · {_duration(spent)} elapsed, ~{_duration(left)} left",
            file=self._out,
            flush=True,
        )

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
