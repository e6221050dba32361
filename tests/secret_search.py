"""Every byte a test can reach, searched for secret values: files and folders (hidden ones and
submitit's pickles included), a `.tar.zst` archive decompressed, a SQLite store with its
journal beside it, or text (a pg_dump, sacct's output). The issue's "grep of the whole tree",
kept as a test (contract/secrets.py: a secret is never written)."""
import os

import zstandard

# Secrets the tests set, by kind; none may be found anywhere they write.
HF_TOKEN = "hf_TestToken7Qx2LmZp9Vb4Kd"
WANDB_API_KEY = "wandbKey-5f3e9a1c7b2d"
LICENSE = "lic-ACME-88231-secret"            # under the site's own key (cluster.secret_keys)
PASSWORD = "S3cret-store-PW"                  # in store.url
ENV = {"HF_TOKEN": HF_TOKEN, "WANDB_API_KEY": WANDB_API_KEY, "ACME_LICENSE": LICENSE}
VALUES = (HF_TOKEN, WANDB_API_KEY, LICENSE, PASSWORD)


def overrides(store_url: str) -> list:
    """A launch's overrides that give every kind: tokens in cluster.env, the site's key, a
    password in store.url (`{password}` in `store_url`)."""
    return ["++cluster.secret_keys=[license]", f"++cluster.store.url={store_url.format(password=PASSWORD)}",
            *(f"+cluster.env.{k}={v}" for k, v in ENV.items())]


def rank_check(folder, python: str) -> str:
    """An interpreter for framework.python that runs `python` only where the rank's
    environment holds every value of ENV (compared by sha256: the values are not in it), and
    else exits 3 saying which is missing: the ranks prove they received them."""
    import hashlib
    checks = "".join(
        f'[ "$(printf %s "${k}" | sha256sum | cut -c1-64)" = "{hashlib.sha256(v.encode()).hexdigest()}" ]'
        f' || {{ echo "{k} did not reach the rank" >&2; exit 3; }}\n' for k, v in ENV.items())
    path = os.path.join(str(folder), "rank-with-secrets")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\n{checks}exec {python} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def _bytes_of(path: str):
    """(name, bytes) of a file, or of every file under a folder; an archive decompressed."""
    if os.path.isdir(path):
        for folder, _, names in os.walk(path):
            for n in names:
                yield from _bytes_of(os.path.join(folder, n))
        return
    if os.path.islink(path) or not os.path.isfile(path):
        return
    with open(path, "rb") as f:
        data = f.read()
    yield path, data
    if path.endswith(".tar.zst"):
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        yield path + " (decompressed)", reader.read()


def found(paths=(), texts=(), values=VALUES) -> list:
    """[(where, value)] of every value found in `paths` (files, folders, archives, a SQLite
    store and its journal; each must exist) and `texts` (a pg_dump, sacct's output)."""
    items = [(f"text {i}", t.encode()) for i, t in enumerate(texts)]
    for path in map(str, paths):
        assert os.path.exists(path), f"nothing to search at {path}"
        items += list(_bytes_of(path))
        items += [item for side in ("-journal", "-wal") if os.path.exists(path + side)
                  for item in _bytes_of(path + side)]
    return [(where, v) for where, data in items for v in values if v.encode() in data]
