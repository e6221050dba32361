#!/usr/bin/env bash
# mk/build_env.sh NAME FOLDER [NODEPS]: .venvs/NAME (or $LINK), from FOLDER/requirements.txt in
# FOLDER/python-version's pyenv Python where it names one (else python3), then NODEPS (default
# FOLDER/requirements-nodeps.txt) where there is one, installed without its packages' own
# requirements (pinned beside them instead). Built once per content (the requirements, the
# Python's version, this recipe's) in a cache outside the checkout, and linked: a fresh clone links
# in a moment what an earlier clone built, and a changed requirements file builds anew.
# The suite's own .venv links its packages' build the same way (mk/suite_venv.sh).
# The cache: $DLBENCH_ENV_CACHE, else /var/cache/dlbench/venvs as root, else the user's cache.
# The two newest builds of each name are kept (worktrees on other branches may use the older).
set -euo pipefail
name=$1 folder=$2 nodeps=${3:-$2/requirements-nodeps.txt} link=${LINK:-.venvs/$1}
recipe=1   # raise when what this script installs changes
v=$(cat "$folder/python-version" 2>/dev/null || true)
py=python3
[ -z "$v" ] || py=${PYENV_ROOT:-$HOME/.pyenv}/versions/$v/bin/python
if [ -n "${DLBENCH_ENV_CACHE:-}" ]; then cache=$DLBENCH_ENV_CACHE
elif [ "$(id -u)" = 0 ]; then cache=/var/cache/dlbench/venvs
else cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlbench/venvs; fi
key=$( { echo "recipe $recipe"; "$py" -c 'import sys; print(sys.version)'; cat "$folder/requirements.txt"; cat "$nodeps" 2>/dev/null || true; } \
       | sha256sum | cut -c1-16)
dest=$cache/$name-$key
mkdir -p "$cache" "$(dirname "$link")"
exec 9>"$dest.lock"
flock 9   # another clone building the same environment: wait for it
if [ -f "$dest/.installed" ]; then
  echo "$link: cached, $dest"
else
  echo "building $link with $py in $dest"
  rm -rf "$dest"
  "$py" -m venv "$dest"
  "$dest/bin/pip" install -q --disable-pip-version-check -r "$folder/requirements.txt"
  if [ -f "$nodeps" ]; then
    "$dest/bin/pip" install -q --disable-pip-version-check --no-deps -r "$nodeps"
  fi
  touch "$dest/.installed"
  hex=$(printf '[0-9a-f]%.0s' $(seq 16))   # this name's keys only: jax's are not jax-0.4.38's
  for old in $(ls -dt "$cache/$name"-$hex/ 2>/dev/null | tail -n +3); do
    old=${old%/}
    ( flock -n 8 && rm -rf "$old" ) 8>"$old.lock" && rm -f "$old.lock" || true
  done
fi
[ -L "$link" ] || rm -rf "$link"   # a folder an older recipe built in place
ln -sfn "$dest" "$link"
