"""Write the README's result tables from the committed results (results/03_retllm.json, 06_table4.json, 07_table1.json).

    .venv/bin/python tools/readme_results.py           # rewrite the block between the markers in README.md
    .venv/bin/python tools/readme_results.py --check   # exit 1 if README.md is not what the results give (tests)

Notebooks 03, 06 and 07 write the JSON on the cpu profile; the README's numbers are never typed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README, RESULTS = ROOT / "README.md", ROOT / "results"
START, END = "<!-- memllm-results:start (tools/readme_results.py) -->", "<!-- memllm-results:end -->"
RET_START, RET_END = "<!-- retllm-results:start (tools/readme_results.py) -->", "<!-- retllm-results:end -->"
QUERY_TYPES = ("per", "per_org", "per_rel", "org", "rel", "org_rel")


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


def _ci(r: dict, m: str) -> str:
    if r.get(m) is None:
        return "–"
    return f"{r[m]:.2f} [{r[m + '_lo']:.2f}, {r[m + '_hi']:.2f}]" if r.get(m + "_lo") is not None else f"{r[m]:.2f}"


def retllm_tables(res: dict) -> list[str]:
    """RET-LLM per query type, with 95% bootstrap intervals: the test split, the paraphrase split, the baselines."""
    cols = [q for q in (*QUERY_TYPES, "write") if q in res["test"]]
    out = [
        f"Held-out test people ({res['test']['all']['n']:.0f} examples) and the paraphrase split "
        f"({res['paraphrase']['all']['n']:.0f} examples, phrasings the training never used); "
        f"{res['setup']}. Answer = the facts the answer states equal the memory's; 95% bootstrap intervals:",
        "",
        "| | " + " | ".join(f"`{q}`" for q in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for split, label in (("test", "test"), ("paraphrase", "paraphrase")):
        for m, name in (("api_em", "API-call exact match"), ("facts_acc", "answer (facts)")):
            cells = [_ci(res[split].get(q, {}), m) for q in cols]
            out.append(f"| RET-LLM, {label}: {name} | " + " | ".join(cells) + " |")
    for name, table in res.get("baselines", {}).items():
        for m, label in (("api_em", "API-call exact match"), ("facts_acc", "answer (facts)")):
            cells = [_ci(table.get(q, {}), m) for q in cols]
            if any(c != "–" for c in cells):
                n = table.get("all", {}).get("n")
                out.append(f"| {name} ({n:.0f} examples): {label} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| | invented names (share of examples) | false stand-ins (share of examples) |",
        "|---|---|---|",
    ]
    for name, r in res["rates"].items():
        out.append(f"| {name} | {_f(r.get('invented_rate'))} | {_f(r.get('false_sub_rate'))} |")
    return out + shape_tables(res)


def shape_tables(res: dict) -> list[str]:
    """The wide build's per-shape scores (trained shapes on test, held-out shapes on paraphrase) and the relations
    held out of training, where notebook 03 saved them."""
    out = []
    for name, table in (res.get("by_shape") or {}).items():
        cols = [
            c
            for c in (
                "statements",
                "writes exact",
                "stored exact",
                "questions",
                "read calls",
                "answers",
                "free answers",
            )
            if any(c in r for r in table.values())
        ]
        out += ["", f"Per shape, {name}:", "", "| shape | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
        for shape, r in table.items():
            cells = [str(r[c]) if c in ("statements", "questions") else _f(r.get(c)) for c in cols]
            out.append(f"| {shape} | " + " | ".join(cells) + " |")
    nr = res.get("new_relations")
    if nr:
        cols = ("write_exact", "names_exact", "write_names_relation_fuzzy", "answer_ok")
        out += [
            "",
            "Relations held out of training (Re-DocRED statements, read back with one question form):",
            "",
            "| relation | n | " + " | ".join(cols) + " |",
            "|---" * (len(cols) + 2) + "|",
        ]
        for rel, r in nr.items():
            out.append(f"| {rel} | {r['n']:.0f} | " + " | ".join(_f(r.get(c)) for c in cols) + " |")
    op = res.get("open_relations")
    if op:
        cols = ("write_exact", "writes_all", "write_names_relation_fuzzy", "answer_ok")
        out += [
            "",
            "Open relations held out of training (statements in the user's words, each read back by its relation's "
            "question in the same memory):",
            "",
            "| relation | n | " + " | ".join(cols) + " |",
            "|---" * (len(cols) + 2) + "|",
        ]
        for rel, r in op["write_read_back"].items():
            out.append(f"| {rel} | {r['n']:.0f} | " + " | ".join(_f(r.get(c)) for c in cols) + " |")
        q = op["scores"].get("per_rel", {})
        if q:
            out += [
                "",
                f"Their questions ({q['n']:.0f}, each over a few stored facts): read call exact "
                f"{_ci(q, 'api_em')}, the answer names exactly the gold answer's names {_ci(q, 'answer_acc')}.",
            ]
    return out


def retllm_block() -> str:
    """The README's RET-LLM block the committed results give."""
    lines = [RET_START, ""]
    f = RESULTS / "03_retllm.json"
    if f.is_file():
        lines += retllm_tables(json.loads(f.read_text())) + [""]
    else:
        lines += ["(no results/03_retllm.json yet: run notebook 03 on the cpu profile)", ""]
    return "\n".join(lines + [RET_END])


