"""Asynchronous ask/tell: several trials pending at once, results told in the order they finish.

A pool of worker threads trains configurations (here a stand-in training function that takes a
random time); the driver keeps every worker busy with ``ask()``, and tells each result the moment
it comes back, in whatever order that is. metaopt's designs are batch-synchronous: ``ask()`` hands
out the trials of the current batch (configurations at one fidelity), returns None once all are out,
and the next batch is proposed when the last of them is told. The results reach the optimizer in
batch order, so the trace is the same as a serial run's, whatever order the trials finished in.
Run from the repository root:

    .venv/bin/python examples/ask_tell_async.py [--workers 4] [--optimizer hb]
"""

from __future__ import annotations

import argparse
import random
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from ConfigSpace import ConfigurationSpace, Float

import metaopt


def train(config: dict, epochs: float) -> float:
    """A stand-in for training: takes a random time, returns a loss that improves with epochs."""
    time.sleep(random.uniform(0.0, 0.005))
    return (config["x"] - 0.3) ** 2 + (config["y"] + 0.2) ** 2 + 1.0 / epochs


def make_loop(optimizer: str) -> metaopt.AskTell:
    space = ConfigurationSpace(seed=0)
    space.add([Float("x", (-1.0, 1.0)), Float("y", (-1.0, 1.0))])
    return metaopt.ask_tell(space, optimizer=optimizer, budget="10d", fidelity=("epochs", 1, 27), seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--optimizer", default="hb")
    args = parser.parse_args()
    loop = make_loop(args.optimizer)
    most_pending, out_of_order = 0, 0
    with ThreadPoolExecutor(args.workers) as pool:
        running = {}
        while not loop.done:
            while len(running) < args.workers and (trial := loop.ask()) is not None:
                running[pool.submit(train, trial.config, trial.fidelity)] = trial
            most_pending = max(most_pending, len(loop.pending))
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                trial = running.pop(future)
                out_of_order += any(other.id < trial.id for other in running.values())
                loop.tell(trial, future.result())
    result = loop.result()
    serial = make_loop(args.optimizer)
    while (trial := serial.ask()) is not None:
        serial.tell(trial, train(trial.config, trial.fidelity))
    print(f"{len(result.trace)} evaluations, up to {most_pending} pending at once, "
          f"{out_of_order} told before an earlier trial")
    print(f"same trace as a serial run: {result.trace.equals(serial.result().trace)}")
    print(f"best loss {result.loss:.4f} with {result.config}")


if __name__ == "__main__":
    main()
