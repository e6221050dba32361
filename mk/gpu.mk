# make gpu-wheels            the suite's pure-Python needs as CPython 3.12 wheels in .whl/, for
#                            the lent GPU machine (python3, torch 2.11, no network)
# make gpu-check             every GPU path once, bounded, one table and one tarball
#                            (benchmarks/gpu_check/; ../shared/notes/gpu-check.md)
# make gpu-check DEVICE=cpu  the same stages at tiny sizes on this CPU (CI runs it:
#                            tests/integration/test_gpu_check.py)
DEVICE ?= cuda
GPU_CHECK_PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
GPU_CHECK_ARGS ?=
GPU_WHEELS_PYTHON ?= 3.12     # the lent machine's; GPU_WHEELS_DIR another folder for another Python
GPU_WHEELS_DIR ?= .whl
WHEEL_ABI = cp$(subst .,,$(strip $(GPU_WHEELS_PYTHON)))
WHEEL_PLATFORMS = --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64

.PHONY: gpu-check gpu-wheels
gpu-check:
	$(GPU_CHECK_PYTHON) -m benchmarks.gpu_check --device $(DEVICE) $(GPU_CHECK_ARGS)

gpu-wheels: $(GPU_WHEELS_DIR)/.done
$(GPU_WHEELS_DIR)/.done: benchmarks/gpu_check/wheels.txt
	$(PYTHON) -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
	    --python-version $(strip $(GPU_WHEELS_PYTHON)) --implementation cp --abi $(WHEEL_ABI) --abi abi3 \
	    --abi none $(WHEEL_PLATFORMS) -d $(GPU_WHEELS_DIR) -r benchmarks/gpu_check/wheels.txt
	$(PYTHON) -m pip wheel -q --disable-pip-version-check --no-deps -w $(GPU_WHEELS_DIR) antlr4-python3-runtime==4.9.3
	@du -sh $(GPU_WHEELS_DIR)
	touch $@
