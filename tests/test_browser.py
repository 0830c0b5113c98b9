"""The kit as a user meets it: JupyterLab from the kit's venv, driven in headless Chromium (Selenium).

Notebook 01 is copied to a temp folder (the committed file is never touched), its parameters cell set to
`profile = "smoke"` by typing, and run with Run > Run All Cells; notebook 03's committed figure must render.
A tiny LoRA training in a scratch notebook must show its live progress bar with the loss (training.TrainingProgress).
Notebook 09's chat box gets a typed statement and its memory table must show the fact: with notebook 02's cpu
adapter where this checkout has one (runs/retllm/cpu/adapter_nomask, linked into the temp runs), else with a
scripted stand-in model that the test adds to the copy (a fresh clone has no adapter; the widgets are what is
tested then). `RETLLM_WIDGET_FIGURE=1` also saves the chat widget as figures/09_chat_widget.png, with the real
adapter only. Runs write under a temp RETLLM_RUNS. Screenshots land in test-artifacts/browser/ (git-ignored).
Needs Debian's chromium and chromium-driver (`apt-get install chromium chromium-driver`; .ci/run installs them):
without them the test is skipped, loudly, unless RETLLM_BROWSER_TEST=required (CI), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
RUN_TIMEOUT = 900  # s for notebook 01 on smoke: kernel start, imports, tokenizer (a first run converts the GGUF)


# a scratch notebook: 8 LoRA steps of a 2-layer Llama of width 16 on SmolLM2's vocabulary (seconds)
TRAINING_CELL = """\
import datasets
from transformers import AutoModelForCausalLM, LlamaConfig

from retllm_utils.models import load_model
from retllm_utils.training import lora_config, sft_config, train_lora

datasets.disable_progress_bars()
_, tok = load_model("smollm2-135m-instruct", device="cpu")
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
ids = tok("Ann Lee works for Pfizer. [MEM_WRITE{Ann Lee>>employed by>>Pfizer}]")["input_ids"]
ds = datasets.Dataset.from_dict({"input_ids": [ids] * 16, "labels": [ids] * 16})
args = sft_config("../training_out", max_steps=8, batch_size=2, logging_steps=1)
trainer = train_lora(AutoModelForCausalLM.from_config(cfg), tok, ds, args, lora_config(r=2, alpha=4))
"""
TRAINING_NOTEBOOK = {
    "cells": [{"cell_type": "code", "metadata": {}, "source": TRAINING_CELL, "outputs": [], "execution_count": None}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


CHAT_NOTEBOOK = "09_talk_to_the_memory.ipynb"
CHAT_MESSAGE = "Cleo Park works for BMW."
ADAPTER = ROOT / "runs" / "retllm" / "cpu" / "adapter_nomask"  # notebook 02's, where this checkout trained it
STAND_IN_CELL = """\
# added by tests/test_browser.py: no trained adapter in this checkout, so a scripted stand-in model writes a
# statement "A B works for C." to the memory and the test checks the widgets' path from chat box to memory table
import re

from retllm_utils.controller import ScriptedGenerator


def _stand_in(text: str) -> str:
    m = re.search(r"<user>(\\w+ \\w+) works for (\\w+)\\.</user><assistant>$", text)
    return f"[MEM_WRITE{{{m[1]}>>employed by>>{m[2]}}}]" if m else "Hello!"


