"""The model of a meta-archive: one encoding of γ, one random forest, fitted once per archive.

Parameter importance (:mod:`metaopt.analysis.importance`), the ``surrogate`` ablation estimator
(:class:`metaopt.stages.ablation_estimators.SurrogateEstimator`) and the report's ranking of the archive's
configurations (:mod:`metaopt.analysis.report`) all ask one question of a meta-archive
(``meta/archive.csv``: one row per meta-trial γ × instance × seed with its meta-objective): how good
is γ, averaged over the training instances? They all get the answer from :func:`meta_archive_model`.

Rows. Every archive row with an objective; rows of failed inner runs keep their crash objective
(``metaopt.store.meta_archive.CRASH_OBJECTIVE``): it is what the meta-optimizer saw, and what the
evaluated ablation estimator counts for a failed run.

Encoding (one column per parameter). A parameter is a column of ConfigSpace's vector
representation of the given space: numeric ones in [0, 1] on their own (log) scale, categorical
and ordinal ones as the choice index; an inactive parameter is ``INACTIVE = -1``, outside every
active range, so one tree split separates it. A value missing from a γ (a parameter added to the
space later) takes its default where active, as ``validate`` does. Parameters with a single
possible value (constants) are left out. When the archive has an ``instance`` column, the
instance is one more column: the index of its name among the archive's sorted instance names.
One column per parameter (rather than one-hot categoricals) is what the functional ANOVA needs: it
sets one parameter by setting one column, and a tree never sees a half-set choice; the vector
representation is ConfigSpace's own, so integer, log and conditional parameters are scaled the
way the space samples them.

Forest. scikit-learn's ``RandomForestRegressor`` with its defaults (bootstrap, full-depth trees,
every feature considered at each split), ``N_TREES`` trees, seeded with ``SEED``, one process, and
its out-of-bag R² as the fit's quality. These are the settings the importance tests check against
closed-form decompositions.

Prediction. f(γ) = mean over the archive's instances of the forest's prediction (Hutter et al.
2014, §4: marginalizing instances out), so configurations run on only some instances are compared
fairly. Every tree gives its own f; the mean over trees is the prediction and the standard
deviation over trees the forest's own uncertainty.

Cache. :func:`meta_archive_model` keeps the last few models, keyed by the content of the archive
columns it reads, the space and the forest's settings: the stages and the report of one study fit
the forest once per archive and space.
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import CategoricalHyperparameter, Hyperparameter, OrdinalHyperparameter
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

from metaopt.core.errors import UsageError

N_TREES = 100
"""Trees of the forest."""
SEED = 1
"""Random state of the forest."""
INACTIVE = -1.0
"""Model feature of an inactive parameter (active values are in [0, 1] or choice indices ≥ 0)."""
GAMMA_PREFIX = "gamma."
"""Archive columns holding γ (see :func:`metaopt.store.meta_archive.meta_archive`)."""
CACHE_SIZE = 8
"""Models kept by :func:`meta_archive_model`."""


# -- the encoding -------------------------------------------------------------------------------

def analyzed_parameters(space: ConfigurationSpace) -> list[str]:
    """The parameters that can take more than one value (the model's features, in space order)."""
    return [name for name, hp in space.items() if hp.size > 1]


def _vector_value(hp: Hyperparameter, value: Any) -> float:
    """The vector value of ``value`` (missing: the default's)."""
    if value is None or pd.isna(value):
        value = hp.default_value
    if isinstance(hp, (CategoricalHyperparameter, OrdinalHyperparameter)):
        choices = [str(c) for c in (hp.choices if isinstance(hp, CategoricalHyperparameter) else hp.sequence)]
        if str(value) not in choices:
            raise UsageError(f"parameter {hp.name}: value {value!r} is not one of {', '.join(choices)}")
        return float(choices.index(str(value)))
    return float(hp.to_vector(float(value)))


def latent_vectors(space: ConfigurationSpace, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """One row per configuration, one column per hyperparameter (space order): its vector value, or the default's."""
    return np.array([[_vector_value(hp, config.get(name)) for name, hp in space.items()] for config in configs],
                    dtype=float).reshape(len(configs), len(space))


def deactivate(space: ConfigurationSpace, latent: np.ndarray) -> np.ndarray:
    """Latent vectors with inactive hyperparameters set to NaN.

    ConfigSpace's rule: a hyperparameter is active iff all its parent conditions hold (a condition
    on an inactive, NaN parent fails); parents precede their children in the space's order.
    """
    rows = np.array(latent, dtype=float).T  # ConfigSpace's vectorized conditions read hyperparameters as rows
    for j, name in enumerate(space.keys()):
        for condition in space.parent_conditions_of[name]:
            rows[j, ~condition.satisfied_by_vector_array(rows)] = np.nan
    return rows.T


def encode(space: ConfigurationSpace, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """The vectors of ``configs`` (dicts of parameter values): one row each, space order, NaN where inactive."""
    return deactivate(space, latent_vectors(space, configs))


def archive_configs(archive: pd.DataFrame, space: ConfigurationSpace) -> list[dict[str, Any]]:
    """The γ of every archive row as a dict over ``space``'s parameters (None or NaN where missing)."""
    return [{name: row.get(GAMMA_PREFIX + name) for name in space.keys()} for row in archive.to_dict(orient="records")]


# -- the model ----------------------------------------------------------------------------------

class MetaArchiveModel:
    """The random forest over encoded γ (+ instance code) of one archive (module docstring).

    Made by :func:`meta_archive_model`; after that it is only read.
    """

    def __init__(self, space: ConfigurationSpace, vectors: np.ndarray, instance_names: pd.Series | None,
                 y: np.ndarray, n_trees: int, seed: int) -> None:
        self.space = space
        self.parameters = analyzed_parameters(space)
        """Names of the parameters that are features, in space order."""
        names = list(space.keys())
        self._columns = [names.index(p) for p in self.parameters]
        self.instances: list[str] = sorted(instance_names.unique()) if instance_names is not None else []
        """The archive's instances (sorted names); empty when the archive has no instance column."""
        codes = instance_names.map({name: k for k, name in enumerate(self.instances)}).to_numpy(dtype=float) \
            if instance_names is not None else None
        self.n_rows = len(y)
        self.n_configurations = len({tuple(np.nan_to_num(v, nan=INACTIVE)) for v in vectors})
        self.forest = RandomForestRegressor(n_estimators=n_trees, oob_score=True, random_state=seed, n_jobs=1)
        with warnings.catch_warnings():  # with few trees some rows are in every bootstrap: R² from the others
            warnings.filterwarnings("ignore", "Some inputs do not have OOB scores", UserWarning)
            self.forest.fit(self._features(vectors, codes), y)

    @property
    def n_instances(self) -> int:
        """Number of the archive's instances (0: the archive has no instance column)."""
        return len(self.instances)

    @property
    def trees(self) -> list[DecisionTreeRegressor]:
        """The fitted trees (each is one partition of the feature space with a constant per cell)."""
        return list(self.forest.estimators_)

    @property
    def oob_r2(self) -> float:
        """Out-of-bag R² of the forest on the archive's rows."""
        return float(self.forest.oob_score_)

    def _features(self, vectors: np.ndarray, instance_codes: np.ndarray | None) -> np.ndarray:
        X = np.nan_to_num(vectors[:, self._columns], nan=INACTIVE)
        if self.n_instances:
            assert instance_codes is not None  # a model fitted on several instances is asked with their codes
            X = np.column_stack([X, instance_codes])
        return np.ascontiguousarray(X, dtype=np.float32)

    def per_tree(self, vectors: np.ndarray, instance_codes: np.ndarray | None) -> np.ndarray:
        """Predictions of every tree (n_trees × n) at the given vectors (rows of :func:`encode`) and instance
        codes (indices into :attr:`instances`; None when the archive has no instances)."""
        X = self._features(vectors, instance_codes)
        return np.stack([tree.predict(X, check_input=False) for tree in self.forest.estimators_])

    def marginal(self, vectors: np.ndarray) -> np.ndarray:
        """Per-tree f(γ) = mean over the archive's instances of the prediction (n_trees × n)."""
        if not self.n_instances:
            return self.per_tree(vectors, None)
        m, n = self.n_instances, len(vectors)
        preds = self.per_tree(np.repeat(vectors, m, axis=0), np.tile(np.arange(m, dtype=float), n))
        return preds.reshape(len(preds), n, m).mean(axis=2)

    def predict(self, configs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation over trees of f(γ) for each configuration (dicts of parameter values)."""
        f = self.marginal(encode(self.space, configs))
        return f.mean(axis=0), f.std(axis=0)

    def describe(self) -> dict[str, Any]:
        """What was fitted: model, trees, rows, distinct configurations, instances, out-of-bag R²."""
        return {"model": "sklearn RandomForestRegressor", "n_trees": len(self.forest.estimators_),
                "seed": self.forest.random_state, "n_rows": self.n_rows, "n_configurations": self.n_configurations,
                "n_instances": self.n_instances, "oob_r2": self.oob_r2}


_CACHE: dict[tuple, MetaArchiveModel] = {}


def meta_archive_model(archive: pd.DataFrame, space: ConfigurationSpace, *, objective: str = "objective",
                       instance_column: str = "instance", n_trees: int = N_TREES, seed: int = SEED) -> MetaArchiveModel:
    """The model of ``archive`` over ``space`` (γ in ``gamma.<name>`` columns), fitted on the first call
    for this content and these settings and taken from the cache after that.

    Raises UsageError when the archive has no column ``objective``, fewer than two rows with an
    objective, or the space no parameter that can take more than one value.
    """
    if objective not in archive.columns:
        raise UsageError(f"the archive has no column {objective!r}")
    archive = archive[archive[objective].notna()]
    if len(archive) < 2:
        raise UsageError(f"the archive has {len(archive)} rows with an objective: too few to fit a model")
    if not analyzed_parameters(space):
        raise UsageError("the space has no parameter that can take more than one value")
    read = [c for c in archive.columns
            if c.startswith(GAMMA_PREFIX) and c[len(GAMMA_PREFIX):] in space or c in (objective, instance_column)]
    digest = hashlib.sha1(archive[read].to_csv(index=False).encode()).hexdigest()
    key = (digest, str(space), objective, instance_column, n_trees, seed)
    if key not in _CACHE:
        instances = archive[instance_column].astype(str) if instance_column in archive.columns else None
        model = MetaArchiveModel(space, encode(space, archive_configs(archive, space)), instances,
                                 archive[objective].to_numpy(dtype=float), n_trees, seed)
        while len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = model
    return _CACHE[key]
