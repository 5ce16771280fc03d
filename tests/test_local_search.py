"""CFO (components.local_search, paper 000 Alg. 1-3): start, steps, step-size rules, restarts, batches."""

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer

from metaopt.components.local_search import CFO, bucket, categorical_move
from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.base import Benchmark, Fidelity
from metaopt.core.budget import Budget
from metaopt.cli import main
from metaopt.core.context import ProposalContext, RunState
from metaopt.engine.loop import run
from metaopt.core.space_codec import SpaceCodec
from metaopt.spaces.presets import get_preset


class _Toy(Benchmark):
    """A search space to drive CFO by hand; the tests feed the losses themselves."""

    def __init__(self, space: ConfigurationSpace, cheap_end: dict[str, str]) -> None:
        self.name, self.instances, self.train_instances, self.test_instances = "toy", ["0"], ["0"], []
        self.split_rule, self.search_space, self.fidelity = "", space, Fidelity("r", 1, 1)
        self.loss_name, self.cost_name, self.cheap_end = "loss", "cost", cheap_end

    def evaluate(self, instance, configs, fidelities):
        raise AssertionError("the tests feed losses by hand")


class _Driver:
    """Calls CFO.propose and writes losses into the archive, as the loop does."""

    def __init__(self, hps, cheap_end=None, step_init=0.1, seed=0, **options):
        space = ConfigurationSpace()
        space.add(hps)
        problem = _Toy(space, cheap_end or {}).problem("0")
        self.codec = SpaceCodec(space)
        self.state = RunState(problem, Budget.parse("100000", problem.d), Archive(self.codec.dim), codec=self.codec)
        self.rng = np.random.default_rng(seed)
        self.cfo = CFO(step_init, **options)
        self.n_told = 0

    def propose(self, n=1):
        return self.cfo.propose(n, ProposalContext(self.state, self.codec, self.rng, 1.0))

    def tell(self, X, losses):
        n = len(X)
        ids = np.arange(self.n_told, self.n_told + n)
        self.n_told += n
        self.state.archive.add(X, config_id=ids, batch=ids, stage=np.zeros(n), bracket=np.zeros(n),
                               fidelity=np.ones(n), loss=np.asarray(losses, float), cost=np.ones(n))

    def along(self, **steps):
        """A step vector with the given components (by hyperparameter name), zero elsewhere."""
        return np.array([steps.get(name, 0.0) for name in self.codec.names])

    def step(self, loss):
        """One proposal evaluated to ``loss`` (a number or a function of the vector); returns the vector."""
        x = self.propose()[0]
        self.tell(x[None], [loss(x) if callable(loss) else loss])
        return x


FLOATS3 = [Float("a", (0.0, 1.0)), Float("b", (0.0, 1.0)), Float("c", (0.0, 1.0))]


def test_low_cost_start_and_initial_step():
    hps = [Integer("n", (1, 100)), Float("lr", (1e-4, 1.0), log=True), Float("x", (0.0, 1.0), default=0.3),
           Categorical("cat", ["p", "q", "r"], default="q")]
    drv = _Driver(hps, cheap_end={"n": "lower", "lr": "upper"})
    start = drv.propose()[0]
    assert drv.codec.to_dicts(start[None])[0] == {"n": 1, "lr": 1.0, "x": pytest.approx(0.3), "cat": "q"}
    cat = drv.codec.names.index("cat")
    assert drv.cfo.incumbent.z[cat] == pytest.approx(1.5 / 3)  # middle of the bucket of choice index 1
    assert drv.cfo.step == pytest.approx(0.1 * math.sqrt(4))  # default c = 0.1: δ_init = 0.1·√d
    paper = _Driver(hps, step_init=1.0)
    paper.propose()
    assert paper.cfo.step == pytest.approx(math.sqrt(4))  # c = 1: the paper's δ_init = √d


