"""A certification's suite file (certify/suite.py): each mistake is one line naming where it
is; the shipped suites read clean, name a published row or say why not, and every point of
theirs is made and checked by the planner (certify/run.py, nothing run)."""
import textwrap

import pytest
import yaml

from certify import baselines, judge, run
from certify import suite as suites

GOOD = {"items": [{"name": "r", "overrides": ["model=resnet50"], "metric": "throughput",
                   "published": {"none": "a CPU"}}]}


def item(**kw):
    return {"items": [{**GOOD["items"][0], **kw}]}


def mistakes(data) -> list:
    with pytest.raises(suites.SuiteError) as e:
        suites.parse(data, "t")
    return e.value.lines


def test_a_good_suite_reads_with_its_defaults():
    s = suites.parse(GOOD, "t")
    (i,) = s.items
    assert i.nodes == (1, "all") and i.threshold is None and i.row == {"none": "a CPU"}
    assert s.system == () and s.health == () and s.threshold is None


@pytest.mark.parametrize("data, line", [
    ([1, 2], "suite t: a mapping of description, system, threshold, health, common, items, got list"),
    ({"items": []}, "suite t: items: a list of at least one item"),
    ({**GOOD, "iterms": 1}, "suite t: unknown key(s) iterms (valid: description, system, threshold, health, common, items)"),
    ({**GOOD, "threshold": 0}, "suite t: threshold must be a number > 0, got 0"),
    ({**GOOD, "system": {"nodes": 0}}, "suite t: system: nodes must be an integer >= 1, got 0"),
    ({**GOOD, "system": {"racks": 2}}, "suite t: system: a mapping of nodes, gpus_per_node, launcher, cluster, got {'racks': 2}"),
    ({**GOOD, "health": ["repeats=1"]}, "suite t: health: repeats=1: the health gate takes health.* settings only"),
    ({**GOOD, "common": ["nodes=2"]}, "suite t: common: nodes=2: nodes is not an item's"),
    (item(metric="speed"), "suite t: item r: metric 'speed' is not one of throughput, latency_ms, tokens_per_s, "
                           "tflops_per_device, mfu, peak_memory_gib, busbw_gbps, checkpoint_gbps"),
    (item(metric="busbw_gbps"), "suite t: item r: op (the collective judged) is given with metric busbw_gbps, "
                                "and only then; got metric 'busbw_gbps', op None"),
    (item(op="all_reduce"), "suite t: item r: op (the collective judged) is given with metric busbw_gbps, "
                            "and only then; got metric 'throughput', op 'all_reduce'"),
    (item(nodes=[1, 1]), "suite t: item r: nodes: a list of node counts >= 1 and `all`, each once, got [1, 1]"),
    (item(nodes=[0]), "suite t: item r: nodes: a list of node counts >= 1 and `all`, each once, got [0]"),
    (item(threshold=-0.5), "suite t: item r: threshold must be a number > 0, got -0.5"),
    (item(overrides=["preflight=true"]), "suite t: item r: preflight=true: preflight is not an item's (the system "
                                         "under test is the command's; a certification never leaves a sick node out)"),
    (item(overrides=["cluster=x"]), "suite t: item r: cluster=x: cluster is not an item's (the system under test "
                                    "is the command's; a certification never leaves a sick node out)"),
    (item(overrides="model=gpt"), "suite t: item r: overrides: a list of key=value overrides, got 'model=gpt'"),
    (item(name="a b"), "suite t: item 1: name 'a b' (letters, digits, _ . -: its sweep's folder)"),
    (item(published={"none": ""}), "suite t: item r: published: {none: why} says why, and nothing else"),
    (item(published={"source": "x"}), "suite t: item r: published: {source: NAME, row: {key: value, ...}, "
                                      "figure: NAME} (figure for a layouts file only), got {'source': 'x'}"),
    (item(colour=1), "suite t: item r: unknown key(s) colour (valid: name, overrides, nodes, metric, op, "
                     "threshold, published, note)"),
])
def test_each_mistake_is_one_line(data, line):
    assert mistakes(data) == [line]


def test_an_item_must_say_its_published_row_or_why_not_and_names_are_once():
    bad = {"items": [{"name": "r", "metric": "throughput"},
                     {"name": "r", "metric": "mfu", "published": {"none": "x"}}]}
    assert mistakes(bad) == [
        "suite t: item r: published: say which published row is its baseline, or why there is none ({none: why})",
        "suite t: item r: a second item of that name"]


