"""Speed benchmarks of the kit (not unit tests): the triple memory at 10k–1M triples, a RET-LLM chat turn, LoRA SFT.

A package so that notebook 08 and the tests import the benchmark's own code (`from benchmarks import bench_memory`);
each script also runs as `.venv/bin/python benchmarks/<script>.py` (the kit's editable install maps the package).
Results go to benchmarks/results/, figures to benchmarks/figures/; README.md in this folder has the tables.
"""