def test_override_of_cheap_end_reaches_the_start():
    bench = get_benchmark("synthetic:boosting")
    problem = replace(bench.problem("0"), cheap_end_override={"nrounds": "upper", "eta": "lower"})
    assert problem.cheap_end == {"nrounds": "upper", "subsample": "lower", "max_depth": "lower", "eta": "lower"}
    codec = SpaceCodec(problem.search_space)
    ctx = ProposalContext(RunState(problem, Budget.parse("10", problem.d), Archive(codec.dim), codec=codec),
                          codec, np.random.default_rng(0), 1.0)
    start = codec.to_dicts(CFO().propose(1, ctx))[0]
    assert (start["nrounds"], start["eta"], start["subsample"]) == (2000, pytest.approx(1e-3), pytest.approx(0.1))


def test_shrink_after_two_to_the_d_minus_one_failures():
    drv = _Driver(FLOATS3)  # d = 3: shrink after 2^2 = 4 non-improving iterations (8 proposals)
    drv.step(1.0)
    delta0 = drv.cfo.step
    for _ in range(7):
        drv.step(2.0)
    minus = drv.propose()  # learns the 7th failure: 3 iterations done, the 4th still needs its − side
    assert (drv.cfo.iterations, drv.cfo.failures, drv.cfo.step) == (3, 3, delta0)
    drv.tell(minus, [2.0])
    drv.propose()
    # η = k/k' = 4/1 (the round's first iteration holds its best): δ ← δ/√4
    assert drv.cfo.step == pytest.approx(delta0 / 2)
    assert drv.cfo.failures == 0


def test_shrink_factor_uses_the_iteration_of_the_best():
    drv = _Driver(FLOATS3, seed=1)
    drv.step(1.0)
    delta0 = drv.cfo.step
    for _ in range(6):  # 3 failing iterations
        drv.step(2.0)
    drv.step(0.5)  # the 4th iteration improves on its + side: k' = 4, the failure count restarts
    for _ in range(7):
        drv.step(2.0)
    minus = drv.propose()
    assert (drv.cfo.iterations, drv.cfo.best_iteration, drv.cfo.failures) == (7, 4, 3)
    assert drv.cfo.step == delta0
    drv.tell(minus, [2.0])
    drv.propose()
    assert drv.cfo.step == pytest.approx(delta0 / math.sqrt(8 / 4))


def test_patience_base_sets_the_failures_before_a_shrink():
    drv = _Driver(FLOATS3, cfo_patience_base=1.5)  # d = 3: ceil(1.5^2) = 3 failing iterations
    assert drv.step(1.0) is not None and drv.cfo.patience() == 3
    delta0 = drv.cfo.step
    for _ in range(6):
        drv.step(2.0)
    drv.propose()
    assert drv.cfo.iterations == 3 and drv.cfo.step == pytest.approx(delta0 / math.sqrt(3))


def _failing_iterations(drv, n):
    """``n`` non-improving iterations (two evaluated proposals each), then a proposal that learns them."""
    for _ in range(2 * n):
        drv.step(2.0)
    drv.propose()


def test_repeat_shrink_shrinks_at_every_further_failure_and_telescopes():
    drv = _Driver(FLOATS3, cfo_repeat_shrink=True)  # patience 4, then every further failure shrinks
    drv.step(1.0)
    delta0 = drv.cfo.step
    _failing_iterations(drv, 3)
    assert drv.cfo.step == delta0
    _failing_iterations(drv, 1)  # the 4th failure: δ0/√(4/1)
    assert drv.cfo.step == pytest.approx(delta0 / 2)
    for k in (5, 6):  # each further failing iteration: δ·√(k_prev/k), in total δ0·√(1/k)
        _failing_iterations(drv, 1)
        assert drv.cfo.iterations == k and drv.cfo.step == pytest.approx(delta0 / math.sqrt(k))
    paper = _Driver(FLOATS3)
    paper.step(1.0)
    _failing_iterations(paper, 5)
    assert paper.cfo.step == pytest.approx(paper.cfo.step_init / 2)  # paper: the 5th failure does not shrink


