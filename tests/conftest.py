"""Shared fixtures. Tests that need the YAHPO data fail (never skip) when it is missing."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# `make test` runs two test processes on the two cores; a library that starts a thread per core
# (OpenMP in scikit-learn's histogram boosting, tuned by examples/tune_sklearn.py) would then put
# four busy-waiting threads on two cores. One thread each (results never depend on threading).
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def yahpo_data() -> Path:
    path = Path(os.environ.get("METAOPT_YAHPO_DATA", REPO.parent / "shared" / "yahpo_data")).resolve()
    if not (path / "lcbench").is_dir():
        pytest.fail(f"YAHPO data not found at {path}: set METAOPT_YAHPO_DATA (CI points it at ../shared/yahpo_data)")
    return path


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Regret references are cached in a per-session folder, not in the user's ~/.cache."""
    os.environ["METAOPT_CACHE_DIR"] = str(tmp_path_factory.mktemp("metaopt-cache"))
