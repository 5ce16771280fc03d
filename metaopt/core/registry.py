"""The component registry: building blocks registered under (category, name).

Each component declares its own hyperparameters as a list of ConfigSpace hyperparameters (a
fragment of the design space). The design space (``metaopt.spaces.design_space``) is assembled
from this registry, so registering a component adds it, with its hyperparameters and their
conditions, to the space. A hyperparameter declared identically by several components of one
category (e.g. ``log_eta_fid`` by every multi-fidelity schedule) is shared: it is active when any of
them is chosen.

Who owns which fact:

- This module owns the categories: their selector parameter, default and which parent choice
  activates them (:data:`CATEGORIES`).
- Each category's base class (in ``metaopt.components``) declares itself with :func:`category_base`;
  :func:`register` refuses a component that does not subclass it.
- The components own what they are: their hyperparameters (:func:`register`) and the class
  attributes conditions and forbidden combinations are derived from (e.g.
  ``FidelitySchedule.multi_fidelity``, ``Surrogate.has_std``, ``CostPenalty.uses_cost``).

Components register themselves when their module is imported; :func:`load_components` imports
every public module of the ``metaopt.components`` package (a module whose name starts with ``_``
is a helper, not a category module, and is not imported).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from ConfigSpace.hyperparameters import Hyperparameter

from metaopt.core.errors import UsageError

COMPONENT_PACKAGE = "metaopt.components"
"""The package whose modules register the components (imported by name: it is a layer above this one)."""


@dataclass(frozen=True)
class Category:
    """A kind of building block and the design-space parameter that selects among its components.

    ``active_when`` makes the whole category conditional: ``(parent category, attribute)`` means
    its selector exists only when the parent's selector chooses a component whose class attribute
    ``attribute`` is true (e.g. promotion rules only under fidelity schedules with
    ``multi_fidelity``); :func:`activating_choices` resolves it to names. One parent only:
    ConfigSpace 1.2 samples OR-conditions whose parents sit at different depths wrongly (it
    decides them at the shallowest parent; automl/ConfigSpace#430), so the design space has none.
    """

    name: str
    selector: str
    description: str
    default: str
    active_when: tuple[str, str] | None = None


@dataclass(frozen=True)
class Component:
    """A registered building block: its class and its own hyperparameters."""

    category: str
    name: str
    factory: type
    hyperparameters: tuple[Hyperparameter, ...] = ()
    description: str = ""

    @property
    def hyperparameter_names(self) -> list[str]:
        return [hp.name for hp in self.hyperparameters]

    def declares(self, attribute: str) -> bool:
        """Whether the component's class sets the boolean class attribute ``attribute`` true."""
        return bool(getattr(self.factory, attribute))

    def build(self, config: dict[str, Any]) -> Any:
        """Instantiate with this component's hyperparameters taken from a design-space configuration."""
        kwargs = {name: config[name] for name in self.hyperparameter_names if name in config}
        return self.factory(**kwargs)


# The categories of the project card, in the order the design space and `metaopt components` show
# them. Later components extend the categories' component lists, not this table.
CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in [
        Category("fidelity_schedules", "fidelity_schedule",
                 "how batches move through fidelity stages (Smashy Alg. 2: equal / SH / HB batches; CAHB)", "single"),
        Category("proposals", "proposal",
                 "how new configurations are proposed: sample-and-filter (Smashy) or CFO local search", "sample_filter"),
        Category("samplers", "sampler", "the generating distribution new configurations are drawn from", "uniform",
                 active_when=("proposals", "uses_sampler_and_filter")),
        Category("filters", "filter_method", "how sampled candidates are filtered by a surrogate (Smashy Alg. 3/4)",
                 "none", active_when=("proposals", "uses_sampler_and_filter")),
        Category("surrogates", "surrogate", "the model that predicts losses of candidates (fidelity is a feature)",
                 "knn1", active_when=("filters", "uses_surrogate")),
        Category("acquisitions", "acquisition", "what the filter ranks candidates by, computed from the surrogate",
                 "mean", active_when=("filters", "uses_surrogate")),
        Category("cost_penalties", "cost_penalty", "how expected improvement is traded against predicted cost "
                 "(paper 003: EIpu, EI-alpha, EI-cool, CEI)", "none",
                 active_when=("acquisitions", "supports_cost_penalty")),
        Category("promotion_rules", "promotion", "which configurations of a batch survive to the next stage", "top",
                 active_when=("fidelity_schedules", "uses_promotion_rule")),
        Category("cost_models", "cost_model", "the model that predicts the cost of candidates for a cost penalty "
                 "(cost-aware promotion and CAHB use it too when chosen, else the log-linear model)",
                 "loglinear", active_when=("cost_penalties", "uses_cost")),
        Category("stopping_rules", "stopping", "when a run ends besides its budget", "budget"),
        Category("pending_policies", "pending", "what an asynchronous run's proposals assume about the "
                 "evaluations still running (constant liar)", "ignore",
                 active_when=("fidelity_schedules", "asynchronous")),
    ]
}

