"""Filters (paper 004 Alg. 3 and 4): tournament sizes, pool sizes, interleave counts, time variation."""

import numpy as np
import pytest

from metaopt.components.acquisition import MeanAcquisition
from metaopt.components.filters import ProgressiveFilter, Scorer, TournamentFilter, geometric_sizes
from metaopt.components.samplers import UniformSampler
from metaopt.components.surrogates import KNN1
from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.context import ProposalContext, RunState
from metaopt.core.space_codec import SpaceCodec

SHARED = dict(filter_rho_0=0.0, filter_rho_1=0.0, filter_ns0_0=4.0, filter_ns0_1=4.0, filter_ns1_0=16.0,
              filter_ns1_1=16.0, filter_mb=True, filter_rho_random=False)


def tournament(**overrides):
    args = {**SHARED, "filter_n_trn_0": 2, "filter_n_trn_1": 2, **overrides}
    return TournamentFilter(**args)


def test_geometric_sizes():
    assert np.allclose(geometric_sizes(4, 16, 3), [4, 8, 16])
    assert np.allclose(geometric_sizes(4, 16, 1), [4])


def test_tournament_sizes_are_pinned():
    # n = 5 points, n_trn = 2 -> T = 3 tournaments of n_trn * (4, 8, 16) candidates
    n_trn, sizes = tournament().tournament_sizes(5, t=0.0)
    assert n_trn == 2 and sizes == [8, 16, 32]
    # time-varying n_trn: geometric between 1 and 4 -> 2 at t = 0.5
    f = tournament(filter_n_trn_0=1, filter_n_trn_1=4)
    assert f.tournament_sizes(4, 0.0) == (1, [4, 6, 10, 16])  # 4 * 4^(i/3), rounded
    assert f.tournament_sizes(4, 0.5)[0] == 2
    assert f.tournament_sizes(4, 1.0) == (4, [16])  # a single tournament uses N_s^0


def test_progressive_pool_and_windows_are_pinned():
    f = ProgressiveFilter(**SHARED)
    pool, windows = f.pool_sizes(3, t=0.0)
    assert pool == 48 and windows == [12, 24, 48]  # n * (4, 8, 16); pool = n * max(N0, N1)
    f2 = ProgressiveFilter(**{**SHARED, "filter_ns0_0": 16.0, "filter_ns1_0": 4.0})
    assert f2.pool_sizes(3, 0.0) == (48, [48, 24, 12])


def test_time_varying_rates_interpolate_geometrically():
    f = ProgressiveFilter(**{**SHARED, "filter_ns0_0": 1.0, "filter_ns0_1": 100.0})
    assert f.sample_rates(0.5)[0] == pytest.approx(10.0)


def test_interleave_counts():
    rng = np.random.default_rng(0)
    fixed = ProgressiveFilter(**{**SHARED, "filter_rho_0": 0.25, "filter_rho_1": 0.75})
    assert fixed.n_interleaved(8, 0.0, rng) == 2
    assert fixed.n_interleaved(8, 1.0, rng) == 6
    assert fixed.n_interleaved(8, 0.5, rng) == 4  # rho linear in t
    binomial = ProgressiveFilter(**{**SHARED, "filter_rho_0": 0.5, "filter_rho_1": 0.5, "filter_rho_random": True})
    counts = [binomial.n_interleaved(10, 0.0, rng) for _ in range(2000)]
    assert 4.8 < np.mean(counts) < 5.2 and np.var(counts) == pytest.approx(2.5, rel=0.15)


def _context(n_archive: int = 40):
    bench = get_benchmark("synthetic:mlp")
    problem = bench.problem(bench.test_instances[0])
    codec = SpaceCodec(problem.search_space)
    rng = np.random.default_rng(1)
    archive = Archive(codec.dim)
    X = codec.sample_uniform(n_archive, rng)
    fid = np.full(n_archive, problem.fidelity.r_max)
    ev = problem.evaluate(codec.to_dicts(X), fid)
    archive.add(X, config_id=np.arange(n_archive), batch=np.zeros(n_archive), stage=np.ones(n_archive),
                bracket=np.ones(n_archive), fidelity=fid, loss=ev.loss, cost=ev.cost)
    state = RunState(problem, Budget.parse("30d", problem.d), archive)
    return ProposalContext(state, codec, rng, problem.fidelity.r_max), problem


@pytest.mark.parametrize("make", [lambda: tournament(), lambda: ProgressiveFilter(**SHARED)])
def test_filters_propose_better_points_than_the_sampler(make):
    ctx, problem = _context()
    scorer = Scorer(KNN1(), MeanAcquisition(), predict_at_max_fidelity=True)
    f = make()
    X = f.propose(20, ctx, UniformSampler(), scorer)
    assert X.shape == (20, ctx.codec.dim)
    r = np.full(20, problem.fidelity.r_max)
    filtered = problem.evaluate(ctx.codec.to_dicts(X), r).loss.mean()
    plain = problem.evaluate(ctx.codec.to_dicts(UniformSampler().sample(200, ctx)), np.full(200, r[0])).loss.mean()
    assert filtered < plain


def test_rho_one_skips_the_surrogate():
    ctx, _ = _context()

    class Exploding(Scorer):
        def fit_and_score(self, ctx, candidates):
            raise AssertionError("the filter must not be used when rho = 1")

    f = ProgressiveFilter(**{**SHARED, "filter_rho_0": 1.0, "filter_rho_1": 1.0})
    assert f.propose(5, ctx, UniformSampler(), Exploding(KNN1(), MeanAcquisition(), True)).shape[0] == 5
