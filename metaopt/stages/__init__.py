"""The stages of a study (optimize, evaluate, ablate, the study pipeline) and the Python API
(``metaopt.minimize``, ``metaopt.ask_tell``). Import every layer below them; only the command line
imports them."""