_BASES: dict[str, type] = {}
_REGISTRY: dict[tuple[str, str], Component] = {}

C = TypeVar("C", bound=type)


def _check_category(category: str) -> None:
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; known: {', '.join(CATEGORIES)}")


def category_base(category: str) -> Callable[[C], C]:
    """Class decorator declaring the base class every component of ``category`` must subclass.

    Used once per category, on the abstract class that documents the category's protocol (e.g.
    ``@category_base("samplers")`` on ``Sampler``), before any component of it is registered.
    """
    _check_category(category)

    def decorate(cls: C) -> C:
        if _BASES.get(category, cls) is not cls:
            raise ValueError(f"category {category} already has the base class {_BASES[category].__qualname__}")
        _BASES[category] = cls
        return cls

    return decorate


def base_of(category: str) -> type:
    """The base class declared for ``category`` (components are loaded first)."""
    load_components()
    _check_category(category)
    return _BASES[category]


def register(
    category: str,
    name: str,
    hyperparameters: Sequence[Hyperparameter] = (),
    description: str = "",
) -> Callable[[C], C]:
    """Class decorator registering a component under (category, name).

    The class must subclass the category's base class (:func:`category_base`); it is instantiated
    with its hyperparameters as keyword arguments (:meth:`Component.build`). ``description``
    defaults to the first line of the class docstring.
    """
    _check_category(category)

    def decorate(cls: C) -> C:
        base = _BASES.get(category)
        if base is None:
            raise TypeError(f"cannot register {category}/{name}: the category has no base class yet "
                            f"(declare one with @category_base({category!r}) before registering)")
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"cannot register {getattr(cls, '__qualname__', cls)!r} as {category}/{name}: "
                            f"components of {category} must subclass {base.__module__}.{base.__qualname__}")
        key = (category, name)
        if key in _REGISTRY and _REGISTRY[key].factory is not cls:
            raise ValueError(f"component {category}/{name} is registered twice")
        _REGISTRY[key] = Component(category, name, cls, tuple(hyperparameters),
                                   description or (cls.__doc__ or "").strip().split("\n")[0])
        return cls

    return decorate


def load_components() -> None:
    """Import every public module of the components package, so that all components are registered."""
    package = importlib.import_module(COMPONENT_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{COMPONENT_PACKAGE}.{module.name}")


def get_component(category: str, name: str) -> Component:
    """The component (category, name); unknown names fail with the known ones listed."""
    load_components()
    if category not in CATEGORIES:
        raise UsageError(f"unknown component category {category!r}; known categories: {', '.join(CATEGORIES)}")
    try:
        return _REGISTRY[(category, name)]
    except KeyError:
        raise UsageError(
            f"unknown {category} component {name!r}; known: {', '.join(component_names(category))}"
        ) from None


def component_names(category: str) -> list[str]:
    """Names registered in a category, in registration order."""
    load_components()
    return [n for (c, n) in _REGISTRY if c == category]


def components(category: str) -> list[Component]:
    """The components of a category, in registration order."""
    load_components()
    return [comp for (c, _), comp in _REGISTRY.items() if c == category]


def names_declaring(category: str, attribute: str, value: bool = True) -> tuple[str, ...]:
    """Names of the components of ``category`` whose class attribute ``attribute`` is ``value``,
    in registration order (e.g. ``names_declaring("surrogates", "has_std", False)``)."""
    return tuple(c.name for c in components(category) if c.declares(attribute) == value)


def activating_choices(category: Category) -> tuple[str, tuple[str, ...]] | None:
    """``(parent selector, parent choices)`` under which ``category`` is active; None if always active."""
    if category.active_when is None:
        return None
    parent, attribute = category.active_when
    return CATEGORIES[parent].selector, names_declaring(parent, attribute)


@dataclass
class Selection:
    """The components chosen by one design-space configuration, keyed by category."""

    components: dict[str, Component] = field(default_factory=dict)

    def build(self, category: str, config: dict[str, Any]) -> Any:
        return self.components[category].build(config)


def select(config: dict[str, Any]) -> Selection:
    """Resolve the selector values of a (validated) design-space configuration to components."""
    load_components()
    chosen = {}
    for cat in CATEGORIES.values():
        if cat.selector in config:
            chosen[cat.name] = get_component(cat.name, str(config[cat.selector]))
    return Selection(chosen)
