"""The secret rule (contract/secrets.py) against cases written by hand: which keys name a
secret, a URL with and without its password, text, a nested config, the site's own keys."""
import glob
import json

import pytest
import yaml

from contract import records, secrets
from launchers.suite import ROOT

SECRET_KEYS = ["HF_TOKEN", "token", "MY_SECRET", "db.password", "PASSWD", "WANDB_API_KEY",
               "api-key", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "ssh_private_key",
               "credential", "GOOGLE_APPLICATION_CREDENTIALS", "auth", "X-Auth", "cookie",
               "session_cookie", "hfToken", "ApiKey", "PGPASSWORD"]
PLAIN_KEYS = ["AUTHOR", "author_name", "tokens_per_s", "masked_tokens", "KEY", "MONKEY",
              "keyboard", "key", "NCCL_IB_HCA", "mask_prob", "PWD", "PASSWORDS", "APIKEY",
              "secret_keys", "authorization_url", "url", "access"]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_keys_that_name_a_secret(key):
    assert secrets.is_secret_key(key)


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_that_do_not(key):
    assert not secrets.is_secret_key(key)


def test_the_sites_own_keys_are_runs_of_whole_words():
    extra = ["license", "site-pin"]
    assert secrets.is_secret_key("LM_LICENSE_KEY", extra) and secrets.is_secret_key("license", extra)
    assert secrets.is_secret_key("SITE_PIN", extra) and secrets.is_secret_key("my.site.pin", extra)
    assert not secrets.is_secret_key("LICENSED", extra) and not secrets.is_secret_key("PIN", extra)
    assert not secrets.is_secret_key("LM_LICENSE_KEY")


@pytest.mark.parametrize("text,masked", [
    ("postgresql+psycopg://bench:S3cret@db.example.org:5432/dlbench",
     "postgresql+psycopg://bench:***@db.example.org:5432/dlbench"),
    ("postgresql+psycopg://bench@db.example.org/dlbench",            # no password: as it is
     "postgresql+psycopg://bench@db.example.org/dlbench"),
    ("https://host:8443/path@v2", "https://host:8443/path@v2"),         # a port, no password
    ("https://user:p%40ss@host/x", "https://user:***@host/x"),
    ("cluster.store.url=postgresql+psycopg\\://bench\\:S3cret@h\\:1/db",  # Hydra's escaped form
     "cluster.store.url=postgresql+psycopg\\://bench\\:***@h\\:1/db"),
    ("see s3://a:b@bucket/key and https://u:v@w/", "see s3://a:***@bucket/key and https://u:***@w/"),
])
def test_a_urls_password(text, masked):
    assert secrets.mask_url(text) == masked


@pytest.mark.parametrize("text,masked", [
    ("+cluster.env.HF_TOKEN=hf_abcdef", "+cluster.env.HF_TOKEN=***"),
    ("+cluster.env.HF_TOKEN=a,b", "+cluster.env.HF_TOKEN=***"),               # a sweep's values
    ("+cluster.env.HF_TOKEN=hf_x,gpus_per_node=1,model=bert_base",            # override_dirname
     "+cluster.env.HF_TOKEN=***,gpus_per_node=1,model=bert_base"),
    ("export WANDB_API_KEY=abc123 && run", "export WANDB_API_KEY=*** && run"),
    ("https://h/p?x=1&password=abc&y=2", "https://h/p?x=1&password=***&y=2"),
    ('{"HF_TOKEN": "abc", "b": 1}', '{"HF_TOKEN": "***", "b": 1}'),
    ("    HF_TOKEN: hf_abc", "    HF_TOKEN: ***"),
    ("token=abc, and more", "token=***, and more"),
    ("author=Ada Lovelace, epochs=3", "author=Ada Lovelace, epochs=3"),
    ("nothing here", "nothing here"),
])
def test_text(text, masked):
    assert secrets.mask_text(text) == masked


def test_known_values_are_masked_in_any_text_when_long_enough():
    assert secrets.mask_text("401 for hf_abcdef0123 at x", values=["hf_abcdef0123"]) == "401 for *** at x"
    assert secrets.mask_text("a 1 in text", values=["1"]) == "a 1 in text"   # shorter than MIN_KNOWN


