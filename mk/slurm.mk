# A real multi-node Slurm cluster on this machine, for integration tests
# (docs/slurm-test-cluster.md). Needs root.
#   make slurm-deps     apt packages: slurm-wlm munge slurmdbd mariadb-server
#   make slurm-up       3 nodes x 2 fake GPUs; reuses one already up
#   make slurm-status   sinfo of the running cluster (exit 3 when down)
#   make slurm-down     stops it; leaves no process, namespace, bridge or mount
# then in a shell:  eval "$(.venv/bin/python -m tests.slurm_cluster env)"
PYTHON ?= .venv/bin/python
SLURM_TEST_NODES ?= 3
SLURM_TEST_GPUS_PER_NODE ?= 2
SLURM_TEST_DIR ?= $(or $(DLBENCH_SLURM_DIR),/tmp/dlbench-slurm)
SLURM_TEST_PKGS := slurm-wlm munge slurmdbd mariadb-server

# Included files must not choose the main Makefile's default goal.
_slurm_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: slurm-deps slurm-up slurm-down slurm-status

# apt only when a package is missing, so this is quick once installed.
slurm-deps:
	@$(call apt_install,slurm-deps,$(SLURM_TEST_PKGS))

slurm-up:
	$(PYTHON) -m tests.slurm_cluster up --dir $(SLURM_TEST_DIR) \
	  --nodes $(SLURM_TEST_NODES) --gpus-per-node $(SLURM_TEST_GPUS_PER_NODE)

slurm-down:
	$(PYTHON) -m tests.slurm_cluster down --dir $(SLURM_TEST_DIR)

slurm-status:
	$(PYTHON) -m tests.slurm_cluster status --dir $(SLURM_TEST_DIR)

.DEFAULT_GOAL := $(_slurm_mk_default_goal)