def memory_quality(res: dict) -> list[str]:
    """Row ③'s definition over memories of controlled recall and precision (notebook 07, ours)."""
    off = res["memory disabled (#2)"]
    out = [
        f"Row ③'s reads over memories of controlled quality ({res['documents']} documents; memory disabled, #2: "
        f"OVERALL {_f(off['OVERALL'])}, TARGET {_f(off['TARGET'])}):",
        "",
        "| recall | precision | OVERALL | TARGET | ENTITY | reads |",
        "|---|---|---|---|---|---|",
    ]
    for p in sorted(res["points"], key=lambda p: (p["precision"], p["recall"])):
        out.append(
            f"| {p['recall']} | {p['precision']} | {_f(p['OVERALL'])} | {_f(p['TARGET'])} | {_f(p['ENTITY'])} | "
            f"{p['reads']:.0f} |"
        )
    return out


def block() -> str:
    """The README's MemLLM block the committed results give."""
    lines = [START, ""]
    t4, t1 = RESULTS / "06_table4.json", RESULTS / "07_table1.json"
    if t4.is_file():
        res4 = json.loads(t4.read_text())
        lines += table4(res4) + [""]
        ex = res4.get("redocred_export")
        if ex:
            pub = ex["published"]
            lines += [
                f"The same MW[dev] in Re-DocRED's submission format, scored as its `evaluation.py` over "
                f"{ex['gold facts']} gold facts: P {_f(ex['precision'])}, R {_f(ex['recall'])}, F1 {_f(ex['f1'])} "
                f"({ex['facts']} facts; dropped, not guessed: {ex['dropped']}). For scale: {pub['model']}, "
                f"dev F1 {pub['F1']} ({pub['source']}).",
                "",
            ]
    else:
        lines += ["(no results/06_table4.json yet: run notebook 06 on the cpu profile)", ""]
    if t1.is_file():
        res = json.loads(t1.read_text())
        lines += table1(res["table1_all_docs"], f"Table 1 on {res['n_eval_docs']} dev documents:") + [""]
        if res.get("table1_written_docs") and res["n_written_docs"] < res["n_eval_docs"]:
            title = f"Table 1 on the {res['n_written_docs']} documents notebook 06 wrote (every row):"
            lines += table1(res["table1_written_docs"], title) + [""]
        lines += intervals(res["intervals"]) + [""]
        mq = RESULTS / "07_memory_quality.json"
        if mq.is_file():
            lines += memory_quality(json.loads(mq.read_text())) + [""]
    else:
        lines += ["(no results/07_table1.json yet: run notebook 07 on the cpu profile)", ""]
    return "\n".join(lines + [END])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that README.md is up to date")
    args = ap.parse_args()
    text = new = README.read_text()
    for start, end, make in ((RET_START, RET_END, retllm_block), (START, END, block)):
        if start not in new or end not in new:
            print(f"README.md has no {start} ... {end} block", file=sys.stderr)
            return 1
        a, b = new.index(start), new.index(end) + len(end)
        new = new[:a] + make() + new[b:]
    if args.check:
        if new != text:
            print("README.md's results differ from results/*.json: run tools/readme_results.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