session.controllers["stand-in"] = RetLLMController(
    ScriptedGenerator(_stand_in), session.memory, lambda u: f"<user>{u}</user><assistant>"
)
session.use("stand-in")
"""


def _chat_notebook(tmp: Path) -> None:
    """Notebook 09 for the chat-box test: the real adapter linked into the temp runs, else the stand-in cell added."""
    nb = json.loads((ROOT / "notebooks" / CHAT_NOTEBOOK).read_text(encoding="utf-8"))
    for cell in nb["cells"]:  # the committed outputs cleared: "Run All finished" and what it shows are this run's own
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    if (ADAPTER / "adapter_config.json").is_file():
        (tmp / "runs" / "retllm" / "cpu").mkdir(parents=True)
        (tmp / "runs" / "retllm" / "cpu" / ADAPTER.name).symlink_to(ADAPTER)
    else:
        at = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith("import ipywidgets"))
        nb["cells"].insert(
            at, {"cell_type": "code", "metadata": {}, "source": STAND_IN_CELL, "outputs": [], "execution_count": None}
        )
    (tmp / "notebooks" / CHAT_NOTEBOOK).write_text(json.dumps(nb), encoding="utf-8")


def _missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            return f"{exe} not found: apt-get install -y chromium chromium-driver"
    return None


def _skip_or_fail(reason: str) -> None:
    """Skip loudly (a warning in the summary too), or fail where the browser test is required (CI)."""
    msg = f"BROWSER TEST NOT RUN: {reason}"
    if os.environ.get("RETLLM_BROWSER_TEST") == "required":
        pytest.fail(msg)
    warnings.warn(msg, stacklevel=2)
    pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    """Poll `check` until it returns something truthy; TimeoutError naming `what` otherwise."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if got := check():
                return got
        except Exception:  # a page still loading, a server not up yet
            pass
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


FIGURE_NOTEBOOKS = ("03_zero_shot_vs_retllm.ipynb", "07_docred_perplexity_ablations.ipynb")  # committed figures