def test_expand_undoes_the_last_shrink_on_improvement():
    for expand in (False, True):
        drv = _Driver(FLOATS3, seed=3, cfo_expand=expand)
        drv.step(1.0)
        delta0 = drv.cfo.step
        _failing_iterations(drv, 4)
        assert drv.cfo.step == pytest.approx(delta0 / 2)
        drv.step(0.5)  # strictly better: the incumbent moves
        drv.propose()
        assert drv.cfo.incumbent_loss == 0.5
        assert drv.cfo.step == pytest.approx(delta0 if expand else delta0 / 2)


def test_random_start_draws_hyperparameters_without_a_cheap_end():
    hps = [Integer("n", (1, 100)), Float("x", (0.0, 1.0), default=0.3), Categorical("cat", ["p", "q", "r"], default="q")]
    starts = []
    for seed in range(20):
        drv = _Driver(hps, cheap_end={"n": "lower"}, seed=seed, cfo_start="random")
        starts.append(drv.codec.to_dicts(drv.propose())[0])
    assert all(start["n"] == 1 for start in starts)  # the cheap end stays
    xs = [start["x"] for start in starts]
    assert min(xs) < 0.2 and max(xs) > 0.8
    assert {start["cat"] for start in starts} == {"p", "q", "r"}
    default = _Driver(hps, cheap_end={"n": "lower"}, seed=0)
    assert default.codec.to_dicts(default.propose())[0]["x"] == pytest.approx(0.3)


def test_lower_scale_and_restart_noise_scale_their_quantities():
    scaled = _Driver([Integer("n", (1, 100)), Float("x", (0.0, 1.0))], cheap_end={"n": "lower"}, cfo_lower_scale=10.0)
    scaled.propose()
    assert scaled.cfo.step_lower() == pytest.approx(10 * 0.1 * math.sqrt(2) / 99)
    spread = {}
    for noise in (0.1, 10.0):
        distances = []
        for seed in range(6):
            drv = _Driver([Integer("n", (0, 2)), Float("x", (0.0, 1.0))], cheap_end={"n": "lower"}, seed=seed,
                          cfo_restart_noise=noise)
            drv.step(1.0)
            while drv.cfo.restarts == 0:
                x = drv.step(2.0)
            distances.append(abs(x[1] - drv.cfo.low_cost_start.vector[1]))
        spread[noise] = np.mean(distances)
    assert spread[0.1] < 0.05 < spread[10.0]


def test_lower_bound_from_the_smallest_integer_step():
    linear = _Driver([Integer("n", (1, 100)), Float("x", (0.0, 1.0))], cheap_end={"n": "lower"})
    linear.propose()
    assert linear.cfo.step_lower() == pytest.approx(0.1 * math.sqrt(2) / 99)
    log = _Driver([Integer("m", (16, 1024), log=True), Float("x", (0.0, 1.0))], cheap_end={"m": "lower"})
    log.propose()  # at m = 16: the unit step log(1 + 1/16) on a log range of log(64)
    assert log.cfo.step_lower() == pytest.approx(0.1 * math.sqrt(2) * math.log1p(1 / 16) / math.log(64))
    floats = _Driver(FLOATS3)
    floats.propose()
    assert floats.cfo.step_lower() == pytest.approx(0.1 * 0.01)


def test_restart_when_the_step_reaches_its_lower_bound():
    # d = 2: shrink after every 2 failing iterations; δ_lower = δ0 · 1/2 (integer range 0..2)
    drv = _Driver([Integer("n", (0, 2)), Float("x", (0.0, 1.0))], cheap_end={"n": "lower"})
    drv.step(1.0)
    delta0 = drv.cfo.step
    assert drv.cfo.step_lower() == pytest.approx(delta0 / 2)
    for _ in range(4):
        drv.step(2.0)
    proposal = drv.propose()
    assert drv.cfo.step == pytest.approx(delta0 / math.sqrt(2)) and drv.cfo.restarts == 0  # η = 2/1
    drv.tell(proposal, [2.0])
    for _ in range(3):
        drv.step(2.0)
    restart = drv.propose()[0]  # η = 4/1: δ0/√2/2 ≤ δ0/2 → restart
    assert drv.cfo.restarts == 1
    assert drv.cfo.step == pytest.approx(0.1 * (1 + math.sqrt(2)))  # δ ← c (r + √d)
    assert (drv.cfo.iterations, drv.cfo.best_iteration, drv.cfo.failures) == (0, 0, 0)
    # the proposal is the new round's start, not yet evaluated
    assert np.array_equal(restart, drv.cfo.incumbent.vector) and drv.cfo.incumbent_loss == math.inf
    assert not np.array_equal(restart, drv.cfo.low_cost_start.vector)


