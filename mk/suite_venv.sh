#!/usr/bin/env bash
# mk/suite_venv.sh: the suite's own environment, .venv, in seconds where an earlier clone built it.
# Its packages (requirements.txt, then requirements-torchtitan.txt without their own requirements)
# are built once per content by mk/build_env.sh and linked as .venv/deps; .venv itself is a small
# venv of this checkout that sees them through a .pth line and holds what no other clone can
# share: the checkout's editable install (`pip install -e .`, console scripts included).
set -euo pipefail
rm -rf .venv
python3 -m venv --without-pip .venv
LINK=.venv/deps mk/build_env.sh suite . requirements-torchtitan.txt
purelib='import sysconfig; print(sysconfig.get_path("purelib"))'
here=$(.venv/bin/python -c "$purelib")
deps=$(.venv/deps/bin/python -c "$purelib")
# a relative line, through the link: a rebuilt cache entry needs only the link renewed
python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$deps" "$here" > "$here/dlbench-deps.pth"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
