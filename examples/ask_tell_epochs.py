"""Drive a metaopt design yourself: an ask/tell loop around an epoch-wise training loop.

For training code that cannot be wrapped in one function call (here: SGDClassifier trained epoch by
epoch with ``partial_fit`` on scikit-learn's digits, validation error after the requested number of
epochs). ``ask()`` hands out a trial (a configuration and the number of epochs to train it for);
``tell(trial, error)`` takes its validation error (and, optionally, a cost). Run from the repository root:

    .venv/bin/python examples/ask_tell_epochs.py [--optimizer hb] [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from ConfigSpace import Categorical, ConfigurationSpace, Float
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import metaopt

X, y = load_digits(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(StandardScaler().fit_transform(X), y, test_size=0.3, random_state=0)


def train(config: dict, epochs: int) -> float:
    """Validation error of an SGD classifier with ``config`` after ``epochs`` passes over the data."""
    model = SGDClassifier(random_state=0, **config)
    for _ in range(epochs):
        model.partial_fit(X_train, y_train, classes=np.unique(y))
    return 1.0 - model.score(X_val, y_val)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", default="hb")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    space = ConfigurationSpace(seed=0)
    space.add([Float("alpha", (1e-6, 1e-1), log=True), Float("eta0", (1e-4, 1.0), log=True),
               Categorical("learning_rate", ["constant", "invscaling", "adaptive"]),
               Categorical("loss", ["hinge", "log_loss", "modified_huber"])])
    loop = metaopt.ask_tell(space, optimizer=args.optimizer, budget="5d" if args.quick else "30d",
                            fidelity=("epochs", 1, 9 if args.quick else 27), seed=0)
    while (trial := loop.ask()) is not None:
        loop.tell(trial, train(trial.config, int(trial.fidelity)))  # cost defaults to epochs / max epochs
    result = loop.result()
    print(f"{result.trace['batch'].nunique()} batches, {len(result.trace)} evaluations, "
          f"stop: {result.summary['stop_reason']}")
    print(f"best validation error {result.loss:.4f} at the most epochs tried: {result.config}")


if __name__ == "__main__":
    main()