def test_restart_is_centred_at_the_low_cost_start():
    """The incumbent climbs away from x0 (x = 0.5); restarts land around x0, not around it."""
    restarts, incumbents = [], []
    for seed in range(8):
        drv = _Driver([Integer("n", (0, 2)), Float("x", (0.0, 1.0))], cheap_end={"n": "lower"}, seed=seed)
        for i in range(400):
            incumbent = drv.cfo.incumbent
            x = drv.step(lambda v, i=i: -v[1] if i < 30 else 10.0)
            if drv.cfo.restarts:
                break
        assert drv.cfo.restarts == 1
        restarts.append(x[1])
        incumbents.append(incumbent.vector[1])
    assert np.mean(incumbents) > 0.85
    assert abs(np.mean(restarts) - 0.5) < 0.1


def test_integers_are_projected_to_the_nearest_value():
    drv = _Driver([Integer("n", (1, 10)), Integer("m", (10, 2000), log=True)], cheap_end={"n": "lower", "m": "lower"})
    drv.propose()
    x0 = drv.cfo.incumbent
    moved = drv.cfo.move(x0, drv.along(n=0.3), drv.rng)  # n: 1 + 0.3 · 9 = 3.7
    assert drv.codec.to_dicts(moved.vector[None])[0] == {"n": 4, "m": 10}
    assert moved.z[drv.codec.names.index("n")] == pytest.approx(3 / 9)  # the coordinate is the projected value
    clipped = drv.cfo.move(x0, drv.along(n=-5.0, m=2.0), drv.rng)
    assert drv.codec.to_dicts(clipped.vector[None])[0] == {"n": 1, "m": 2000}
    for _ in range(40):
        x = drv.step(lambda v: float(np.sum(v)))
        for j, name in enumerate(drv.codec.names):
            assert drv.codec.space[name].legal_vector(x[j])


def test_categorical_redrawn_only_when_its_bucket_changes():
    rng = np.random.default_rng(0)
    assert [bucket(z, 4) for z in (0.0, 0.24, 0.25, 0.99, 1.0)] == [0, 0, 1, 3, 3]
    assert all(categorical_move(0.3, 0.45, 1, 4, rng) == 1 for _ in range(50))
    draws = np.array([categorical_move(0.3, 0.55, 1, 4, rng) for _ in range(3000)])
    assert 1 not in draws and set(np.unique(draws)) == {0, 2, 3}
    assert np.allclose(np.bincount(draws, minlength=4)[[0, 2, 3]] / 3000, 1 / 3, atol=0.04)

    drv = _Driver([Categorical("cat", ["p", "q", "r", "s"], default="q"), Float("x", (0.0, 1.0))])
    drv.propose()
    x0 = drv.cfo.incumbent  # surrogate 0.375: bucket 1 of 4
    cat = drv.codec.names.index("cat")
    assert drv.cfo.move(x0, drv.along(cat=0.1, x=0.3), drv.rng).choice[cat] == 1
    assert all(drv.cfo.move(x0, drv.along(cat=0.2), drv.rng).choice[cat] != 1 for _ in range(20))


