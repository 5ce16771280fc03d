"""The initial design of sample_filter (initial_design_per_dim): its size and cap, the Sobol points as
configurations, that it comes before any surrogate fit, determinism, and that n = 0 is the run before."""

import numpy as np
import pytest
from ConfigSpace import (Categorical, Configuration, ConfigurationSpace, Constant, EqualsCondition, Float,
                         ForbiddenAndConjunction, ForbiddenEqualsClause, Integer)

from metaopt.components.filters import Scorer, TournamentFilter
from metaopt.components.proposals import INITIAL_DESIGN_MAX_RATIO, SampleAndFilter, initial_design_size, sobol_design
from metaopt.components.samplers import UniformSampler
from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.context import ProposalContext, RunState
from metaopt.core.errors import UsageError
from metaopt.core.space_codec import SpaceCodec
from metaopt.engine.loop import Optimizer, run
from metaopt.spaces.design_space import validate
from metaopt.spaces.presets import get_preset


def _mixed_space() -> ConfigurationSpace:
    """A categorical, log-scaled and plain numbers, an integer, a constant, a condition, a forbidden pair."""
    space = ConfigurationSpace()
    kind = Categorical("kind", ["a", "b", "c"])
    space.add([kind, Float("x", (1e-4, 1.0), log=True), Integer("n", (1, 512), log=True), Float("y", (-2.0, 3.0)),
               Constant("k", 4), Integer("depth", (2, 9))])
    space.add(EqualsCondition(space["depth"], kind, "b"))
    space.add(ForbiddenAndConjunction(ForbiddenEqualsClause(kind, "c"), ForbiddenEqualsClause(space["n"], 1)))
    return space


def _problem():
    return get_benchmark("synthetic:mlp").problem("0")


def test_size_is_n_per_hyperparameter_capped_at_a_quarter_of_a_budget_in_full_evaluations():
    assert initial_design_size(10, 7, Budget(210)) == 52  # lcbench at 30d: 70 capped at floor(210/4)
    assert initial_design_size(10, 7, Budget(700)) == 70  # 100d: 10 per hyperparameter
    assert initial_design_size(2, 7, Budget(210)) == 14
    assert initial_design_size(10, 7, Budget(3)) == 1  # at least one configuration, as SMAC
    assert initial_design_size(0, 7, Budget(210)) == 0
    assert initial_design_size(10, 7, Budget(5.0, "cost")) == 70  # a cost budget: capped by time instead


def test_sobol_points_become_valid_configurations_spread_over_each_domain():
    space = _mixed_space()
    codec = SpaceCodec(space)
    X = sobol_design(64, codec, np.random.default_rng(3))
    assert X.shape == (64, codec.dim)
    for row in X:  # legal: conditions, forbiddens, integer values
        Configuration(codec.space, vector=row).check_valid_configuration()
    np.testing.assert_array_equal(X, sobol_design(64, codec, np.random.default_rng(3)))
    assert not np.array_equal(X, sobol_design(64, codec, np.random.default_rng(4)))


def test_a_sobol_design_is_stratified_in_every_hyperparameter():
    """64 scrambled Sobol points: one in each 1/64 of every axis, so a 3-choice categorical gets
    21 or 22 of them per choice and a number one per 1/64 of its range."""
    space = ConfigurationSpace()
    space.add([Categorical("kind", ["a", "b", "c"]), Float("y", (0.0, 1.0)), Integer("m", (0, 63))])
    codec = SpaceCodec(space)
    X = sobol_design(64, codec, np.random.default_rng(0))
    assert sorted(np.bincount(X[:, codec.names.index("kind")].astype(int), minlength=3)) == [21, 21, 22]
    assert sorted(np.floor(X[:, codec.names.index("y")] * 64).astype(int)) == list(range(64))


def test_unit_cube_maps_choices_in_equal_parts_and_numbers_linearly():
    codec = SpaceCodec(_mixed_space())
    U = np.full((3, codec.dim), 0.5)
    U[:, codec.names.index("kind")] = [0.0, 0.34, 0.999]
    U[:, codec.names.index("y")] = [0.0, 0.25, 1.0]
    X = codec.from_unit_cube(U, np.random.default_rng(0))
    np.testing.assert_array_equal(X[:, codec.names.index("kind")], [0, 1, 2])
    np.testing.assert_array_equal(X[:, codec.names.index("y")], [0.0, 0.25, 1.0])


