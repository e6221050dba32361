# Environments of older framework releases, for the supported-versions tests
# (tests/integration/test_versions.py; docs/frameworks/README.md, "Supported versions"):
#   make env-jax-0.4.38  ->  .venvs/jax-0.4.38, from tests/versions/jax-0.4.38/requirements.txt
# (and tests/versions/<name>/python-version, where one names a pyenv Python), built the way
# mk/frameworks.mk builds a framework's. `make test-deps` builds them with the frameworks'.
VERSION_ENVS := $(patsubst tests/versions/%/requirements.txt,%,$(wildcard tests/versions/*/requirements.txt))

.PHONY: version-envs $(addprefix env-,$(VERSION_ENVS))
version-envs: $(addprefix env-,$(VERSION_ENVS))

$(addprefix env-,$(VERSION_ENVS)): env-%: .venvs/%/.installed

.venvs/%/.installed: tests/versions/%/requirements.txt $$(wildcard tests/versions/$$*/requirements-nodeps.txt) mk/build_env.sh
	$(call build_env,tests/versions/$*)
