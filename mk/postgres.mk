# A real PostgreSQL for the results store's tests (docs/results-store.md). Needs root.
#   make postgres-deps   apt packages: postgresql (the server's binaries; no cluster is used)
# The tests start their own server on a temporary data folder and port (tests/postgres_server.py)
# and stop it after; `python -m tests.postgres_server` starts one by hand.
POSTGRES_TEST_PKGS := postgresql

_postgres_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: postgres-deps

postgres-deps:
	@$(call apt_install,postgres-deps,$(POSTGRES_TEST_PKGS))

.DEFAULT_GOAL := $(_postgres_mk_default_goal)
