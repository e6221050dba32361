# One virtual environment per framework, from pinned requirements, because their
# numpy and protobuf needs conflict:  make env-tensorflow  ->  .venvs/tensorflow
# frameworks/<name>/requirements.txt pins the packages; frameworks/<name>/python-version
# names the pyenv Python it needs (default: this machine's python3).
FRAMEWORK_ENVS := $(patsubst frameworks/%/requirements.txt,%,$(wildcard frameworks/*/requirements.txt))
PYENV_ROOT ?= $(HOME)/.pyenv

.PHONY: envs $(addprefix env-,$(FRAMEWORK_ENVS))
envs: $(addprefix env-,$(FRAMEWORK_ENVS))

$(addprefix env-,$(FRAMEWORK_ENVS)): env-%: .venvs/%/.installed

# $(call build_env,FOLDER): .venvs/$* from FOLDER/requirements.txt, in FOLDER/python-version's
# pyenv Python where it names one (mk/versions.mk builds its environments the same way)
define build_env
	@v=$$(cat $(1)/python-version 2>/dev/null); \
	 py=$${v:+$(PYENV_ROOT)/versions/$$v/bin/python}; py=$${py:-python3}; \
	 echo "building .venvs/$* with $$py"; \
	 rm -rf .venvs/$* && $$py -m venv .venvs/$* && \
	 .venvs/$*/bin/pip install -q --disable-pip-version-check -r $(1)/requirements.txt && \
	 touch $@
endef

.venvs/%/.installed: frameworks/%/requirements.txt
	$(call build_env,frameworks/$*)