CONFIG = {
    "model": {"name": "bert_base", "mask_prob": 0.15, "tokens_per_s": 3},
    "cluster": {"env": {"HF_TOKEN": "hf_abc", "NCCL_DEBUG": "WARN", "LM_LICENSE_KEY": "L-1",
                        "DATABASE_URL": "postgres://u:pw@h/db", "EMPTY_TOKEN": "",
                        "FROM_ENV_TOKEN": "${oc.env:HF_TOKEN}"},
                "secret_keys": ["license"],
                "store": {"url": "postgresql+psycopg://bench:S3cret@db/dlbench"},
                "credentials": {"user": "u", "key": 42, "enabled": True, "none": None}},
    "overrides": ["model=bert_base", "+cluster.env.HF_TOKEN=hf_abc"],
}


def test_a_nested_config_masked_and_each_masked_field_named():
    masked, where = secrets.changes(CONFIG)
    env = masked["cluster"]["env"]
    assert env == {"HF_TOKEN": "***", "NCCL_DEBUG": "WARN", "LM_LICENSE_KEY": "***",   # the site's key
                   "DATABASE_URL": "postgres://u:***@h/db", "EMPTY_TOKEN": "",
                   "FROM_ENV_TOKEN": "${oc.env:HF_TOKEN}"}          # says where, not what
    assert masked["cluster"]["store"]["url"] == "postgresql+psycopg://bench:***@db/dlbench"
    assert masked["cluster"]["credentials"] == {"user": "***", "key": "***", "enabled": True, "none": None}
    assert masked["cluster"]["secret_keys"] == ["license"] and masked["model"] == CONFIG["model"]
    assert masked["overrides"] == ["model=bert_base", "+cluster.env.HF_TOKEN=***"]
    assert sorted(where) == ["cluster.credentials.key", "cluster.credentials.user",
                             "cluster.env.DATABASE_URL", "cluster.env.HF_TOKEN",
                             "cluster.env.LM_LICENSE_KEY", "cluster.store.url", "overrides.1"]
    assert CONFIG["cluster"]["env"]["HF_TOKEN"] == "hf_abc"                 # a copy: the input stays
    assert secrets.changes(masked) == (masked, [])                          # masking twice: nothing more


def test_the_values_a_config_gives_away():
    assert secrets.found(CONFIG) == {"hf_abc", "L-1", "pw", "S3cret", "u", "42"}


def test_the_process_environments_secrets_by_name():
    env = {"HF_TOKEN": "hf_0123456789", "SHORT_TOKEN": "abc", "HOME": "/root", "PGPASSWORD": "pg-pass-1"}
    assert sorted(secrets.environ_values(env)) == ["hf_0123456789", "pg-pass-1"]


def test_every_json_record_of_the_suite_is_written_masked(tmp_path, monkeypatch):
    """records.write_json_atomic: point.json, spec.json, rank records, run.json, step.json."""
    monkeypatch.setenv("HF_TOKEN", "hf_fromTheEnvironment")
    path = tmp_path / "rank-00000.json"
    records.write_json_atomic(path, {"spec": {"config": CONFIG},
                                     "error": "HTTPError: 401 for token hf_fromTheEnvironment"})
    text = path.read_text()
    assert "hf_abc" not in text and "S3cret" not in text and "L-1" not in text
    assert json.loads(text)["error"] == "HTTPError: 401 for token ***"


def test_the_suites_own_configuration_names_no_secret():
    """A model's, bench's or framework's key that the rule calls a secret would reach the ranks
    as *** (spec.json is written masked): a key such as `pad_token` needs another name."""
    def keys(node, path=()):
        if isinstance(node, dict):
            for k, v in node.items():
                yield path + (str(k),)
                yield from keys(v, path + (str(k),))
    named = [(f, ".".join(k)) for f in glob.glob(str(ROOT / "conf" / "**" / "*.yaml"), recursive=True)
             for k in keys(yaml.safe_load(open(f)) or {}) if secrets.is_secret_key(k[-1])]
    assert named == []
