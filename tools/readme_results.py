"""Write the README's MemLLM result tables from the committed results (results/06_table4.json, 07_table1.json).

    .venv/bin/python tools/readme_results.py           # rewrite the block between the markers in README.md
    .venv/bin/python tools/readme_results.py --check   # exit 1 if README.md is not what the results give (tests)

Notebooks 06 and 07 write the JSON on the cpu profile; the README's numbers are never typed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README, RESULTS = ROOT / "README.md", ROOT / "results"
START, END = "<!-- memllm-results:start (tools/readme_results.py) -->", "<!-- memllm-results:end -->"


def _f(x: float | None, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def table4(res: dict) -> list[str]:
    """Table 4: our decodings beside the paper's row for the same decoding (embedding-matched P/R)."""
    out = [
        f"Table 4 (write quality; {res['n_sentences']} focus sentences of {res['n_docs']} dev documents, "
        f"embedding match with {res['embedder']}):",
        "",
        "| decoding | exact P | exact R | emb. P | emb. R | paper Rec. / Prec. |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in res["table4"].items():
        out.append(
            f"| {name} | {_f(r['exact P'])} | {_f(r['exact R'])} | {_f(r['emb. P'])} | {_f(r['emb. R'])} | "
            f"{r['paper Rec. / Prec.']} |"
        )
    return out


def table1(rows: dict, title: str) -> list[str]:
    """Table 1 rows (mean token NLL, the paper's "PPL"), ours beside the paper's."""
    out = [
        title,
        "",
        "| row | OVERALL | TARGET | ENTITY | paper O / T / E | reads / read points |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        paper = " / ".join(_f(r[f"paper {m}"]) for m in ("OVERALL", "TARGET", "ENTITY"))
        reads = "–" if r.get("reads") is None else f"{r['reads']:.0f} / {r['read points']:.0f}"
        out.append(
            f"| {name} | {_f(r.get('OVERALL'))} | {_f(r.get('TARGET'))} | {_f(r.get('ENTITY'))} | {paper} | {reads} |"
        )
    return out


def intervals(rows: list[dict]) -> list[str]:
    """The paper's claimed orderings: our difference a - b with its paired-bootstrap 95% interval, per metric."""
    claims: dict[str, dict] = {}
    for r in rows:
        c = claims.setdefault(r["claim"], {"documents": r["documents"]})
        c[r["metric"]] = (
            f"{r['ours a - b']:+.3f} [{r['95% low']:+.3f}, {r['95% high']:+.3f}] {r['holds at 95%']} "
            f"(paper {r['paper a - b']:+.3f})"
        )
    out = [
        "Paper's orderings (a − b > 0 means the paper's order; 95% paired bootstrap over documents):",
        "",
        "| claim | docs | OVERALL | TARGET | ENTITY |",
        "|---|---|---|---|---|",
    ]
    for claim, c in claims.items():
        cells = [c.get(m, "–") for m in ("OVERALL", "TARGET", "ENTITY")]
        out.append(f"| {claim} | {c['documents']} | " + " | ".join(cells) + " |")
    return out


def block() -> str:
    """The README block the committed results give."""
    lines = [START, ""]
    t4, t1 = RESULTS / "06_table4.json", RESULTS / "07_table1.json"
    if t4.is_file():
        lines += table4(json.loads(t4.read_text())) + [""]
    else:
        lines += ["(no results/06_table4.json yet: run notebook 06 on the cpu profile)", ""]
    if t1.is_file():
        res = json.loads(t1.read_text())
        lines += table1(res["table1_all_docs"], f"Table 1 on {res['n_eval_docs']} dev documents:") + [""]
        if res.get("table1_written_docs"):
            title = f"Table 1 on the {res['n_written_docs']} documents notebook 06 wrote (every row):"
            lines += table1(res["table1_written_docs"], title) + [""]
        lines += intervals(res["intervals"]) + [""]
    else:
        lines += ["(no results/07_table1.json yet: run notebook 07 on the cpu profile)", ""]
    return "\n".join(lines + [END])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that README.md is up to date")
    args = ap.parse_args()
    text = README.read_text()
    if START not in text or END not in text:
        print(f"README.md has no {START} ... {END} block", file=sys.stderr)
        return 1
    a, b = text.index(START), text.index(END) + len(END)
    new = text[:a] + block() + text[b:]
    if args.check:
        if new != text:
            print("README.md's MemLLM results differ from results/*.json: run tools/readme_results.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
