# make demo   one real smoke sweep on this machine's CPU, then its report
# make test   everything the tests need, the checks (make lint), then the tests
# make lint   ruff and mypy over the code outside tests/ (docs/development.md)
PYTHON  ?= .venv/bin/python
DEMO_DIR ?= outputs/demo-$(shell date +%Y%m%d-%H%M%S)

.PHONY: venv demo test test-deps lint unit clean deps-gone
# .venv: this checkout's editable install over packages built once per content (mk/suite_venv.sh);
# rebuilt too when the build it links has been pruned from the cache
venv: .venv/.installed
.venv/.installed: requirements.txt requirements-torchtitan.txt setup.cfg pyproject.toml mk/suite_venv.sh \
                  mk/build_env.sh $(if $(wildcard .venv/deps/.installed),,deps-gone)
	@mk/suite_venv.sh
	touch $@

demo: venv
	$(PYTHON) -m launch -m model=resnet50,bert_base precision=fp32,amp gpus_per_node=1,2 \
	    preset=smoke launcher=local hydra.sweep.dir=$(DEMO_DIR)
	$(PYTHON) -m analysis report $(DEMO_DIR)

# Framework environments, the Slurm packages and the test image's tools (mk/image.mk) are part
# of what the tests need; the Slurm cluster itself is started and stopped by the tests' own
# fixture, and the test image is built (unless cached) by theirs, beside the other tests.
# The framework envs and the older releases' (mk/versions.mk) build three at a time: a cold
# build is mostly downloads.
test-deps: venv
	@$(MAKE) --no-print-directory -j 3 envs version-envs
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory slurm-deps browser-deps postgres-deps image-deps; \
	 else echo "not root: Slurm, browser, PostgreSQL and container tests will skip"; fi

# its own wall time last, the environments' build included (CI's limit is on the whole); the
# checks run beside the environments' build.
# WORKERS: one per core for the tests (tests/conftest.py's CPU slots), one for the Slurm test
# cluster's, which mostly wait.
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test:
	@start=$$(date +%s); rc=0; \
	 $(MAKE) --no-print-directory -j 2 test-deps lint && $(PYTHON) -m pytest -q -n $(WORKERS) --dist loadscope || rc=$$?; \
	 echo "make test: $$(( $$(date +%s) - start )) s in all, exit $$rc"; exit $$rc

# mypy's incremental cache lives beside the environments' (clones share it as CI keeps a
# cache between runs; an entry is reused only when its file's size and hash match): a fresh
# clone's mypy takes 1 s instead of 18 s of CPU. MYPY_CACHE_DIR=.mypy_cache keeps it in the clone.
CACHE_ROOT ?= $(if $(filter 0,$(shell id -u)),/var/cache/dlbench,$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/dlbench)
MYPY_CACHE_DIR ?= $(CACHE_ROOT)/mypy
lint: venv
	$(PYTHON) -m ruff check .
	MYPY_CACHE_DIR=$(MYPY_CACHE_DIR) $(PYTHON) -m mypy

unit: venv
	$(PYTHON) -m pytest -q -n 2 --dist loadscope tests/unit

clean:
	rm -rf outputs multirun .pytest_cache .mypy_cache .ruff_cache

# mk/frameworks.mk and mk/versions.mk name an optional prerequisite per environment
.SECONDEXPANSION:
include $(wildcard mk/*.mk)
