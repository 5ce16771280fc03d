"""Optimizer names to what runs: one vocabulary for every place that names an optimizer.

An optimizer is named by

- a preset (``rs``, ``hb``, ``bohb``, ...: :mod:`metaopt.spaces.presets`);
- a peer (``smac_hpo``, ``optuna_tpe``, ...: an external library, :mod:`metaopt.engine.peers`), where the
  caller runs peers;
- ``gamma_star`` or ``gamma_star:<restriction>``: γ* of a study's meta-optimization (the caller
  passes the study's γ*'s);
- a JSON file: a configuration, or an object with a ``"config"`` object (e.g. ``meta/gamma_star.json``);
- a study variant (:class:`metaopt.store.study_spec.OptimizerVariant`): a preset or a configuration with
  parameters overridden.

Used by the evaluation stage (a study's ``evaluation.optimizers``), ablation endpoints (``metaopt
ablate --from/--to`` and a study's ``ablation`` entries), ``metaopt run/schedule --optimizer/--config``,
``metaopt presets show`` and the check of a study before it runs. Every problem is a UsageError
whose message starts with the ``field`` the caller names (a flag or a study field).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaopt.core.errors import UsageError
from metaopt.core.store_utils import read_json_file
from metaopt.store.study_spec import OptimizerVariant

Config = dict[str, Any]
GAMMA_STAR = "gamma_star"


@dataclass(frozen=True)
class ResolvedOptimizer:
    """What an optimizer name stands for: a validated configuration of the design space, or a peer.

    ``config`` is None for a peer, and for a γ* whose meta-optimization has not finished yet (only
    when :func:`resolve_optimizer` was asked to accept that, with ``pending=True``)."""

    name: str
    config: Config | None = None
    peer: str | None = None


def is_gamma_star(entry: Any) -> bool:
    """True for ``gamma_star`` and ``gamma_star:<restriction>`` (γ* of a study's meta-optimization)."""
    return isinstance(entry, str) and (entry == GAMMA_STAR or entry.startswith(GAMMA_STAR + ":"))


def optimizer_name(entry: str | OptimizerVariant) -> str:
    """The name of an optimizer list entry: the string itself, or a variant's ``name``."""
    return entry if isinstance(entry, str) else entry.name


def read_config_file(path: str | Path, field: str) -> Config:
    """The validated configuration in the JSON file ``path`` (a configuration, or an object whose
    ``"config"`` is one, as ``meta/gamma_star.json``); UsageError starting with ``field`` otherwise."""
    from metaopt.spaces.design_space import validate

    data = read_json_file(path, field)
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise UsageError(f"{field}: {path} must hold a JSON object of design-space parameters")
    try:
        return validate(data)
    except UsageError as err:
        raise UsageError(f"{field}: {path}: {err}") from None


def resolve_optimizer(entry: str | OptimizerVariant, fidelity: Any, field: str, *,
                      gamma_stars: Mapping[str, Config | None] | None = None, peers: Collection[str] = (),
                      files: bool = True, pending: bool = False, gamma_star_hint: str = "") -> ResolvedOptimizer:
    """Called before an optimizer runs (and when a study is checked): what ``entry`` names.

    Args:
        entry: a name (preset, peer, γ*, JSON file) or a study variant.
        fidelity: the benchmark's fidelity range (presets depend on it).
        field: how the caller names where ``entry`` came from, e.g. ``--from`` or
            ``field 'evaluation.optimizers[2]'``; every error message starts with it.
        gamma_stars: the study's γ*'s by name; None as a value: its meta-optimization has not
            finished. None (the default): there is no study, so no γ*.
        peers: the peer names the caller can run (none: peers are not accepted).
        files: whether a JSON file path is accepted.
        pending: accept a γ* that is not computed yet (a study checked before it runs): it resolves
            to an entry without config.
        gamma_star_hint: what to do when a γ* is asked for and not there, appended to that error.

    Returns:
        The name (a file's stem for a file) and the validated configuration, or the peer.
    """
    from metaopt.spaces.presets import PRESETS

    if isinstance(entry, OptimizerVariant):
        return ResolvedOptimizer(entry.name, config=_variant_config(entry, fidelity, field))
    if is_gamma_star(entry):
        stars = gamma_stars or {}
        if entry not in stars:
            raise UsageError(f"{field}: {entry!r} is not a gamma* of this study; known: "
                             f"{', '.join(stars) or 'none'}{_hint(gamma_star_hint)}")
        if stars[entry] is None and not pending:
            raise UsageError(f"{field}: {entry!r} needs a finished meta-optimization{_hint(gamma_star_hint)}")
        return ResolvedOptimizer(entry, config=stars[entry])
    if entry in PRESETS:
        return ResolvedOptimizer(entry, config=PRESETS[entry].config(fidelity))
    if entry in peers:
        return ResolvedOptimizer(entry, peer=entry)
    if files and (Path(entry).suffix == ".json" or Path(entry).exists()):
        return ResolvedOptimizer(Path(entry).stem, config=read_config_file(entry, field))
    known = [*([", ".join(gamma_stars)] if gamma_stars else []), f"presets {', '.join(PRESETS)}",
             *([f"peers {', '.join(peers)}"] if peers else []), *(["FILE.json"] if files else [])]
    raise UsageError(f"{field}: unknown optimizer {entry!r}; known: {'; '.join(known)}")


def _hint(text: str) -> str:
    return f" ({text})" if text else ""


def _variant_config(variant: OptimizerVariant, fidelity: Any, field: str) -> Config:
    """A study variant's configuration: its preset's (or its own) with ``set`` applied; parameters that
    become inactive are dropped, and setting an inactive one is an error."""
    from metaopt.spaces.design_space import validate
    from metaopt.spaces.presets import get_preset

    try:
        base = get_preset(variant.preset).config(fidelity) if variant.preset else dict(variant.config or {})
        merged = validate({**base, **variant.set}, drop_inactive=True)
        inactive = [name for name in variant.set if name not in merged]
        if inactive:
            raise UsageError(f"parameter {inactive[0]} is inactive in this configuration")
    except UsageError as err:
        raise UsageError(f"{field} ({variant.name}): {err}") from None
    return merged
