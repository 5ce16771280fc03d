"""Performance harness: how fast metaopt's optimizers run and how good they are, next to the peers.

``metaopt bench`` (:mod:`bench.harness`) writes a JSON result and ``docs/benchmarks.md``
(:mod:`bench.report`); :mod:`bench.overhead` is the per-run measurement every section uses.
"""
