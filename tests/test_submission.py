"""Re-DocRED submission export: strings resolved to vertexSet indices or dropped and counted, never guessed."""

from retllm_utils.memllm.submission import export_document, export_documents, score_submission

DOC = {
    "title": "Willi",
    "sents": [["Wilfried", '"', "Willi", '"', "Schneider", "is", "from", "Germany", "."], ["He", "met", "Willy", "."]],
    "vertexSet": [
        [{"name": 'Wilfried " Willi " Schneider', "sent_id": 0, "pos": [0, 5]}],
        [{"name": "Germany", "sent_id": 0, "pos": [7, 8]}],
        [{"name": "Willy", "sent_id": 1, "pos": [2, 3]}],
        [{"name": "Willy", "sent_id": 1, "pos": [2, 3]}],  # two entities share one string: ambiguous
    ],
    "labels": [{"h": 0, "t": 1, "r": "P27", "evidence": [0]}, {"h": 1, "t": 0, "r": "P1", "evidence": []}],
}
REL = {"country of citizenship": "P27", "date of birth": "P569"}


def test_names_resolve_exactly_then_normalised_and_the_rest_is_counted():
    written = [
        (0, ('Wilfried "Willi " Schneider', "country of citizenship", "Germany")),  # exact
        (1, ('wilfried "willi" schneider', "country of citizenship", "GERMANY")),  # normalised: same fact
        (1, ("Willy", "country of citizenship", "Germany")),  # ambiguous: dropped, not guessed
        (1, ("Bob", "country of citizenship", "Germany")),  # no such entity
        (1, ("Germany", "citizen of", "Germany")),  # not one of Re-DocRED's relations
    ]
    out = export_document(DOC, written, REL)
    assert out.facts == [{"title": "Willi", "h_idx": 0, "t_idx": 1, "r": "P27", "evidence": [0, 1]}]
    assert out.dropped == {"entity ambiguous": 1, "entity unmatched": 1, "relation not in rel_info": 1}
    assert out.unmatched == [("Bob", None)]


def test_scores_follow_the_official_evaluation():
    rel_names = {v: k for k, v in REL.items()}
    out = export_documents(
        [DOC], {0: [(0, ('Wilfried "Willi " Schneider', "country of citizenship", "Germany"))]}, rel_names
    )
    s = score_submission(out.facts, [DOC])
    assert (s.precision, s.recall) == (1.0, 0.5)
    wrong = [{"title": "Willi", "h_idx": 1, "t_idx": 0, "r": "P27", "evidence": []}]
    assert score_submission(out.facts + wrong, [DOC]).precision == 0.5
