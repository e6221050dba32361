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
# the packages' real path, not the link's: torch's own path is then the same in every clone, and
# so are the compile commands inductor keys its C++ kernels on (/tmp/torchinductor_$USER), which
# a clone's path in them made every fresh clone compile again (a compiled ResNet-50 smoke point:
# 36-64 s of CPU cold, 7 s warm; docs/development.md)
deps=$(realpath "$(.venv/deps/bin/python -c "$purelib")")
echo "$deps" > "$here/dlbench-deps.pth"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
