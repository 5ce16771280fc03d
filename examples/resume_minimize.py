"""Kill a ``metaopt.minimize(output=...)`` run midway and resume it to the trace of an uninterrupted run.

``minimize`` appends every evaluation to ``<output>/evaluations.jsonl`` the moment it finishes.
Here a child process runs the optimization and is killed (``os._exit``, as a crash or SIGKILL
would end it: no clean-up runs) while evaluation ``--kill-at`` is running; calling ``minimize``
again with the same arguments and folder reads the finished evaluations back (the objective is
not called for them) and carries on, ending with exactly the trace of a run never interrupted.
Run from the repository root:

    .venv/bin/python examples/resume_minimize.py [--kill-at 40] [--out runs/resume]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile

from ConfigSpace import ConfigurationSpace, Float, Integer

import metaopt

ARGS = dict(optimizer="bohb", budget="10d", fidelity=("epochs", 1, 27), seed=0)
KILL_AT = int(os.environ.get("RESUME_EXAMPLE_KILL_AT", "0"))
calls = 0


def objective(config: dict, epochs: int) -> float:
    """A learning curve: a Branin-shaped final loss, approached as 1/epochs (an expensive training, in spirit)."""
    global calls
    calls += 1
    if calls == KILL_AT:
        os._exit(9)  # the process dies in the middle of this evaluation
    x, y = config["x"], config["width"] / 10
    final = (y - 5.1 / (4 * math.pi ** 2) * x ** 2 + 5 / math.pi * x - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x) + 10
    return final + 20 / epochs


def search_space() -> ConfigurationSpace:
    space = ConfigurationSpace(seed=0)
    space.add([Float("x", (-5.0, 10.0)), Integer("width", (0, 150))])
    return space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill-at", type=int, default=40, help="the evaluation during which the run is killed")
    parser.add_argument("--out", default=None, help="the output folder (default: a temporary one)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="metaopt-resume-")
    if args.child:  # the run that gets killed
        metaopt.minimize(objective, search_space(), output=out, **ARGS)
        return
    child = subprocess.run([sys.executable, __file__, "--child", "--out", out],
                           env={**os.environ, "RESUME_EXAMPLE_KILL_AT": str(args.kill_at)})
    with open(os.path.join(out, "evaluations.jsonl")) as log:
        stored = sum(1 for _ in log) - 1  # minus the header line
    print(f"killed run: exit status {child.returncode}, {stored} evaluations stored, "
          f"trace.csv written: {os.path.exists(os.path.join(out, 'trace.csv'))}")
    resumed = metaopt.minimize(objective, search_space(), output=out, **ARGS)
    computed = calls
    uninterrupted = metaopt.minimize(objective, search_space(), **ARGS)
    print(f"resumed run: {len(resumed.trace)} evaluations, {computed} of them computed now, "
          f"{len(resumed.trace) - computed} read back")
    print(f"same trace as an uninterrupted run: {resumed.trace.equals(uninterrupted.trace)}")
    print(f"best loss {resumed.loss:.4f} with {resumed.config}")


if __name__ == "__main__":
    main()
