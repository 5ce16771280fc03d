"""The component registry: building blocks registered under (category, name).

Each component declares its own hyperparameters as a list of ConfigSpace hyperparameters (a
fragment of the design space). The design space (``spaces.design_space``) is assembled from this
registry, so registering a component adds it, with its hyperparameters and their conditions, to
the space. A hyperparameter declared identically by several components of one category (e.g.
``eta_fid`` by every multi-fidelity schedule) is shared: it is active when any of them is chosen.

Components register themselves when their module in ``components/`` is imported;
:func:`load_components` imports them all.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ConfigSpace.hyperparameters import Hyperparameter

from metaopt.errors import UsageError


@dataclass(frozen=True)
class Category:
    """A kind of building block and the design-space parameter that selects among its components.

    ``active_when`` makes the whole category conditional: its selector exists only when another
    selector takes one of the given values (e.g. promotion rules only with multi-fidelity schedules).
    One parent only: ConfigSpace 1.2 samples OR-conditions whose parents sit at different depths
    wrongly (it decides them at the shallowest parent; automl/ConfigSpace#430), so the design space
    has none.
    """

    name: str
    selector: str
    description: str
    default: str
    active_when: tuple[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class Component:
    """A registered building block: its factory and its own hyperparameters."""

    category: str
    name: str
    factory: Callable[..., Any]
    hyperparameters: tuple[Hyperparameter, ...] = ()
    description: str = ""

    @property
    def hyperparameter_names(self) -> list[str]:
        return [hp.name for hp in self.hyperparameters]

    def build(self, config: dict[str, Any]) -> Any:
        """Instantiate with this component's hyperparameters taken from a design-space configuration."""
        kwargs = {name: config[name] for name in self.hyperparameter_names if name in config}
        return self.factory(**kwargs)


# The categories of the project card, in the order the design space and `metaopt components` show
# them. Later components extend the categories' component lists, not this table.
SURROGATE_FILTERS = ("tournament", "progressive")
MULTI_FIDELITY = ("equal", "sh", "hb", "cahb")
PENALIZED = ("eipu", "ei_alpha", "ei_cool", "cei")

CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in [
        Category("fidelity_schedules", "fidelity_schedule",
                 "how batches move through fidelity stages (Smashy Alg. 2: equal / SH / HB batches; CAHB)", "single"),
        Category("proposals", "proposal",
                 "how new configurations are proposed: sample-and-filter (Smashy) or CFO local search", "sample_filter"),
        Category("samplers", "sampler", "the generating distribution new configurations are drawn from", "uniform",
                 active_when=("proposal", ("sample_filter",))),
        Category("filters", "filter_method", "how sampled candidates are filtered by a surrogate (Smashy Alg. 3/4)",
                 "none", active_when=("proposal", ("sample_filter",))),
        Category("surrogates", "surrogate", "the model that predicts losses of candidates (fidelity is a feature)",
                 "knn1", active_when=("filter_method", SURROGATE_FILTERS)),
        Category("acquisitions", "acquisition", "what the filter ranks candidates by, computed from the surrogate",
                 "mean", active_when=("filter_method", SURROGATE_FILTERS)),
        Category("cost_penalties", "cost_penalty", "how expected improvement is traded against predicted cost "
                 "(paper 003: EIpu, EI-alpha, EI-cool, CEI)", "none", active_when=("acquisition", ("ei",))),
        Category("promotion_rules", "promotion", "which configurations of a batch survive to the next stage", "top",
                 active_when=("fidelity_schedule", MULTI_FIDELITY)),
        Category("cost_models", "cost_model", "the model that predicts the cost of candidates for a cost penalty "
                 "(cost-aware promotion and CAHB use it too when chosen, else the log-linear model)",
                 "loglinear", active_when=("cost_penalty", PENALIZED)),
        Category("stopping_rules", "stopping", "when a run ends besides its budget", "budget"),
    ]
}

_REGISTRY: dict[tuple[str, str], Component] = {}

# Modules whose import registers components. Appending a module here adds its components.
COMPONENT_MODULES = (
    "metaopt.components.fidelity_schedules",
    "metaopt.components.proposals",
    "metaopt.components.local_search",
    "metaopt.components.samplers",
    "metaopt.components.surrogates",
    "metaopt.components.acquisition",
    "metaopt.components.cost_penalties",
    "metaopt.components.cost_models",
    "metaopt.components.filters",
    "metaopt.components.promotion",
    "metaopt.components.stopping",
)


def register(
    category: str,
    name: str,
    hyperparameters: Sequence[Hyperparameter] = (),
    description: str = "",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Class/function decorator registering a component under (category, name)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; known: {', '.join(CATEGORIES)}")

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        key = (category, name)
        component = Component(category, name, factory, tuple(hyperparameters),
                              description or (factory.__doc__ or "").strip().split("\n")[0])
        if key in _REGISTRY and _REGISTRY[key].factory is not factory:
            raise ValueError(f"component {category}/{name} is registered twice")
        _REGISTRY[key] = component
        return factory

    return decorate


def load_components() -> None:
    """Import every component module so that all components are registered."""
    for module in COMPONENT_MODULES:
        importlib.import_module(module)


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
    load_components()
    return [comp for (c, _), comp in _REGISTRY.items() if c == category]


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
