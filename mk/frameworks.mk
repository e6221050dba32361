# One virtual environment per framework, from pinned requirements, because their
# numpy and protobuf needs conflict:  make env-tensorflow  ->  .venvs/tensorflow
# frameworks/<name>/requirements.txt pins the packages; frameworks/<name>/python-version
# names the pyenv Python it needs (default: this machine's python3).
FRAMEWORK_ENVS := $(patsubst frameworks/%/requirements.txt,%,$(wildcard frameworks/*/requirements.txt))
PYENV_ROOT ?= $(HOME)/.pyenv

.PHONY: envs $(addprefix env-,$(FRAMEWORK_ENVS))
envs: $(addprefix env-,$(FRAMEWORK_ENVS))

$(addprefix env-,$(FRAMEWORK_ENVS)): env-%: .venvs/%/.installed

# $(call build_env,FOLDER): .venvs/$* from FOLDER/requirements.txt, built once per content in a
# cache outside the checkout and linked (mk/build_env.sh); mk/versions.mk builds its environments
# the same way
build_env = @PYENV_ROOT=$(PYENV_ROOT) mk/build_env.sh $* $(1)

.venvs/%/.installed: frameworks/%/requirements.txt $$(wildcard frameworks/$$*/requirements-nodeps.txt) mk/build_env.sh
	$(call build_env,frameworks/$*)
