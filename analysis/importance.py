"""Parameter importance over a meta-archive: functional ANOVA and local parameter importance.

Why our own code: the maintained implementations do not work with our stack. ``fanova`` (2.0.19,
last release 2020) needs ``pyrfr``, a SWIG/C++ build published only as a source archive, and
calls ConfigSpace APIs from before 1.0; DeepCAVE (1.4.1) requires Python < 3.11 (we run 3.11).
So this module decomposes the meta-archive's random forest by Monte Carlo; the tests check it
against a function whose decomposition is known in closed form.

Model and encoding: :mod:`metaopt.analysis.meta_model` (one forest per archive, shared with the
surrogate ablation estimator and the report). A parameter is one column of ConfigSpace's vector
representation (inactive: ``INACTIVE = -1``), and f(γ) is the forest's prediction averaged over
the archive's instances (Hutter et al. 2014, §4: marginalizing instances out), so instances run
for only some γ's do not bias their effects. Here ``seed`` seeds both the forest and the
Monte Carlo samples.

Measure. ConfigSpace samples a configuration by drawing every hyperparameter independently from
its prior (on the vector scale) and then deactivating those whose conditions fail. We take this
as the distribution of the space: latent vectors z with independent coordinates and the function
f(z) = f(deactivate(z)). The classical functional ANOVA then applies to z unchanged; a conditional
parameter's effect is counted where it is active, and its dependence on its parent shows as a
pair effect. Forbidden clauses are ignored by this measure (the forest is also queried at the
few forbidden combinations of the full design space; the restricted spaces have none).

fANOVA (Hutter, Hoos & Leyton-Brown 2014). With f0 = E f and the marginals a_S(z_S) = E[f | z_S],
the main effect of i is V_i = Var a_i(z_i), the pair effect of i, j is
V_ij = Var(a_ij − a_i − a_j + f0), and the importance is V / Var f. Estimate: every parameter
gets a grid representing its prior (all choices with their probabilities; for numeric ones the
``grid_size`` quantiles (k + ½)/K of the prior, equally weighted); a_S on the grid of S is the
mean of f over one shared sample of ``n_samples`` latent vectors with z_S set to the grid point
(shared, so that differences between grid points are not blurred by sampling noise; a Latin
hypercube, so that the other parameters' priors are covered evenly), and a pair's interaction is
the two-way ANOVA interaction of its grid table. Var f comes from a separate Latin hypercube of
``N_TOTAL`` vectors. Each tree of the forest is decomposed on its own; we report the
mean and the standard deviation of the fractions over trees.

Local parameter importance (Biedenkapp et al. 2018). Around γ*, each parameter active in γ*
takes every value of its grid and γ*'s own value (categorical: every choice), the others staying
at γ*; parameters this activates take their defaults, those it deactivates drop out, and
forbidden results are skipped. A parameter's local importance is the variance of f along its
values divided by the sum of these variances over all parameters (per tree; mean and std over
trees). Parameters inactive in γ* have no local effect and are not listed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import CategoricalHyperparameter, OrdinalHyperparameter
from scipy.stats import qmc

from metaopt.analysis.meta_model import (
    N_TREES,
    SEED,
    MetaArchiveModel,
    deactivate,
    latent_vectors,
    meta_archive_model,
)
from metaopt.core.errors import UsageError
from metaopt.store.store import StudyStore, read_gamma_star
from metaopt.core.store_utils import atomic_write_text

N_TOTAL = 4096
"""Latent vectors used to estimate Var f."""

METHOD_VERSION = 1
"""Part of the inputs' digest (see :func:`inputs_digest`): raise it when a change here alters the numbers,
so that importance written by older code is computed again."""


@dataclass
class ImportanceResult:
    """fANOVA (parameter, kind, importance, std), local importance (parameter, importance, std), provenance."""

    fanova: pd.DataFrame
    local: pd.DataFrame
    meta: dict[str, Any]


# -- the prior of the space ------------------------------------------------------------------

class Prior:
    """The space's prior on the latent vectors: independent hyperparameters, each by its quantile function.

    A quantile function is read off ``N_TOTAL`` sorted draws of ConfigSpace's own sampler, so any
    prior (uniform, log, integer, weighted choices) is represented the way ConfigSpace samples it.
    """

    def __init__(self, space: ConfigurationSpace, rng: np.random.RandomState) -> None:
        self.space = space
        self.rng = rng
        self.sorted = [np.sort(hp.sample_vector(N_TOTAL, seed=rng)).astype(float) for hp in space.values()]

    def quantile(self, j: int, u: np.ndarray) -> np.ndarray:
        """Vector values of hyperparameter ``j`` at probabilities ``u`` in [0, 1)."""
        return self.sorted[j][np.minimum((np.asarray(u) * N_TOTAL).astype(int), N_TOTAL - 1)]

    def sample(self, n: int) -> np.ndarray:
        """``n`` latent vectors as a Latin hypercube: each prior's n equal-probability strata are hit once."""
        u = qmc.LatinHypercube(d=len(self.space), seed=np.random.default_rng(self.rng.randint(2**31))).random(n)
        return np.column_stack([self.quantile(j, u[:, j]) for j in range(len(self.space))])

    def grid(self, name: str, grid_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Vector values representing the prior of ``name`` and their weights: every choice with its
        probability, or the ``grid_size`` quantiles (k + 1/2) / K, equally weighted."""
        hp = self.space[name]
        if isinstance(hp, CategoricalHyperparameter):
            return np.arange(hp.size, dtype=float), np.asarray(hp.probabilities, dtype=float)
        if isinstance(hp, OrdinalHyperparameter):
            return np.arange(hp.size, dtype=float), np.full(hp.size, 1.0 / hp.size)
        j = list(self.space.keys()).index(name)
        return self.quantile(j, (np.arange(grid_size) + 0.5) / grid_size), np.full(grid_size, 1.0 / grid_size)


# -- fANOVA and local importance ----------------------------------------------------------------

def _grid_means(model: MetaArchiveModel, space: ConfigurationSpace, base: np.ndarray, instances: np.ndarray | None,
                columns: list[int], points: np.ndarray) -> np.ndarray:
    """Per-tree mean of the prediction over ``base`` with ``columns`` set to each row of ``points`` (T × n_points)."""
    n = len(base)
    latent = np.tile(base, (len(points), 1))
    latent[:, columns] = np.repeat(points, n, axis=0)
    preds = model.per_tree(deactivate(space, latent), None if instances is None else np.tile(instances, len(points)))
    return preds.reshape(len(preds), len(points), n).mean(axis=2)


def fanova(model: MetaArchiveModel, prior: Prior, parameters: list[str], n_samples: int, grid_size: int,
           pairs: bool) -> pd.DataFrame:
    """Main (and pair) effects as fractions of Var f: mean and std over trees (see the module docstring)."""
    space = prior.space
    names = list(space.keys())
    total = model.marginal(deactivate(space, prior.sample(N_TOTAL))).var(axis=1)
    base = prior.sample(n_samples)
    instances = (prior.rng.permutation(np.resize(np.arange(model.n_instances), n_samples))
                 if model.n_instances else None)
    grids = {p: prior.grid(p, grid_size) for p in parameters}
    rows: list[tuple[str, str, np.ndarray]] = []
    for p in parameters:
        values, w = grids[p]
        a = _grid_means(model, space, base, instances, [names.index(p)], values[:, None])
        rows.append((p, "main", ((a - a @ w[:, None]) ** 2) @ w))
    for p, q in itertools.combinations(parameters, 2) if pairs else ():
        (vp, wp), (vq, wq) = grids[p], grids[q]
        points = np.array(list(itertools.product(vp, vq)))
        a = _grid_means(model, space, base, instances, [names.index(p), names.index(q)], points)
        a = a.reshape(len(a), len(vp), len(vq))
        row = a @ wq
        col = np.einsum("tij,i->tj", a, wp)
        grand = row @ wp
        interaction = a - row[:, :, None] - col[:, None, :] + grand[:, None, None]
        rows.append((f"{p} × {q}", "pair", np.einsum("tij,i,j->t", interaction ** 2, wp, wq)))
    fractions = [np.divide(v, total, out=np.zeros_like(v), where=total > 0) for _, _, v in rows]
    table = pd.DataFrame({"parameter": [r[0] for r in rows], "kind": [r[1] for r in rows],
                          "importance": [f.mean() for f in fractions], "std": [f.std() for f in fractions]})
    return table.sort_values(["kind", "importance"], ascending=[True, False], ignore_index=True)


def local_importance(model: MetaArchiveModel, prior: Prior, parameters: list[str], incumbent: Mapping[str, Any],
                     grid_size: int) -> pd.DataFrame:
    """Local parameter importance around ``incumbent`` (see the module docstring)."""
    space = prior.space
    names = list(space.keys())
    star = latent_vectors(space, [incumbent])[0]
    active = ~np.isnan(deactivate(space, star[None])[0])
    variances, listed = [], []
    for p in parameters:
        j = names.index(p)
        if not active[j]:
            continue
        values = np.unique(np.append(prior.grid(p, grid_size)[0], star[j]))
        latent = np.tile(star, (len(values), 1))
        latent[:, j] = values
        vectors = deactivate(space, latent)
        allowed = [not any(clause.is_forbidden_vector(v) for clause in space.forbidden_clauses) for v in vectors]
        variances.append(model.marginal(vectors[allowed]).var(axis=1))
        listed.append(p)
    if not listed:
        return pd.DataFrame(columns=["parameter", "importance", "std"])
    var = np.array(variances)  # parameters × trees
    sums = var.sum(axis=0)
    fractions = np.divide(var, sums, out=np.zeros_like(var), where=sums > 0)
    table = pd.DataFrame({"parameter": listed, "importance": fractions.mean(axis=1), "std": fractions.std(axis=1)})
    return table.sort_values("importance", ascending=False, ignore_index=True)


def compute_importance(archive: pd.DataFrame, space: ConfigurationSpace, objective: str,
                       incumbent: Mapping[str, Any], seed: int, n_trees: int = N_TREES, *, pairs: bool = True,
                       n_samples: int = 256, grid_size: int = 8, instance_column: str = "instance",
                       provenance: Mapping[str, Any] | None = None) -> ImportanceResult:
    """fANOVA and local importance of the archive's ``objective`` over ``space`` (γ in ``gamma.<name>`` columns).

    ``incumbent`` is γ* (values of parameters outside ``space`` are ignored); ``provenance`` (e.g. the
    archive's path and the restriction) is stored in the result's meta data.
    """
    model = meta_archive_model(archive, space, objective=objective, instance_column=instance_column,
                               n_trees=n_trees, seed=seed)
    parameters = model.parameters
    prior = Prior(space, np.random.RandomState(seed))
    meta = {**dict(provenance or {}), "objective": objective, "n_rows": model.n_rows,
            "n_configurations": model.n_configurations, "n_instances": model.n_instances,
            "parameters": parameters, "seed": seed, "n_trees": n_trees, "oob_r2": model.oob_r2, "n_samples": n_samples, "n_total": N_TOTAL,
            "grid_size": grid_size, "pairs": pairs,
            "incumbent": {k: v for k, v in incumbent.items() if k in parameters},
            "method": "fANOVA (Hutter et al. 2014) by Monte Carlo over the space's prior with conditions, and "
                      "local parameter importance (Biedenkapp et al. 2018) around the incumbent, on a random "
                      "forest; mean and std over trees (see analysis/importance.py)"}
    return ImportanceResult(fanova(model, prior, parameters, n_samples, grid_size, pairs),
                            local_importance(model, prior, parameters, incumbent, grid_size), meta)


# -- files --------------------------------------------------------------------------------------

def write_importance(result: ImportanceResult, out_dir: Path) -> Path:
    """Write ``<out_dir>/importance/{fanova,local}.{csv,png}`` and ``meta.json``; return that folder."""
    from metaopt.analysis.importance_plots import plot_fanova, plot_local

    files = StudyStore(out_dir).importance
    atomic_write_text(files.fanova_csv, result.fanova.to_csv(index=False))
    atomic_write_text(files.local_csv, result.local.to_csv(index=False))
    atomic_write_text(files.meta_json, json.dumps(result.meta, indent=1, default=str) + "\n")
    where = result.meta.get("restriction") or "design space"
    plot_fanova(result.fanova, files.fanova_png, f"fANOVA of the meta-objective ({where})")
    plot_local(result.local, files.local_png, f"Local parameter importance around γ* ({where})")
    return files.folder


def inputs_digest(archive_path: Path, star_path: Path, restriction: str | None, *, pairs: bool, seed: int,
                  n_trees: int) -> str:
    """SHA-256 of everything the importance of a meta-archive depends on: the archive's and γ*'s bytes, the
    restriction, the estimator's settings and :data:`METHOD_VERSION`. Stored in ``meta.json`` as
    ``inputs_digest``; equal digests mean the stored importance is what a new computation would give."""
    digest = hashlib.sha256()
    for path in (archive_path, star_path):
        digest.update(path.read_bytes())
    settings = {"restriction": restriction, "pairs": pairs, "seed": seed, "n_trees": n_trees,
                "method_version": METHOD_VERSION}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest.hexdigest()


def read_importance(folder: Path, digest: str) -> ImportanceResult | None:
    """The importance stored in ``<folder>/importance/`` if it was computed from inputs with this
    :func:`inputs_digest` (None if it was not, or if any of its files is missing)."""
    files = StudyStore(folder).importance
    if not all(path.exists() for path in files.all()):
        return None
    meta = json.loads(files.meta_json.read_text())
    if meta.get("inputs_digest") != digest:
        return None
    return ImportanceResult(pd.read_csv(files.fanova_csv), pd.read_csv(files.local_csv), meta)


def importance_of_meta(folder: Path, restriction: str | None, meta_objective: str, out_dir: Path | None = None, *,
                       pairs: bool = True, seed: int = SEED, n_trees: int = N_TREES,
                       reuse: bool = True) -> tuple[ImportanceResult, Path, bool]:
    """Importance of one finished meta-optimization: ``folder/meta/{archive.csv, gamma_star.json}`` searched in
    ``restriction`` (None: the full space); written under ``out_dir`` (default ``folder``).

    Called by the importance stage of every ``study run`` (so also when only a study's answer changed) and by
    ``metaopt importance``. With ``reuse``, importance already written under ``out_dir`` from the same inputs
    (same :func:`inputs_digest`) is read back instead of computed again (a few minutes on a 450-trial archive).
    Returns the result, the folder written, and whether the stored result was reused.
    """
    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

    store = StudyStore(folder)
    archive_path, star_path = store.archive_csv, store.gamma_star_json
    for path in (archive_path, star_path):
        if not path.exists():
            raise UsageError(f"{path} not found: is {folder} the output of a study's optimize stage?")
    target = out_dir or folder
    digest = inputs_digest(archive_path, star_path, restriction, pairs=pairs, seed=seed, n_trees=n_trees)
    stored = read_importance(target, digest) if reuse else None
    if stored is not None:
        return stored, StudyStore(target).importance_dir, True
    space = get_restriction(restriction).space() if restriction else design_space()
    incumbent = read_gamma_star(star_path)["config"]
    archive, note = store.read_archive()
    if note:
        print(f"metaopt: warning: {note}", file=sys.stderr)
    result = compute_importance(archive, space, "objective", incumbent, seed, n_trees, pairs=pairs,
                                provenance={"archive": str(archive_path), "gamma_star": str(star_path),
                                            "restriction": restriction, "meta_objective": meta_objective,
                                            "inputs_digest": digest})
    return result, write_importance(result, target), False


def importance_for_study(study_output: Path, out_dir: Path | None = None, *, pairs: bool = True, seed: int = SEED,
                         n_trees: int = N_TREES,
                         reuse: bool = True) -> list[tuple[str | None, ImportanceResult, Path, bool]]:
    """Importance of a study's finished optimize stage, per meta-optimization: (restriction, result, folder
    written, reused; see :func:`importance_of_meta`). A study with a list of restrictions has one per arm
    (``arms/<restriction>/``, also under ``out_dir``); the others one, written under ``out_dir`` (default: the
    study output)."""
    store = StudyStore(study_output)
    if not store.is_study():
        raise UsageError(f"{store.study_file} not found: is {store.root} the output of a study's optimize stage?")
    meta_spec = store.spec().meta
    if meta_spec is None:
        raise UsageError(f"{store.study_file} has no 'meta' section: there is no meta-archive to analyse")
    arms: dict[str | None, tuple[Path, Path | None]]
    if isinstance(meta_spec.restriction, list):
        arms = {r: (store.arm(r).root, StudyStore(out_dir).arm(r).root if out_dir else None)
                for r in meta_spec.restriction}
    else:
        arms = {meta_spec.restriction: (store.root, out_dir)}
    return [(restriction, *importance_of_meta(folder, restriction, meta_spec.objective, target, pairs=pairs,
                                              seed=seed, n_trees=n_trees, reuse=reuse))
            for restriction, (folder, target) in arms.items()]
