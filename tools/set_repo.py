"""Point every Colab badge and every install cell's default clone at one GitHub repository.

    .venv/bin/python tools/set_repo.py OWNER/NAME   # rewrite retllm_utils/colab.py, the notebooks, README.md, docs/
    .venv/bin/python tools/set_repo.py --check      # exit 1 if a badge or a default names another repository

The one setting is `REPO` in retllm_utils/colab.py. The kit is to be published at that address; until it is (or on
a fork), run this with the repository you push the kit to, commit, and open the notebooks from there: the badges
open that repository's notebooks and their install cells clone it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLAB_PY = Path("retllm_utils/colab.py")
SETTING = re.compile(r'^REPO = "([\w.-]+/[\w.-]+)"$', re.M)
# a repository named in a Colab badge's target or a github.com address (the install cell's RETLLM_REPO)
ADDRESS = re.compile(r"(colab\.research\.google\.com/github/|github\.com/)([\w.-]+/[\w.-]*[\w-])(?![\w-])")
BADGE = re.compile(r"colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/main/notebooks/([\w.-]+\.ipynb)")


def _texts(root: Path) -> list[Path]:
    """The files that name the repository besides the setting: the notebooks, README.md and the docs pages."""
    return [
        *sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")),
        root / "README.md",
        *sorted((root / "docs").glob("*.md")),
    ]


def current(root: Path = ROOT) -> str:
    """The repository the setting names (owner/name)."""
    return SETTING.search((root / COLAB_PY).read_text(encoding="utf-8")).group(1)


def _rewrite(text: str, old: str, new: str) -> str:
    return ADDRESS.sub(lambda m: m.group(1) + new if m.group(2) == old else m.group(0), text)


def set_repo(new: str, root: Path = ROOT) -> list[Path]:
    """Rewrite every address of the current repository to `new`; the files changed."""
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", new):
        raise ValueError(f"expected OWNER/NAME as on GitHub; got {new!r}")
    old, changed = current(root), []
    for path in _texts(root):
        if path.suffix == ".ipynb":  # only the cells' sources; loaded and saved at once (others edit other cells)
            nb = json.loads(path.read_text(encoding="utf-8"))
            hit = False
            for cell in nb["cells"]:
                src = "".join(cell["source"])
                if (out := _rewrite(src, old, new)) != src:
                    cell["source"], hit = out.splitlines(keepends=True), True
            if hit:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
                changed.append(path)
        elif (text := path.read_text(encoding="utf-8")) != (out := _rewrite(text, old, new)):
            path.write_text(out, encoding="utf-8")
            changed.append(path)
    setting = root / COLAB_PY
    text = setting.read_text(encoding="utf-8")
    if (out := SETTING.sub(f'REPO = "{new}"', text)) != text:
        setting.write_text(out, encoding="utf-8")
        changed.append(setting)
    return changed


def problems(root: Path = ROOT) -> list[str]:
    """Badges or install cells that name another repository than the setting, and badges that open another notebook."""
    repo, out = current(root), []
    for path in _texts(root):
        name = path.relative_to(root)
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            text = "\n".join("".join(c["source"]) for c in cells)
            out += [f"{name}: its badge opens {nb}" for nb in BADGE.findall(text) if nb != path.name]
            code = next(("".join(c["source"]) for c in cells if c["cell_type"] == "code"), "")
            if f'RETLLM_REPO = "https://github.com/{repo}"' not in code:
                out.append(f"{name}: the install cell does not clone https://github.com/{repo}")
        else:
            text = path.read_text(encoding="utf-8")
        for m in ADDRESS.finditer(text):
            if m.group(2) != repo and "colab" in m.group(1):
                out.append(f"{name}: a Colab badge opens {m.group(2)}, not {repo}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", nargs="?", help="OWNER/NAME of the GitHub repository the kit is published at")
    ap.add_argument("--check", action="store_true", help="exit 1 if a badge or a default names another repository")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.check or not args.repo:
        found = problems(args.root)
        print("\n".join(found) or f"every badge and install cell names {current(args.root)}")
        return 1 if found else 0
    for path in set_repo(args.repo, args.root):
        print("rewrote", path.relative_to(args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
