# The test image: Debian 12 with its own Python and torch==2.13.0 (CPU), one SquashFS file that
# Charliecloud runs on the Slurm test cluster (docs/containers.md). Needs root.
#   make image-deps    apt packages: charliecloud mmdebstrap squashfs-tools squashfuse fuse3
#   make image         builds it unless cached (a few minutes once; cached outside the clone,
#                      keyed by its recipe: tests/container_image/)
#   make -s image-path its path, e.g. for cluster.containers.pytorch=...
PYTHON ?= .venv/bin/python
IMAGE_PKGS := charliecloud mmdebstrap squashfs-tools squashfuse fuse3

_image_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: image image-deps image-path

image-deps:
	@missing=""; for p in $(IMAGE_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "image-deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "image-deps: $(IMAGE_PKGS) already installed"; fi

image: image-deps venv
	$(PYTHON) -m tests.container_image build

image-path:
	@$(PYTHON) -m tests.container_image path

.DEFAULT_GOAL := $(_image_mk_default_goal)
