# The test image: Debian 12 with its own Python and torch==2.13.0 (CPU), one SquashFS file that
# Charliecloud runs on the Slurm test cluster (docs/containers.md). Needs root.
#   make image-deps    apt packages: charliecloud mmdebstrap squashfs-tools squashfuse fuse3
#   make image         builds it unless cached (a few minutes once; cached outside the clone,
#                      its tree keyed by its recipe, the file by the checkout's path too:
#                      tests/container_image/)
#   make -s image-path its path, e.g. for cluster.containers.pytorch=...
PYTHON ?= .venv/bin/python
IMAGE_PKGS := charliecloud mmdebstrap squashfs-tools squashfuse fuse3

_image_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: image image-deps image-path

image-deps:
	@$(call apt_install,image-deps,$(IMAGE_PKGS))

image: image-deps venv
	$(PYTHON) -m tests.container_image build

image-path:
	@$(PYTHON) -m tests.container_image path

.DEFAULT_GOAL := $(_image_mk_default_goal)