def test_an_unknown_suite_names_the_ones_there_are(tmp_path):
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(GOOD))
    (tmp_path / "bad.yaml").write_text("items: [\n")
    with pytest.raises(suites.SuiteError) as e:
        suites.read("nosuch", str(tmp_path))
    assert e.value.lines[0].startswith("unknown suite 'nosuch' (there are: bad, mine;")
    with pytest.raises(suites.SuiteError, match=r"^suite bad: .*bad.yaml is not YAML: "):
        suites.read("bad", str(tmp_path))
    assert suites.read("mine", str(tmp_path)).items[0].name == "r"


def test_the_shipped_suites_read_and_each_item_names_its_published_row_or_why_not():
    assert {"smoke", "h100x8", "h200x8"} <= set(suites.names())
    for name in ("smoke", "h100x8", "h200x8"):
        s = suites.read(name)
        assert s.sha256 and all(i.row.get("none") or i.row.get("source") for i in s.items)
    for name in ("h100x8", "h200x8"):
        items = {i.name: i for i in suites.read(name).items}
        assert set(items) == {"resnet50", "bert", "llama3_8b_fsdp", "deepseek_v3_16b_ep", "all_reduce", "checkpoint"}
        assert items["all_reduce"].metric == "busbw_gbps" and items["checkpoint"].metric == "checkpoint_gbps"
        assert items["resnet50"].row["source"] == "lambda_pytorch"


@pytest.mark.parametrize("name, nodes, matched", [("h100x8", 2, {"resnet50", "llama3_8b_fsdp"}),
                                                  ("h200x8", 4, {"resnet50"})])
def test_every_point_of_a_gpu_suite_is_made_by_the_planner_and_its_published_rows_are_there(
        name, nodes, matched, tmp_path):
    """Planned for a site of 8-GPU nodes (conf/cluster/example_site.yaml), nothing run: the
    published rows are read and their configuration is the 1-node points' (the device is asked
    once the points ran); NeMo's row says it is another implementation."""
    s = suites.read(name)
    system = run.system_of(s, {"nodes": nodes, "cluster": "example_site"})
    gate, planned = run.plan(s, system, str(tmp_path))
    assert gate[0].nodes == nodes and gate[0].health.device_model == name[:4].upper()
    made = {p.item.name: [pt for pt, _ in p.made] for p in planned}
    assert [pt.nodes for pt in made["resnet50"]] == [1, nodes] and [pt.nodes for pt in made["checkpoint"]] == [nodes]
    assert all(not pt.preflight for pts in made.values() for pt in pts)
    b = baselines.resolve(None, s)
    assert {e["item"] for e in b.entries} == matched
    found = {p.item.name: [bool(baselines.find(b.entries, judge.planned_row(pt, p.item), p.item, planned=True))
                           for pt, _ in p.made] for p in planned}
    assert all(found[i] == [True, False] for i in matched)   # 8 devices: the 1-node point's
    assert not any(v for i, f in found.items() if i not in matched for v in f)
    notes = {e["item"]: e["note"] for e in b.entries}
    assert "DeepLearningExamples (Lambda's fork)" in notes["resnet50"] and "not the same measurement" in notes["resnet50"]
    if name == "h100x8":
        assert notes["llama3_8b_fsdp"].startswith("baseline: NeMo (NeMo Launcher, Megatron-Core)'s figure")
        assert "another implementation and layout" in notes["llama3_8b_fsdp"]


def test_an_item_whose_node_count_is_beyond_the_system_is_refused(tmp_path):
    s = suites.parse(item(nodes=[4]), "t")
    with pytest.raises(run.ConfigError, match="^item r: nodes 4: the system under test has 3$"):
        run.plan(s, run.system_of(s, {"nodes": 3, "launcher": "slurm", "cluster": "localtest"}), str(tmp_path))


def test_an_items_bad_override_is_the_planners_line_naming_the_item(tmp_path):
    for overrides, line in ((["model=nosuch"], "item r: unknown model 'nosuch' (valid: "),
                            (["modell=gpt"], "item r: unknown key 'modell' (valid: ")):
        s = suites.parse(item(overrides=overrides), "t")
        with pytest.raises(run.ConfigError) as e:
            run.plan(s, run.system_of(s, {"launcher": "local"}), str(tmp_path))
        assert str(e.value).startswith(line) and "\n" not in str(e.value)
    s = suites.parse(yaml.safe_load(textwrap.dedent("""
        items:
          - {name: c, overrides: [bench=comm, "bench.ops=[broadcast]"], metric: busbw_gbps,
             op: all_reduce, published: {none: x}}""")), "t")
    with pytest.raises(run.ConfigError, match=r"^item c: op all_reduce is judged, but its points do not measure it"):
        run.plan(s, run.system_of(s, {"launcher": "local"}), str(tmp_path))
