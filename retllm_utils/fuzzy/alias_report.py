"""`fuzzy.aliases.measure`'s numbers as files: results/fuzzy_aliases.json and its table in results/thresholds.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from ..memory import ALIAS_FORMS
from ..paths import RESULTS
from .aliases import RESULTS_JSON

__all__ = ["markdown", "save"]

MD_START, MD_END = "<!-- fuzzy-aliases:start (fuzzy.alias_report.save) -->", "<!-- fuzzy-aliases:end -->"


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def markdown(res: Mapping[str, Any]) -> str:
    """`measure`'s numbers as the results/thresholds.md section (between its markers): what `save` writes there."""
    lines = [
        MD_START,
        "",
        f"`fuzzy_alias` chosen on Re-DocRED {res['splits']['calibration']} (precision >= {res['min_precision']} "
        f"per form, also 0.02 lower): {json.dumps(res['fuzzy_alias'])}. Pairs: two mention strings of one entity "
        "(aliases) and of two entities of one type in one document with close strings (negatives).",
        "",
        "| documents | role | aliases | recall: spelling / + aliases | negatives | false: spelling / + aliases "
        "| alias path: right / false |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for split in ("calibration", "held_out"):
        for group in ("subject", "object", "all"):
            r = res[split][group]
            sp, wa = r["spelling"], r["with_aliases"]
            right = sum(r[f]["added_right"] for f in ALIAS_FORMS)
            false = sum(r[f]["added_false"] for f in ALIAS_FORMS)
            lines.append(
                f"| {res['splits'][split]} ({split.replace('_', '-')}) | {group} | {r['positives']} "
                f"| {_f(sp['alias_recall'])} / {_f(wa['alias_recall'])} | {r['negatives']} "
                f"| {_f(sp['false_rate'])} / {_f(wa['false_rate'])} | {right} / {false} |"
            )
    shown = "; ".join(f'"{a}" / "{b}" ({t}, {c})' for t, a, b, c in res["examples"]["alias_false"]) or "none"
    lines += [
        "",
        f"{res['held_out_seen_in_calibration']} held-out pairs are string pairs of calibration documents too. "
        f"The alias path's held-out false stand-ins (type, cosine): {shown}.",
    ]
    for key, what in (
        ("spelling_false", "The spelling check's first held-out false stand-ins"),
        ("refused_aliases", "The first held-out aliases still refused"),
    ):
        pairs = "; ".join(f'"{a}" / "{b}" ({t}, {c})' for t, a, b, c in res["examples"].get(key, []))
        lines += ["", f"{what} (type, cosine): {pairs or 'none'}."]
    floors = [row[0] for row in res["other_paths"]["calibration"]["subject"]["any"]]
    lines += [
        "",
        "Other ways to let aliases through, on the pairs the rule refuses: pairs that would pass at each cosine floor, "
        "and the share of them that are aliases (calibration / held-out):",
        "",
        "| role | form | " + " | ".join(f"cosine >= {t}" for t in floors) + " |",
        "| --- | --- |" + " --- |" * len(floors),
    ]
    for role, forms in res["other_paths"]["calibration"].items():
        for form, rows in forms.items():
            held = res["other_paths"]["held_out"][role][form]
            cells = [f"{a[1]}: {_f(a[2])} / {b[1]}: {_f(b[2])}" for a, b in zip(rows, held)]
            lines.append(f"| {role} | {form} | " + " | ".join(cells) + " |")
    hits = res.get("company_collisions", [])
    shown = "; ".join(f'"{q}" -> "{o}" ({f}, {c}, {"stands in" if ok else "refused"})' for q, o, f, c, ok in hits)
    lines += [
        "",
        "The synthetic data set's companies (data/companies.txt, plain and in the stress set's forms) that are an "
        f"acronym form of another company (form, cosine, by the alias path alone): {shown or 'none'}.",
    ]
    lines += ["", "`fuzzy.stress`' test set, false stand-ins (spelling check / + aliases):", ""]
    lines += ["| kind: case | pairs | false: spelling / + aliases | right: spelling / + aliases |"]
    lines += ["| --- | --- | --- | --- |"]
    for case, a in res["near_misses"]["spelling"].items():
        b = res["near_misses"]["with_aliases"][case]
        lines.append(f"| {case} | {a['pairs']} | {a['false']} / {b['false']} | {a['right']} / {b['right']} |")
    lines += ["", MD_END]
    return "\n".join(lines)


def save(res: Mapping[str, Any], results: Path = RESULTS) -> Path:
    """Write `res` to results/fuzzy_aliases.json and its `markdown` between the markers of results/thresholds.md
    (appended the first time). Returns the JSON's path."""
    path = results / RESULTS_JSON
    path.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md = results / "thresholds.md"
    text = md.read_text(encoding="utf-8") if md.exists() else ""
    block = markdown(res)
    if MD_START in text and MD_END in text:
        pattern = re.escape(MD_START) + r".*?" + re.escape(MD_END)
        text = re.sub(pattern, lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    md.write_text(text, encoding="utf-8")
    return path