def _context(problem, budget="100", seed=0):
    codec = SpaceCodec(problem.search_space)
    state = RunState(problem, Budget.parse(budget, problem.d), Archive(codec.dim), codec=codec)
    return ProposalContext(state, codec, np.random.default_rng(seed), problem.fidelity.r_max)


def _tournament():
    from metaopt.components.acquisition import ExpectedImprovement
    from metaopt.components.surrogates import RandomForest

    tournament = TournamentFilter(filter_n_trn_0=1, filter_n_trn_1=1, filter_rho_0=0.0, filter_rho_1=0.0,
                                  filter_ns0_0=50.0, filter_ns0_1=50.0, filter_ns1_0=50.0, filter_ns1_1=50.0,
                                  filter_mb=True, filter_rho_random=False)
    return tournament, Scorer(RandomForest(rf_n_trees=5), ExpectedImprovement(), True)


def test_without_a_design_the_proposal_is_the_filter_and_draws_the_same_numbers():
    problem = _problem()
    ctx, same = _context(problem), _context(problem)
    tournament, scorer = _tournament()
    proposal = SampleAndFilter(initial_design_per_dim=0).wired(UniformSampler(), tournament, scorer)
    np.testing.assert_array_equal(proposal.propose(3, ctx), tournament.propose(3, same, UniformSampler(), scorer))
    assert ctx.rng.bit_generator.state == same.rng.bit_generator.state


def test_a_batch_takes_what_is_left_of_the_design_then_the_filter():
    """μ = 8 with 3 design points left: the batch is those 3, then 5 from the filter."""
    problem = _problem()
    ctx = _context(problem, budget="100")
    tournament, scorer = _tournament()
    proposal = SampleAndFilter(initial_design_per_dim=1).wired(UniformSampler(), tournament, scorer)
    size = problem.d  # one per hyperparameter, below the cap of 25
    design = sobol_design(size, ctx.codec, np.random.default_rng(0))
    first = proposal.propose(size - 3, ctx)
    np.testing.assert_array_equal(first, design[:size - 3])
    batch = proposal.propose(8, ctx)
    np.testing.assert_array_equal(batch[:3], design[size - 3:])
    assert not any((batch[3:] == row).all(axis=1).any() for row in design)


def test_a_run_evaluates_the_whole_design_before_the_first_surrogate_fit(monkeypatch):
    problem = _problem()
    config = {**get_preset("smac_like").config(problem.fidelity), "initial_design_per_dim": 2}
    archive_sizes = []
    fitted = Scorer.fitted

    def spy(self, ctx):
        archive_sizes.append(len(ctx.archive))
        return fitted(self, ctx)

    monkeypatch.setattr(Scorer, "fitted", spy)
    result = run(config, problem, 7, "30d")
    size = 2 * problem.d  # below a quarter of 30·d
    trace = result.trace
    codec = SpaceCodec(problem.search_space)
    expected = codec.to_dicts(sobol_design(size, codec, np.random.default_rng(7)))
    assert [{k: row[k] for k in config} for config, (_, row) in zip(expected, trace.head(size).iterrows())] == expected
    # the 20% random interleave skips the surrogate, so the first fit comes at or after the design
    assert min(archive_sizes) >= size and len(archive_sizes) > 0
    again = run(config, problem, 7, "30d").trace
    assert again["loss"].equals(trace["loss"])


def test_a_cost_budget_ends_the_design_at_a_quarter_of_the_budget():
    problem = _problem()
    ctx = _context(problem, budget="10s")
    proposal = SampleAndFilter(initial_design_per_dim=10).wired(UniformSampler(), *_tournament())
    assert len(proposal.initial_design(4, ctx)) == 4
    ctx.state.cost_used = INITIAL_DESIGN_MAX_RATIO * 10.0
    assert len(proposal.initial_design(4, ctx)) == 0


def test_the_design_belongs_to_sample_filter():
    problem = _problem()
    config = {**get_preset("bo_rf_ei").config(problem.fidelity), "initial_design_per_dim": 10}
    assert Optimizer.from_config(config).proposal.initial_design_per_dim == 10
    assert validate(get_preset("smac_like").config(problem.fidelity))["initial_design_per_dim"] == 0
    with pytest.raises(UsageError, match="initial_design_per_dim is inactive"):
        validate({**get_preset("cfo_tuned").config(problem.fidelity), "initial_design_per_dim": 10})
