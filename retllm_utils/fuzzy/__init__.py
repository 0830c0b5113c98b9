"""Calibrating RET-LLM's fuzzy read, beyond both papers (notebook 03): who may stand in for a query term not stored
verbatim. Nothing is imported here.

- `stress`: a labelled stress set of near misses from the synthetic data set's name pools (typos, namesakes, forms).
- `matching`: the set scored by cosine and character similarity, threshold sweeps, per-kind calibration, plots.
- `aliases`: the cosine an acronym-shaped alias needs (`memory.alias_form`), calibrated on Re-DocRED's mentions.
"""
