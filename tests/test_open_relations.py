"""Open relations: every generated row says what its call stores, no held-out relation reaches training rows, the
same seed gives the same rows, and the read-back scoring uses the relation's own question over prefilled facts."""

import re

import pytest

from retllm_utils.api import MemRead, MemWrite, parse_retllm
from retllm_utils.controller import ScriptedGenerator
from retllm_utils.models import NgramEmbedder
from retllm_utils.retllm import open_relations as op
from retllm_utils.retllm.answers import lookup
from retllm_utils.retllm.new_relations import evaluate_new_relations, summarize_new_relations

PEOPLE = [f"{a} {b}" for a in ("Ann", "Bo", "Cleo", "Dev", "Eli") for b in ("Park", "Moss", "Ruiz")]


@pytest.mark.parametrize("held_out", [False, True])
def test_each_row_parses_back_to_its_triples_and_says_them(held_out):
    rows = op.rows(120, PEOPLE, held_out=held_out, seed=3)
    for r in rows:
        calls = parse_retllm(r["api"])
        if r["kind"] == "write":
            written = [list(t) for c in calls for t in c.triples]
            assert all(isinstance(c, MemWrite) for c in calls) and written == r["triples"]
            for s, rel, o in written:  # every term is the user's own words
                assert s in r["user"] and rel in r["user"] and o in r["user"]
        else:
            (call,) = calls
            assert isinstance(call, MemRead) and list(call.queries[0]) == r["query"]
            assert lookup(r["memory"], r["query"]) == r["triples"]
            assert r["answer"] == op.answer(r["triples"])
    assert {r["phrasing"] for r in rows} == {"open_single", "open_two", "open_question"}


def test_no_held_out_relation_in_a_training_row():
    held = set(op.HELD_OUT)
    rows = op.rows(400, PEOPLE, held_out=False, seed=0)
    used = {t[1] for r in rows for t in r["triples"] + r["memory"]} | {r["query"][1] for r in rows if r["query"]}
    assert used and not used & held
    assert not any(re.search(rf"\b{re.escape(h)}\b", r["user"]) for r in rows for h in held)
    assert {t[1] for r in op.rows(100, PEOPLE, held_out=True, seed=0) for t in r["triples"]} <= held
    assert held <= {r.predicate for r in op.RELATIONS} and len(op.relations(False)) == len(op.RELATIONS) - len(held)


def test_same_seed_same_rows_other_seed_other_rows():
    assert op.rows(50, PEOPLE, held_out=True, seed=1) == op.rows(50, PEOPLE, held_out=True, seed=1)
    assert op.rows(50, PEOPLE, held_out=True, seed=1) != op.rows(50, PEOPLE, held_out=True, seed=2)


def test_question_names_the_subject_for_every_relation():
    for r in op.RELATIONS:
        assert "Ann Park" in op.question(("Ann Park", r.predicate, "x"))
    with pytest.raises(StopIteration):
        op.question(("Ann Park", "no such relation", "x"))


def test_read_back_uses_the_relation_question_over_prefilled_facts():
    row = {
        "id": "o0",
        "user": "Ann Park lives in Lyon and is married to Bo Moss.",
        "triples": [["Ann Park", "lives in", "Lyon"], ["Ann Park", "is married to", "Bo Moss"]],
        "memory": [["Cleo Ruiz", "lives in", "Porto"]],
    }

    def script(text):
        user = re.search(r"<user>(.*)</user>", text, re.S).group(1)
        done = text.split("<assistant>", 1)[1]
        if user.startswith("Ann Park lives"):
            return "[MEM_WRITE{Ann Park>>lives in>>Lyon}]"  # the second fact left out
        if not done:
            assert user == "Which city does Ann Park live in?"
            return "[MEM_READ{>>lives in>>}:"
        objects = [t.object for c in parse_retllm(done) for t in (c.results or ())]
        return " ".join(objects) + "."

    df = evaluate_new_relations(
        None,
        None,
        [row],
        NgramEmbedder(),
        generator=ScriptedGenerator(script),
        prompt_fn=lambda u: f"<user>{u}</user><assistant>",
        question_of=op.question,
        prefill=True,
    )
    assert df.loc[0, "write_exact"] and not df.loc[0, "writes_all"]
    assert df.loc[0, "answer"] == "Porto Lyon."  # the prefilled fact was in memory
    assert summarize_new_relations(df).loc["all", "writes_all"] == 0.0


