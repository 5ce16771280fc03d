"""One configuration under several names is one optimizer (metaopt.analysis.aliases)."""

from metaopt.analysis.aliases import kept, label_containing, names_of, same_configuration_labels
from metaopt.core.benchmarks import get_benchmark
from metaopt.spaces.presets import get_preset


def get_config(name):
    return get_preset(name).config(get_benchmark("synthetic:mlp").fidelity)


def test_names_of_one_configuration_share_a_label_in_the_study_order():
    hb, rs = get_config("hb"), get_config("rs")
    configs = {"hb_copy": dict(hb), "rs": rs, "hb": dict(hb), "smac_hpo": {"peer": "smac_hpo"}, "optuna": None}
    labels = same_configuration_labels(configs, order=["rs", "hb", "hb_copy", "smac_hpo"])
    assert labels == {"hb_copy": "hb = hb_copy", "hb": "hb = hb_copy", "rs": "rs", "smac_hpo": "smac_hpo",
                      "optuna": "optuna"}
    assert kept("hb", labels) and not kept("hb_copy", labels) and kept("rs", labels)
    assert names_of("hb = hb_copy") == ["hb", "hb_copy"] and names_of("rs") == ["rs"]
    assert label_containing(["rs", "hb = hb_copy"], "hb_copy") == "hb = hb_copy"
    assert label_containing(["rs"], "hb") is None


def test_peers_and_different_configurations_are_never_merged():
    configs = {"a": {"peer": "optuna_tpe"}, "b": {"peer": "optuna_tpe"}, "c": {}, "d": {},
               "hb": get_config("hb"), "hb3": {**get_config("hb"), "mu": 3}}
    assert all(label == name for name, label in same_configuration_labels(configs).items())


def test_one_configuration_on_the_clock_with_other_worker_counts_is_not_merged():
    """asha@w1 and asha@w8 share a configuration but are other runs: only equal worker counts merge."""
    from metaopt.analysis.aliases import run_identity

    config = {"fidelity_schedule": "asha", "mu": 1}
    labels = same_configuration_labels({"asha@w1": run_identity(config, 1), "asha@w8": run_identity(config, 8),
                                        "copy@w8": run_identity(config, 8), "plain": run_identity(config, None)})
    assert labels == {"asha@w1": "asha@w1", "asha@w8": "asha@w8 = copy@w8", "copy@w8": "asha@w8 = copy@w8",
                      "plain": "plain"}