def test_batches_are_pairs_around_the_incumbent():
    drv = _Driver(FLOATS3, step_init=0.05)
    first = drv.propose(4)  # start, +u1, −u1, +u2
    assert np.allclose(first[1] + first[2], 2 * first[0])
    drv.tell(first, [1.0, 2.0, 2.0, 2.0])
    second = drv.propose(4)  # −u2 (pending), +u3, −u3, +u4
    assert drv.cfo.iterations == 1
    assert np.allclose(first[3] + second[0], 2 * first[0])
    assert np.allclose(second[1] + second[2], 2 * first[0])
    drv.tell(second, [2.0, 0.5, 0.7, 2.0])
    drv.propose(4)
    # x moved to the best improving point; the batch completed directions u2, u3 and u4
    assert drv.cfo.iterations == 4 and drv.cfo.best_iteration == 4
    assert drv.cfo.incumbent_loss == 0.5 and np.array_equal(drv.cfo.incumbent.vector, second[1])


def test_nan_losses_never_improve():
    drv = _Driver(FLOATS3)
    drv.step(np.nan)  # a failed start: any finite loss improves on it
    drv.step(3.0)
    drv.propose()
    assert drv.cfo.incumbent_loss == 3.0
    for _ in range(8):
        drv.step(np.nan)
    assert drv.cfo.incumbent_loss == 3.0 and drv.cfo.failures >= 3


def test_run_is_deterministic():
    bench = get_benchmark("synthetic:mlp")
    config = get_preset("cfo").config(bench.fidelity)
    traces = [run(config, bench.problem("2"), seed, "10d").trace for seed in (7, 7, 8)]
    pd.testing.assert_frame_equal(traces[0], traces[1])
    assert not traces[0]["loss"].equals(traces[2]["loss"])


def test_cfo_improves_on_rosenbrock():
    bench = get_benchmark("synthetic:rosenbrock")
    trace = run(get_preset("cfo").config(bench.fidelity), bench.problem("0"), 1, "30d").trace
    assert trace["incumbent_loss"].iloc[-1] < 0.5 * trace["loss"].iloc[0]


def test_cli_cheap_end_option(capsys, tmp_path):
    base = ["run", "--optimizer", "cfo", "--benchmark", "synthetic:boosting", "--instance", "0", "--budget", "3",
            "--quiet"]
    assert main(base + ["--cheap-end", "booster=lower"]) == 2
    assert "--cheap-end booster=lower" in capsys.readouterr().err
    assert main(base + ["--cheap-end", "eta=cheap"]) == 2
    assert "lower or upper" in capsys.readouterr().err
    assert main(base + ["--cheap-end", "eta=upper", "--cheap-end", "nrounds=upper", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["cheap_end"] == {"nrounds": "upper", "subsample": "lower", "max_depth": "lower", "eta": "upper"}
    first = pd.read_csv(tmp_path / "trace.csv").iloc[0]
    assert (first["nrounds"], first["eta"]) == (2000, pytest.approx(1.0))


@pytest.mark.parametrize("scenario", ["lcbench", "rbv2_xgboost", "rbv2_rpart"])
def test_yahpo_cheap_end_is_cheaper(yahpo_data, scenario):
    bench = get_benchmark(f"yahpo:{scenario}", yahpo_data)
    assert bench.cheap_end
    codec = SpaceCodec(bench.search_space)
    configs = codec.to_dicts(codec.sample_uniform(100, np.random.default_rng(0)))
    instance = bench.test_instances[0]  # not one of the instances the table was derived from
    r = [bench.fidelity.r_max] * len(configs)
    for name, end in bench.cheap_end.items():
        hp = bench.search_space[name]
        cheap, dear = (hp.lower, hp.upper) if end == "lower" else (hp.upper, hp.lower)
        cost_cheap = bench.evaluate(instance, [c | {name: cheap} for c in configs], r).cost.mean()
        cost_dear = bench.evaluate(instance, [c | {name: dear} for c in configs], r).cost.mean()
        assert cost_cheap < cost_dear, name


def test_nb301_declares_no_cheap_end(yahpo_data):
    assert get_benchmark("yahpo:nb301", yahpo_data).cheap_end == {}
