"""The design space: one ConfigSpace of HPO algorithms, assembled from the component registry.

For every category there is a selector parameter (e.g. ``fidelity_schedule`` in {single, equal,
sh, hb}); each component's own hyperparameters are active only when it is selected (shared ones
when any of their owners is). Loop-level parameters (μ) are always active.

Which categories are conditional on which choices, and which combinations are forbidden, is
derived from what the components declare (class attributes such as
``FidelitySchedule.multi_fidelity`` or ``Surrogate.has_std``; see :data:`metaopt.core.registry.CATEGORIES`
and :func:`forbidden_rules`), never from lists of names: a new component only declares what it is.

A configuration γ may leave parameters out: missing active parameters take their defaults, and
every category's default is its neutral choice (e.g. ``stopping: budget``), so that adding a
component later never changes what an existing configuration means.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

from ConfigSpace import (
    Categorical,
    ConfigurationSpace,
    Constant,
    EqualsCondition,
    ForbiddenAndConjunction,
    ForbiddenEqualsClause,
    ForbiddenInClause,
    InCondition,
    Integer,
)
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Hyperparameter,
    IntegerHyperparameter,
    NumericalHyperparameter,
)
from ConfigSpace.util import deactivate_inactive_hyperparameters

from metaopt.core.errors import UsageError
from metaopt.core.registry import CATEGORIES, activating_choices, components, get_component, names_declaring

# μ(1): the batch size (first-bracket size for hb). Paper Table 4: {2..200} on a log scale; we
# start at 1 so that sequential single-fidelity algorithms (RS, BO) are points of the space.
MU = Integer("mu", (1, 200), default=32, log=True)
LOOP_HYPERPARAMETERS: tuple[Hyperparameter, ...] = (MU,)


@functools.lru_cache(maxsize=1)
def design_space() -> ConfigurationSpace:
    """The full design space (cached; treat as read-only)."""
    return build_space()


def build_space(
    allowed: Mapping[str, Sequence[str]] | None = None,
    fixed: Mapping[str, Any] | None = None,
    dropped: Sequence[str] = (),
) -> ConfigurationSpace:
    """Assemble the design space from the registry, optionally restricted.

    ``allowed`` limits selectors to some of their components (the others' hyperparameters vanish);
    ``fixed`` turns hyperparameters into constants; ``dropped`` removes hyperparameters entirely
    (a restriction then derives their values, see ``spaces.restrictions``).
    """
    allowed = dict(allowed or {})
    fixed = dict(fixed or {})
    space = ConfigurationSpace(name="metaopt")

    def add(hp: Hyperparameter) -> Hyperparameter | None:
        if hp.name in dropped:
            return None
        if hp.name in fixed:
            if not hp.legal_value(fixed[hp.name]):
                raise ValueError(f"cannot fix {hp.name} to {fixed[hp.name]!r}: {describe_hyperparameter(hp)}")
            hp = Constant(hp.name, fixed[hp.name])
        space.add(hp)
        return hp

    for hp in LOOP_HYPERPARAMETERS:
        add(hp)
    owners_of: dict[str, str] = {}
    for category in CATEGORIES.values():
        comps = [c for c in components(category.name) if c.name in allowed.get(category.selector, [c.name])]
        if not comps:
            continue
        names = [c.name for c in comps]
        if category.selector in fixed:
            names = [str(fixed.pop(category.selector))]
            comps = [c for c in comps if c.name in names]
        condition_values: list[str] = []
        activation = activating_choices(category)
        if activation is not None:
            parent, values = activation
            if parent not in space:
                continue
            condition_values = [v for v in values if v in getattr(space[parent], "choices", ())]
            if not condition_values:
                continue
        selector = Categorical(category.selector, names, default=category.default if category.default in names
                               else names[0])
        space.add(selector)
        if activation is not None and condition_values:
            space.add(_condition(selector, space[activation[0]], condition_values))
        shared: dict[str, tuple[Hyperparameter, list[str]]] = {}
        for comp in comps:
            for hp in comp.hyperparameters:
                if hp.name in shared:
                    if shared[hp.name][0] != hp:
                        raise ValueError(f"{category.name}: {hp.name} is declared differently by two components")
                    shared[hp.name][1].append(comp.name)
                    continue
                if hp.name in owners_of or hp.name in space:
                    raise ValueError(f"hyperparameter {hp.name} of {category.name}/{comp.name} clashes with "
                                     f"{owners_of.get(hp.name, 'the loop')}")
                owners_of[hp.name] = f"{category.name}/{comp.name}"
                shared[hp.name] = (hp, [comp.name])
        for hp, owners in shared.values():
            added = add(hp)
            if added is not None:
                space.add(_condition(added, selector, owners))
    _add_forbiddens(space)
    return space


ForbiddenRule = tuple[tuple[str, tuple[str, ...]], ...]
"""A combination that cannot run: (selector, forbidden choices) clauses that must all hold."""


def _choices(category: str, attribute: str, value: bool = True) -> tuple[str, tuple[str, ...]]:
    """The clause "the selector of ``category`` picks a component whose ``attribute`` is ``value``"."""
    return CATEGORIES[category].selector, names_declaring(category, attribute, value)


def forbidden_rules() -> list[ForbiddenRule]:
    """Combinations that cannot run, derived from the components' class attributes."""
    return [
        # Leaving the fidelity schedule for one point at a time is a move of the batch loop only. (This
        # rule first: in another order ConfigSpace's JSON round trip gives the parameters' forbiddens
        # in another order, and the space read back differs; test_design_space.)
        (_choices("proposals", "leaves_schedule"), _choices("fidelity_schedules", "asynchronous")),
        # CFO is a sequential local search on full-fidelity losses: it has no multi-fidelity variant here.
        (_choices("proposals", "supports_multi_fidelity", False), _choices("fidelity_schedules", "multi_fidelity")),
        # Cost penalties trade expected improvement against cost; EI needs a surrogate with a std.
        (_choices("cost_penalties", "uses_cost"), _choices("surrogates", "has_std", False)),
    ]


def _add_forbiddens(space: ConfigurationSpace) -> None:
    """Add each rule of :func:`forbidden_rules` whose parameters are all in the space and each keep
    at least one forbidden value (a clause on a constant is dropped when it holds)."""
    for rule in forbidden_rules():
        clauses = []
        for name, values in rule:
            hp = space[name] if name in space else None
            if isinstance(hp, Constant):
                if hp.value in values:
                    continue  # a clause that always holds
                break  # a clause that never holds: the rule cannot fire
            if not isinstance(hp, CategoricalHyperparameter) or not [v for v in values if v in hp.choices]:
                break
            kept = [v for v in values if v in hp.choices]
            clauses.append(ForbiddenEqualsClause(hp, kept[0]) if len(kept) == 1 else ForbiddenInClause(hp, kept))
        else:
            if clauses:
                space.add(clauses[0] if len(clauses) == 1 else ForbiddenAndConjunction(*clauses))


def _condition(child: Hyperparameter, parent: Hyperparameter, values: list[str]) -> EqualsCondition | InCondition:
    """child is active iff parent takes one of ``values``."""
    return EqualsCondition(child, parent, values[0]) if len(values) == 1 else InCondition(child, parent, values)


def describe_hyperparameter(hp: Any) -> str:
    """A short human description of a hyperparameter's domain."""
    if isinstance(hp, CategoricalHyperparameter):
        return "one of " + ", ".join(map(str, hp.choices))
    kind = "integer" if isinstance(hp, IntegerHyperparameter) else "float"
    scale = ", log scale" if getattr(hp, "log", False) else ""
    return f"{kind} in [{hp.lower:g}, {hp.upper:g}]{scale}"


def validate(config: Mapping[str, Any], space: ConfigurationSpace | None = None,
             drop_inactive: bool = False) -> dict[str, Any]:
    """Check a configuration γ of the design space; return it complete (defaults filled in).

    Raises :class:`UsageError` naming the offending parameter: unknown names, illegal values (also
    true/false for a number, and a non-integral number for an integer), parameters that are inactive under the chosen components (unless ``drop_inactive``: then they
    are left out of the result), forbidden combinations.
    """
    space = space or design_space()
    for name, value in config.items():
        if name not in space:
            raise UsageError(f"unknown design-space parameter {name!r}; known: {', '.join(space.keys())}")
        hp = space[name]
        if isinstance(hp, IntegerHyperparameter) and isinstance(value, float) and value.is_integer():
            value = int(value)
        # bool is an int subclass, so ConfigSpace would take true as 1: refuse it for numbers.
        if (isinstance(value, bool) and isinstance(hp, NumericalHyperparameter)) or not hp.legal_value(value):
            raise UsageError(f"parameter {name}: value {value!r} is not allowed; allowed: {describe_hyperparameter(hp)}")
    values = {hp.name: hp.default_value for hp in space.values()}
    values.update({k: (int(v) if isinstance(space[k], IntegerHyperparameter) else v) for k, v in config.items()})
    try:
        complete = deactivate_inactive_hyperparameters(values, space)
        complete.check_valid_configuration()
    except (ValueError, TypeError) as err:
        raise UsageError(f"invalid configuration: {str(err).splitlines()[0]}") from None
    result = dict(complete)
    for name in config:
        if name not in result and not drop_inactive:
            parents = ", ".join(f"{p.name}={result.get(p.name)!r}" for p in space.parents_of[name])
            raise UsageError(f"parameter {name} is inactive in this configuration (because {parents})")
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in result.items()}


def without_stopping(config: Mapping[str, Any]) -> dict[str, Any]:
    """γ with ``stopping: budget``: the stopping rule and its hyperparameters removed."""
    rule = get_component("stopping_rules", str(config.get("stopping", "budget")))
    full = {k: v for k, v in config.items() if k not in rule.hyperparameter_names}
    full["stopping"] = "budget"
    return full