def _stop_with_children(proc: subprocess.Popen) -> None:
    """Stop JupyterLab and every process it started: a kernel left behind (its own session, so a signal to the server
    does not reach it) would hold the CPU that the tests after this module measure and run on."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _, alive = psutil.wait_procs(children, timeout=10)
    for p in alive:
        p.kill()
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[dict]:
    """JupyterLab on 127.0.0.1 (free port, token) serving a temp copy of notebooks 01, 03 and 07."""
    if reason := _missing():
        _skip_or_fail(reason)
    tmp = tmp_path_factory.mktemp("lab")
    (tmp / "notebooks").mkdir()
    for name in ("01_synthetic_data.ipynb", *FIGURE_NOTEBOOKS):
        shutil.copy(ROOT / "notebooks" / name, tmp / "notebooks" / name)
    (tmp / "notebooks" / "training_progress.ipynb").write_text(json.dumps(TRAINING_NOTEBOOK), encoding="utf-8")
    _chat_notebook(tmp)
    # every cell in the page (no windowing), so "all cells ran" is checked on all of them; no news prompt
    settings = tmp / "settings" / "@jupyterlab"
    for plugin, value in (
        ("notebook-extension/tracker", {"windowingMode": "none"}),
        ("apputils-extension/notification", {"fetchNews": "false", "checkForUpdates": False}),
    ):
        (settings / plugin).parent.mkdir(parents=True, exist_ok=True)
        (settings / f"{plugin}.jupyterlab-settings").write_text(json.dumps(value))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),  # no user config or settings of this machine
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "RETLLM_RUNS": str(tmp / "runs"),  # the smoke run's data set and figures stay out of the repo
    }
    cmd = [
        str(Path(sys.executable).with_name("jupyter")),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp}",
        f"--LabApp.user_settings_dir={tmp / 'settings'}",
        f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]
    log = open(tmp / "jupyter.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(
            "JupyterLab answering /api/status",
            lambda: urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).status == 200,
            120,
        )
        yield {"base": base, "token": token, "dir": tmp, "log": tmp / "jupyter.log"}
    finally:
        _stop_with_children(proc)
        log.close()


@pytest.fixture(scope="module")
def browser(lab) -> Iterator[Any]:
    """Headless Debian Chromium through its own chromedriver (nothing downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",  # closed network: no calls home
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={lab['dir'] / 'chromium'}",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: Any, lab: dict, name: str) -> None:
    """Open notebooks/NAME in JupyterLab; wait until every code cell is on the page and the kernel is idle."""
    cells = json.loads((lab["dir"] / "notebooks" / name).read_text(encoding="utf-8"))["cells"]
    n_code = sum(c["cell_type"] == "code" for c in cells)
    driver.get(f"{lab['base']}/lab/tree/notebooks/{name}?token={lab['token']}")
    _wait(f"{name}: its {n_code} code cells shown", lambda: len(_prompts(driver)) == n_code, 120)
    _kernel_idle(driver, name, 180)


def _kernel_idle(driver: Any, name: str, timeout: float) -> None:
    """The toolbar's kernel status reads idle (JupyterLab 4: `.jp-Notebook-ExecutionIndicator[data-status]`)."""
    sel = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator"
    _wait(
        f"{name}: kernel idle",
        lambda: driver.find_element("css selector", sel).get_attribute("data-status") == "idle",
        timeout,
    )


def _prompts(driver: Any) -> list[str]:
    """The input prompts of the open notebook's code cells ('[3]:' ran, '[*]:' running or queued, '[ ]:' not run)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]"
        ".map(e => e.innerText.trim())"
    )


def _ran(prompt: str) -> bool:
    """An input prompt with an execution count: the cell ran."""
    return re.fullmatch(r"\[\d+\]:", prompt) is not None


def _menu(driver: Any, menu: str, label: str) -> None:
    """Click a main-menu entry by its labels, e.g. Run > Run All Cells."""
    bar = driver.find_elements("css selector", ".lm-MenuBar-item")
    next(b for b in bar if b.text.strip() == menu).click()
    item = _wait(
        f"menu item {menu} > {label}",
        lambda: next(
            e
            for e in driver.find_elements("css selector", ".lm-Menu-item")
            if e.find_element("css selector", ".lm-Menu-itemLabel").text.strip() == label
        ),
        10,
    )
    item.click()


def _parameters_cell(driver: Any) -> Any:
    """The editor of the code cell that starts with `profile: str` (notebook 01's parameters cell)."""
    editors = driver.find_elements("css selector", ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .cm-content")
    return next(e for e in editors if e.text.startswith("profile"))


def test_notebook_01_runs_on_smoke_in_jupyterlab(lab, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    driver = browser
    _open(driver, lab, "01_synthetic_data.ipynb")
    cell = _wait("the parameters cell", lambda: _parameters_cell(driver), 30)
    assert cell.text.startswith('profile: str = "cpu"'), cell.text[:80]
    # as a user would: clear the committed outputs, click into the parameters cell, type over its first line
    _menu(driver, "Edit", "Clear Outputs of All Cells")
    _wait("outputs cleared", lambda: not any(_ran(p) for p in _prompts(driver)), 30)
    cell.click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys(Keys.HOME).key_up(Keys.CONTROL).perform()
    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.END).key_up(Keys.SHIFT).perform()
    ActionChains(driver).send_keys('profile = "smoke"').perform()  # an auto-closed quote is typed over
    _wait(
        "the edited parameters line", lambda: _parameters_cell(driver).text.splitlines()[0] == 'profile = "smoke"', 10
    )
    driver.save_screenshot(str(SHOTS / "01_parameters_smoke.png"))

    _menu(driver, "Run", "Run All Cells")
    prompts = lambda: _prompts(driver)  # noqa: E731
    try:
        _wait("Run All started", lambda: any(p == "[*]:" or _ran(p) for p in prompts()), 60)
        # done: nothing running or queued (an error clears the queue, leaving later cells unrun)
        _wait("Run All finished", lambda: "[*]:" not in prompts(), RUN_TIMEOUT, 2)
    finally:
        driver.save_screenshot(str(SHOTS / "01_after_run_all.png"))
    _kernel_idle(driver, "01_synthetic_data.ipynb", 60)

    outputs = driver.execute_script(
        "return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]"
        ".map(e => e.innerText)"
    )
    errors = [text[:800] for text in outputs if "Traceback (most recent call last)" in text]
    assert not errors, f"a cell errored: {errors}"
    assert all(_ran(p) for p in prompts()), f"cells left unrun: {prompts()}"
    texts = [text.strip() for text in outputs]
    assert "profile: smoke" in texts, f"the validation cell did not print 'profile: smoke': {texts[:4]}"
    assert any(t.startswith("smoke {'n_train': 40") for t in texts), f"smoke sizes not used: {texts[:4]}"
    last = driver.find_elements("css selector", ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")[-1]
    driver.execute_script("arguments[0].scrollIntoView()", last)
    driver.save_screenshot(str(SHOTS / "01_end.png"))


@pytest.mark.parametrize("name", FIGURE_NOTEBOOKS)
def test_a_committed_figure_renders(lab, browser, name):
    driver = browser
    _open(driver, lab, name)
    sel = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img"
    img = _wait("a figure (<img>) in an output area", lambda: driver.find_element("css selector", sel), 60)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", img)
    size = _wait(
        "the figure decoded",
        lambda: driver.execute_script(
            "return arguments[0].complete && [arguments[0].naturalWidth, arguments[0].naturalHeight]", img
        ),
        30,
    )
    assert size[0] > 200 and size[1] > 100, f"figure of {size} px"
    driver.save_screenshot(str(SHOTS / f"{name[:2]}_figure.png"))


def test_training_shows_a_live_bar_with_the_loss(lab, browser):
    driver = browser
    _open(driver, lab, "training_progress.ipynb")
    _menu(driver, "Run", "Run All Cells")
    _wait("training started", lambda: any(p == "[*]:" or _ran(p) for p in _prompts(driver)), 60)
    try:
        _wait("training finished", lambda: all(_ran(p) for p in _prompts(driver)), 600, 2)
    finally:
        driver.save_screenshot(str(SHOTS / "training_progress_bar.png"))
    text = driver.execute_script(
        "return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]"
        ".map(e => e.innerText).join('\\n')"
    )
    assert "Traceback" not in text, text[-2000:]
    bars = driver.find_elements("css selector", ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea .jupyter-widgets")
    assert bars, f"no progress-bar widget in the output: {text[-800:]!r}"
    text = text.replace("\u2007", " ")  # tqdm pads the widget's text with figure spaces
    assert "training: 100%" in text and "8/8" in text and "loss=" in text, f"bar without its loss: {text[-800:]!r}"
    assert "step 8/8" not in text  # text lines are for papermill and terminals, not under a live bar


def test_the_chat_box_writes_the_memory_table(lab, browser):
    from selenium.webdriver.common.keys import Keys

    driver = browser
    _open(driver, lab, CHAT_NOTEBOOK)
    _menu(driver, "Run", "Run All Cells")
    _wait("Run All started", lambda: any(p == "[*]:" or _ran(p) for p in _prompts(driver)), 60)
    try:
        _wait("Run All finished", lambda: "[*]:" not in _prompts(driver), RUN_TIMEOUT, 2)
    finally:
        driver.save_screenshot(str(SHOTS / "09_after_run_all.png"))
    _kernel_idle(driver, CHAT_NOTEBOOK, 60)
    outputs = driver.execute_script(
        "return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]"
        ".map(e => e.innerText)"
    )
    errors = [text[:800] for text in outputs if "Traceback (most recent call last)" in text]
    assert not errors, f"a cell errored: {errors}"
    real = any(t.startswith("RET-LLM adapter: ") and "/retllm/cpu/adapter_nomask on" in t for t in outputs)
    assert real == (ADAPTER / "adapter_config.json").is_file(), outputs[:6]

    sel = ".jp-NotebookPanel:not(.lm-mod-hidden) input[placeholder^='Tell me a fact']"
    box = _wait("the chat box", lambda: driver.find_element("css selector", sel), 60)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", box)
    box.click()
    box.send_keys(CHAT_MESSAGE, Keys.ENTER)  # Enter sends (the Text widget's value syncs on Enter)
    tab = box.find_element("xpath", "ancestor::div[contains(concat(' ', @class, ' '), ' widget-tab ')]")

    def table_row() -> bool:
        tables = tab.find_elements("css selector", "table")
        return any("Cleo Park" in t.text and "BMW" in t.text for t in tables)

    try:
        _wait("the typed fact in the memory table", table_row, 120, 1)
    finally:
        driver.save_screenshot(str(SHOTS / "09_chat_box.png"))
    log = tab.text
    assert f"USER  {CHAT_MESSAGE}" in log and "controller → memory: write ('Cleo Park'" in log, log[-1500:]
    if os.environ.get("RETLLM_WIDGET_FIGURE") == "1":
        assert real, "the committed widget figure is taken with notebook 02's adapter, not the stand-in"
        tab.screenshot(str(ROOT / "figures" / "09_chat_widget.png"))
