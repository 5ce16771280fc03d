"""Tune a scikit-learn model with a metaopt design through ``metaopt.minimize``.

HistGradientBoostingClassifier on scikit-learn's digits data, 3-fold cross-validated error as the
loss, the number of boosting iterations as the fidelity (multi-fidelity designs such as bohb or
smashy_lcbench_hb evaluate many configurations with few iterations and promote the best), and the
fit time as the cost. Run it from the repository root:

    .venv/bin/python examples/tune_sklearn.py                 # bohb, 30·d
    .venv/bin/python examples/tune_sklearn.py --optimizer results/quickstart/meta/gamma_star.json

``--quick`` makes it small enough for the test suite.
"""

from __future__ import annotations

import argparse
import time

from ConfigSpace import ConfigurationSpace, Float, Integer
from sklearn.datasets import load_digits
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import cross_val_score

import metaopt

X, y = load_digits(return_X_y=True)


def objective(config: dict, fidelity: int) -> dict:
    """3-fold CV error of the model with ``config`` and ``fidelity`` boosting iterations; cost = fit time."""
    started = time.perf_counter()
    model = HistGradientBoostingClassifier(max_iter=fidelity, early_stopping=False, random_state=0, **config)
    error = 1.0 - cross_val_score(model, X, y, cv=3).mean()
    return {"loss": error, "cost": time.perf_counter() - started}


def search_space() -> ConfigurationSpace:
    space = ConfigurationSpace(seed=0)
    space.add([
        Float("learning_rate", (0.01, 1.0), log=True),
        Integer("max_leaf_nodes", (4, 64), log=True),
        Integer("min_samples_leaf", (2, 64), log=True),
        Float("l2_regularization", (1e-6, 10.0), log=True),
    ])
    return space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", default="bohb", help="a preset name or a JSON file (e.g. a gamma_star.json)")
    parser.add_argument("--budget", default="30d")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", default=None, help="write trace.csv and summary.json here")
    parser.add_argument("--quick", action="store_true", help="a tiny run (2·d, at most 9 iterations)")
    args = parser.parse_args()
    r_max = 9 if args.quick else 81
    result = metaopt.minimize(objective, search_space(), optimizer=args.optimizer,
                              budget="2d" if args.quick else args.budget, fidelity=("max_iter", 1, r_max),
                              seed=args.seed, workers=args.workers, output=args.out, progress=not args.quick)
    print(f"{len(result.trace)} evaluations, {result.summary['n_failed']} failed, "
          f"cost {result.summary['cost_used']:.1f} s of fitting")
    print(f"best CV error {result.loss:.4f} with {result.config}")


if __name__ == "__main__":
    main()
