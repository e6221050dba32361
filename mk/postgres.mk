# A real PostgreSQL for the results store's tests (docs/results-store.md). Needs root.
#   make postgres-deps   apt packages: postgresql (the server's binaries; no cluster is used)
# The tests start their own server on a temporary data folder and port (tests/postgres_server.py)
# and stop it after; `python -m tests.postgres_server` starts one by hand.
POSTGRES_TEST_PKGS := postgresql

_postgres_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: postgres-deps

postgres-deps:
	@missing=""; for p in $(POSTGRES_TEST_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "postgres-deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "postgres-deps: $(POSTGRES_TEST_PKGS) already installed"; fi

.DEFAULT_GOAL := $(_postgres_mk_default_goal)