def _experiment():
    """experiments/open_relations.py as a module (experiments/ is not a package)."""
    import importlib.util

    from retllm_utils.paths import ROOT

    spec = importlib.util.spec_from_file_location(
        "open_relations_experiment", ROOT / "experiments" / "open_relations.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_readme_table_is_the_committed_results():
    import json

    from retllm_utils.paths import ROOT

    mod = _experiment()
    readme = (ROOT / "experiments" / "README.md").read_text()
    for name in ("open_relations", "open_relations_180"):
        result = json.loads((ROOT / "experiments" / "results" / f"{name}.json").read_text())
        assert mod.markdown(result) in readme, name
    assert mod.seeds_table() in readme  # the training-seed spread: six runs' JSONs
    assert mod.more_table() in readme and mod.scale_table() in readme  # 22 against 48 relations; more training rows
    assert mod.balance_table() in readme  # training questions' verbs drawn or balanced, two seeds each
    assert mod.questions_table() in readme and mod.order_table() in readme  # more questions; the facts in order
    assert mod.role_table() in readme  # three seeds in order; the two read rules
    assert mod.epochs_table() in readme  # two training epochs against notebook 02's one
    assert mod.neftune_table() in readme  # NEFTune against notebook 02's recipe, two seeds
    assert mod.rank_table() in readme  # LoRA rank 64 against notebook 02's 16, three seeds
    assert mod.multi_table() in readme  # two turns per multi-fact shape against notebook 02's one, two seeds
    assert mod.soup_table() in readme  # two seeds' weight updates averaged against each seed, two recipes
    assert mod.named_table() in readme  # notebook 02's adapter with and without the named-writes rule
    assert mod.mask_table() in readme  # notebook 02's masked adapter against its whole-sequence one
    assert mod.mask_seeds_table() in readme  # the loss mask against the whole sequence at three seeds; soups
    assert mod.lr_table() in readme  # a learning rate of 2e-3 against notebook 02's 1e-3, three seeds
    assert mod.mask_lr_table() in readme  # the two losses at 2e-3, three seeds each


def test_more_relations_add_predicates_but_never_a_held_out_one():
    held = set(op.HELD_OUT)
    more = {r.predicate for r in op.MORE_RELATIONS}
    assert more and not more & held and not more & {r.predicate for r in op.RELATIONS}
    assert [r.predicate for r in op.relations(False, more=True)][-len(more) :] == [
        r.predicate for r in op.MORE_RELATIONS
    ]
    rows = op.rows(400, PEOPLE, held_out=False, seed=0, more=True)
    used = {t[1] for r in rows for t in r["triples"] + r["memory"]} | {r["query"][1] for r in rows if r["query"]}
    assert more <= used and not used & held
    assert not any(re.search(rf"\b{re.escape(h)}\b", r["user"]) for r in rows for h in held)
    assert op.rows(100, PEOPLE, held_out=True, seed=0, more=True) == op.rows(100, PEOPLE, held_out=True, seed=0)
    assert op.rows(50, PEOPLE, held_out=False, seed=0) != op.rows(50, PEOPLE, held_out=False, seed=0, more=True)
    for r in op.MORE_RELATIONS:
        assert "Ann Park" in op.question(("Ann Park", r.predicate, "x"))


def test_a_soup_adapter_is_the_mean_of_its_members_weight_updates(tmp_path):
    import copy
    import json

    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    mod = _experiment()
    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    torch.manual_seed(0)
    base = LlamaForCausalLM(cfg)
    members, deltas = [], []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = get_peft_model(LlamaForCausalLM(cfg), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
        m.base_model.model.load_state_dict(base.state_dict(), strict=False)
        layer = m.base_model.model.model.layers[0].self_attn.q_proj
        torch.nn.init.normal_(layer.lora_B["default"].weight)  # peft starts B at zero: give each member an update
        deltas.append(layer.get_delta_weight("default").detach().clone())
        m.save_pretrained(tmp_path / f"m{seed}")
        (tmp_path / f"m{seed}" / "train_meta.json").write_text(
            json.dumps({"seed": seed, "train_seconds": 1, "steps": 2, "loss": ("whole_sequence", "masked")[seed]})
        )
        members.append(tmp_path / f"m{seed}")
    meta = mod.make_soup(members, tmp_path / "soup", base=copy.deepcopy(base))  # make_soup adds LoRA layers to it
    assert meta["steps"] == 4 and [m["seed"] for m in meta["members"]] == [0, 1]
    assert [m["loss"] for m in meta["members"]] == ["whole_sequence", "masked"]  # a soup across losses says so
    soup = PeftModel.from_pretrained(base, str(tmp_path / "soup"))
    got = soup.base_model.model.model.layers[0].self_attn.q_proj.get_delta_weight("default")
    assert soup.peft_config["default"].r == 4
    torch.testing.assert_close(got, (deltas[0] + deltas[1]) / 2)
    assert not torch.allclose(deltas[0], deltas[1])
