# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo   create/reuse .venv, install, run the quickstart study
#   make test   create/reuse .venv, install, run the static checks (make check) and the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.metaopt-installed
YAHPO_GYM := yahpo-gym==1.0.2
# syne-tune declares xgboost (and its CUDA libraries), which only its BORE and transfer-learning
# searchers import: it is installed without its dependencies, and the extra 'syne' has what the
# peers syne_asha and syne_bohb use (metaopt/engine/syne_peers.py).
SYNE_TUNE := syne-tune==0.16.0

.PHONY: demo test check install constraints clean

install: $(STAMP)

# yahpo-gym 1.0.2 pins ConfigSpace<=0.6.1 and numpy<2, which SMAC 2.4 cannot use. Its pins are
# stale, not real requirements: it is installed without its dependencies (which are ours too) and
# metaopt/core/benchmarks/yahpo.py supplies the one ConfigSpace method it calls that 1.x removed.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,peers,syne]'
	$(BIN)/python -m pip install --quiet -c constraints.txt --no-deps $(YAHPO_GYM) $(SYNE_TUNE)
	touch $(STAMP)

demo: install
	$(BIN)/metaopt study run studies/quickstart.yaml --workers 2

# Two test processes (pytest-xdist), one per core of the CI machine; every test is independent of
# the others and of the order they run in.
test: check
	$(BIN)/python -m pytest -n 2

# Static checks (configured in pyproject.toml): ruff, then mypy on the package. mypy cannot follow
# the package-dir mapping (components/ installed as metaopt.components, ...), so it reads the
# package from a tree of links that puts each folder where it is installed.
TYPECHECK := $(VENV)/typecheck
check: install
	$(BIN)/ruff check .
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/metaopt
	ln -s $(CURDIR)/metaopt/* $(TYPECHECK)/metaopt/
	for folder in components spaces analysis bench; do ln -s $(CURDIR)/$$folder $(TYPECHECK)/metaopt/$$folder; done
	cd $(TYPECHECK) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p metaopt

# Refresh the pinned versions after changing dependencies in pyproject.toml.
constraints: install
	{ echo "# Exact versions of the tested environment (regenerate: make constraints). Used by 'make install'."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^metaopt'; } > constraints.txt

clean:
	rm -rf $(VENV) results
