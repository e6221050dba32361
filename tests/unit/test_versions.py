"""contract/versions.py: versions compared by their release numbers, the releases a point needs
(always, several ranks, fp16), the worker's check before its framework's import, what the
checkout tests (its pins), doctor's words, and docs/frameworks/README.md's table held to the
adapters."""
import pytest

from contract import versions
from contract.statuses import Unsupported
from frameworks import registry
from tests.runspecs import run_spec

JAX = registry.get("jax").releases
DOC = versions.ROOT + "/docs/frameworks/README.md"


@pytest.mark.parametrize("a,b,older", [
    ("0.4.38", "0.8.2", True), ("0.10.2", "0.8.2", False), ("2.11.0+cu130", "2.11", False),
    ("2.6.0a0+ecf3bae40a", "2.6.0", False),   # NGC's build of 2.6: a pre-release counts as its release
    ("2.15", "2.15.1", True), ("v3.0", "2.15.0", False), ("1.9.1", "1.9.1", False)])
def test_older_by_release_numbers(a, b, older):
    assert versions.older(a, b) is older


def test_a_version_without_numbers_is_refused():
    with pytest.raises(ValueError, match="not a version"):
        versions.parse("unknown")


def test_one_rank_of_jax_0_4_38_runs_several_are_unsupported_naming_both_versions():
    found = {"jax": "0.4.38", "jaxlib": "0.4.38", "flax": "0.10.2", "optax": "0.2.4"}
    assert versions.check(JAX, run_spec(), 1, found) == found
    with pytest.raises(Unsupported) as exc:
        versions.check(JAX, run_spec(), 2, found)
    assert str(exc.value).startswith("jax 0.4.38 is older than 0.8.2, the oldest this worker "
                                     "supports with several ranks (jax.lax.pcast")


def test_every_release_too_old_is_named_and_an_unknown_version_is_not_judged():
    found = {"jax": "0.4.30", "jaxlib": None, "flax": "0.8.0", "optax": "0.2.4"}
    bad = versions.gaps(JAX, found, {versions.ALWAYS})
    assert [line.split(",")[0] for line in bad] == ["jax 0.4.30 is older than 0.4.38",
                                                     "flax 0.8.0 is older than 0.10.2"]


def test_fp16_asks_keras_3_and_bf16_does_not():
    tf = registry.get("tensorflow").releases
    found = {"tensorflow": "2.15.1", "keras": "2.15.0"}
    assert versions.check(tf, run_spec(precision="amp", amp_dtype="bf16"), 1, found)
    with pytest.raises(Unsupported, match="keras 2.15.0 is older than 3.0, the oldest this worker "
                                          "supports with precision=amp amp_dtype=fp16"):
        versions.check(tf, run_spec(precision="amp", amp_dtype="fp16"), 1, found)


def test_torchtitans_releases_are_asked_only_on_its_path():
    torch = registry.get("pytorch").releases
    found = {"torch": "2.11.0", "torchtitan": "0.2.1"}
    assert versions.check(torch, run_spec(), 4, found) == found
    with pytest.raises(Unsupported, match="torchtitan 0.2.1 is older than 0.2.2"):
        versions.require(torch, {versions.ALWAYS, versions.TORCHTITAN}, found)
    found["torchtitan"] = "0.2.2"
    assert versions.require(torch, {versions.ALWAYS, versions.TORCHTITAN}, found) == found


def test_found_reads_the_installed_metadata_without_importing():
    """The suite's own environment: torch as pinned, whichever distribution name it has."""
    import sys
    assert versions.found(registry.get("pytorch").releases)["torch"].startswith("2.13.0")
    assert versions.found([versions.Release("no-such-package-here", "1", "x")]) == {"no-such-package-here": None}
    assert "tensorflow" not in sys.modules and "jax" not in sys.modules


def test_a_release_names_a_known_condition():
    with pytest.raises(ValueError, match="when='sometimes'"):
        versions.Release("jax", "0.1", "x", when="sometimes")


def test_the_checkout_tests_its_pins_and_the_older_releases():
    pinned = versions.pins()
    by = {r.package: versions.tested(r, pinned) for a in map(registry.get, registry.names())
          for r in a.releases}
    assert by["jax"] == ["0.4.38", "0.10.2"] and by["tensorflow"] == ["2.15.1", "2.21.0"]
    assert by["torch"] == ["2.11.0", "2.13.0"] and by["keras"] == ["2.15.0", "3.15.1"]
    assert by["paddle"] == ["3.3.1"]   # pinned as paddlepaddle


def test_doctors_words():
    pinned = versions.pins()
    jax, _, several, *_ = JAX
    assert versions.judge(jax, "0.10.2", pinned) == (False, "jax 0.10.2 (>= 0.4.38; tested 0.4.38, 0.10.2)")
    assert versions.judge(jax, "0.4.30", pinned)[0] is True
    refused, words = versions.judge(several, "0.4.38", pinned)
    assert not refused and words.startswith("jax 0.4.38 is older than 0.8.2, the oldest supported with "
                                            "several ranks")
    assert versions.judge(jax, "0.11.0", pinned)[1] == \
        "jax 0.11.0 (>= 0.4.38; newer than any tested: 0.4.38, 0.10.2)"


def test_every_older_release_tested_is_at_or_above_its_floor():
    """A floor above a release the checkout tests says that release is unsupported: the
    tests/versions envs stay at or above the floors they test (several ranks' aside)."""
    pinned = versions.pins()
    for name in registry.names():
        for r in registry.get(name).releases:
            if r.when == versions.ALWAYS:
                assert all(not versions.older(v, r.oldest) for v in versions.tested(r, pinned)), r


def test_the_page_lists_what_the_adapters_declare():
    page = open(DOC).read()
    table = versions.table([registry.get(n) for n in registry.names()])
    assert table in page, "docs/frameworks/README.md's table of supported versions is not " \
                          "contract.versions.table(): regenerate it"
