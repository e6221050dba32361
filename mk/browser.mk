# A real headless browser for the HTML report's test (Debian's chromium). Needs root.
#   make browser-deps   apt package chromium, only when /usr/bin/chromium is missing
_browser_mk_default_goal := $(.DEFAULT_GOAL)

.PHONY: browser-deps
browser-deps:
	@if command -v chromium >/dev/null 2>&1; then echo "browser-deps: chromium already installed"; \
	 else echo "browser-deps: installing chromium"; \
	   apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

.DEFAULT_GOAL := $(_browser_mk_default_goal)
