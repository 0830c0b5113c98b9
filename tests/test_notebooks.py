"""The committed notebooks open as users expect: checked on the JSON, nothing is executed (fast).

One `parameters` cell, no papermill `injected-parameters` cell left behind (an in-place run of
tools/run_notebooks.py removes it), the parameters validated first thing, one H2 heading per step, and
outputs free of the machine that ran them (paths, frozen progress bars).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MACHINE_PATHS = ("/work/", "/root/", "/tmp/", "/home/", "site-packages")
FROZEN_BAR = "  0%|"


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _output_text(output: dict) -> str:
    """Everything an output shows as text: stream text, the text mime types of display data, a traceback.

    Base64 images are left out: their alphabet holds '/' and letters, so '/tmp/' can occur in one by chance.
    """
    data = [v for k, v in output.get("data", {}).items() if not k.startswith("image/") or k == "image/svg+xml"]
    parts = [output.get("text", ""), *data, output.get("traceback", [])]
    return "\n".join("".join(p) if isinstance(p, list) else p if isinstance(p, str) else json.dumps(p) for p in parts)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_notebooks_found():
    assert len(NOTEBOOKS) >= 7, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_then_validation(path):
    cells = _load(path)["cells"]
    params = [i for i, c in enumerate(cells) if "parameters" in _tags(c)]
    assert len(params) == 1, f"{path.name}: {len(params)} cells tagged 'parameters'"
    injected = [c.get("id") for c in cells if "injected-parameters" in _tags(c)]
    assert not injected, f"{path.name}: papermill's injected-parameters cell left in: {injected}"
    after = next((c for c in cells[params[0] + 1 :] if c["cell_type"] == "code"), None)
    assert after is not None and "check_profile(profile)" in _src(after), (
        f"{path.name}: the first code cell after the parameters cell must call check_profile(profile)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_parses(path):
    """Papermill reads `name: type = value  # comment` lines; a second '=' on a line makes it skip the line."""
    (cell,) = [c for c in _load(path)["cells"] if "parameters" in _tags(c)]
    for line in _src(cell).splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert re.match(r"^\w+: [^=]+ = [^=]+?  # [^=]+$", line), f"{path.name}: parameters line {line!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_h2_headings(path):
    headings = [
        line
        for c in _load(path)["cells"]
        if c["cell_type"] == "markdown"
        for line in _src(c).splitlines()
        if line.startswith("## ")
    ]
    assert len(headings) >= 2, f"{path.name}: one '## ' heading per step expected, found {headings}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_outputs_clean(path):
    for cell in _load(path)["cells"]:
        for output in cell.get("outputs", []):
            text = _output_text(output)
            where = f"{path.name}, cell {cell.get('id')}"
            for p in MACHINE_PATHS:
                assert p not in text, f"{where}: output shows a path of the machine ({p!r}): {text[:200]!r}"
            assert FROZEN_BAR not in text, f"{where}: progress bar frozen at 0%: {text[:200]!r}"


def test_the_readme_memllm_tables_are_the_committed_results():
    # the README's MemLLM numbers are written from results/*.json by tools/readme_results.py, never by hand
    spec = importlib.util.spec_from_file_location("readme_results", ROOT / "tools" / "readme_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    readme = (ROOT / "README.md").read_text()
    assert mod.START in readme and mod.END in readme
    assert readme[readme.index(mod.START) : readme.index(mod.END) + len(mod.END)] == mod.block()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_kernelspec_as_jupyterlab_writes_it(path):
    # JupyterLab rewrites the kernelspec of the kernel it runs ("Python 3 (ipykernel)", ipykernel's default that
    # `make install` registers): a different one makes merely opening a notebook mark it modified
    spec = _load(path)["metadata"]["kernelspec"]
    assert spec == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}, path.name


def test_run_notebooks_runs_a_notebook_again_after_a_cell_timed_out(tmp_path):
    # a cell that hangs once (the first run leaves a flag file, then sleeps past the timeout) fails the first run;
    # --timeout-retries 1 runs the notebook again, which passes; without it the timeout fails the run. --checked then
    # keeps, for nbval, the executed copy up to its last NBVAL_CHECK_OUTPUT cell
    import subprocess
    import sys

    import nbformat

    root = Path(__file__).resolve().parents[1]
    flag = tmp_path / "hung_once"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("profile = 'cpu'", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            f"import pathlib, time\nflag = pathlib.Path({str(flag)!r})\n"
            "if not flag.exists():\n    flag.touch()\n    time.sleep(60)"
        ),
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(len('seeded'))"),
        nbformat.v4.new_code_cell("after_the_last_check = True"),
    ]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    path = tmp_path / "01_hang.ipynb"
    nbformat.write(nb, path)
    cmd = [sys.executable, str(root / "tools" / "run_notebooks.py"), "--profile", "smoke", "--cell-timeout", "5"]
    cmd += ["--out", str(tmp_path / "out")]
    once = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=120)
    assert once.returncode != 0 and "CellTimeoutError" in once.stderr + once.stdout
    flag.unlink()
    checked = tmp_path / "checked"
    again = subprocess.run(
        [*cmd, "--timeout-retries", "1", "--checked", str(checked), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "running 01_hang.ipynb again" in again.stdout
    full = _load(tmp_path / "out" / "01_hang.ipynb")["cells"]
    cut = _load(checked / "01_hang.ipynb")["cells"]
    assert cut == full[:-1] and "NBVAL_CHECK_OUTPUT" in _src(cut[-1]) and cut[-1]["outputs"], [_src(c) for c in cut]
