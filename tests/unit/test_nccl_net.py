"""contract/nccl_net.py: the network NCCL chose, from NCCL's own INFO lines in NCCL's format
(tests/unit/data/nccl/: IB, RoCE, a plugin, sockets, NCCL 2.18 to 2.30), and the flags of a
multi-node point over sockets on nodes that have InfiniBand."""
import os
from pathlib import Path

import pytest

from contract import nccl_net, paths

DATA = Path(__file__).parent / "data" / "nccl"
IB_PORTS = [{"device": "mlx5_0", "port": "1", "state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)",
             "link_layer": "InfiniBand"}]
DOWN_PORTS = [{"device": "mlx5_0", "port": "1", "state": "1: DOWN", "rate": "400 Gb/sec (4X NDR)",
               "link_layer": "InfiniBand"}]


def parsed(name):
    return nccl_net.parse((DATA / name).read_text().splitlines())


@pytest.mark.parametrize("name,want", [
    ("ib-2.21.log", {"version": "2.21.5", "cuda": "12.4", "network": "IB", "transport": "IB",
                     "plugin": None, "host": "node-01",
                     "devices": ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/IB", "mlx5_3:1/IB"]}),
    ("roce-2.18.log", {"version": "2.18.3", "cuda": "12.2", "network": "IB", "transport": "RoCE",
                       "plugin": None, "host": "gpu-a", "devices": ["mlx5_2:1/RoCE", "mlx5_3:1/RoCE"]}),
    ("plugin-2.23.log", {"version": "2.23.4", "cuda": "12.5", "network": "AWS Libfabric",
                         "transport": "plugin", "plugin": "AWS Libfabric", "host": "p5-07", "devices": []}),
    ("socket-2.21.log", {"version": "2.21.5", "cuda": "12.4", "network": "Socket", "transport": "Socket",
                         "plugin": None, "host": "node-02", "devices": ["eth0", "eth1"]}),
    # 2.30: NCCL's own IB is a plugin it "Initialized" (not an external one); a timestamped line
    ("ib-2.30.log", {"version": "2.30.3", "cuda": "13.0", "network": "IB", "transport": "IB",
                     "plugin": None, "host": "node-03", "devices": ["mlx5_0:1/IB", "mlx5_1:1/IB"]}),
])
def test_each_fixture_names_its_network(name, want):
    assert parsed(name) == want


def test_no_nccl_line_is_no_nccl_and_a_bare_version_line_counts():
    assert nccl_net.parse(["worker rank 0: ok", "", "gloo: connected"]) is None
    bare = nccl_net.parse(["NCCL version 2.19.3+cuda12.3"])
    assert (bare["version"], bare["transport"]) == ("2.19.3", None)


def test_a_plugin_loaded_but_not_used_is_said():
    lines = (DATA / "plugin-2.23.log").read_text().splitlines()[:4] + \
        (DATA / "socket-2.21.log").read_text().splitlines()[3:6]
    got = nccl_net.parse(lines)
    assert (got["transport"], got["plugin"], got["loaded"]) == ("Socket", None, ["AWS Libfabric"])


def test_debug_env_asks_info_for_init_and_net_into_the_repeat_folder():
    env = nccl_net.debug_env({}, "/s/points/p/repeat-00", 3)
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                   "NCCL_DEBUG_FILE": "/s/points/p/repeat-00/nccl-00003.%h.%p.log"}
    site = nccl_net.debug_env({"NCCL_DEBUG": "TRACE", "NCCL_DEBUG_SUBSYS": "COLL,net"}, "/r", 0)
    assert (site["NCCL_DEBUG"], site["NCCL_DEBUG_SUBSYS"]) == ("TRACE", "COLL,net,INIT")
    assert nccl_net.debug_env({"NCCL_DEBUG_SUBSYS": "^GRAPH"}, "/r", 0)["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert nccl_net.debug_env({"NCCL_DEBUG_SUBSYS": "ALL"}, "/r", 0)["NCCL_DEBUG_SUBSYS"] == "ALL"


def test_read_takes_the_ranks_own_files_as_nccl_names_them(tmp_path):
    """NCCL expands %h and %p; rank 1's file is not rank 0's."""
    (tmp_path / "nccl-00000.node-02.4242.log").write_text((DATA / "socket-2.21.log").read_text())
    (tmp_path / "nccl-00001.node-01.2876.log").write_text((DATA / "ib-2.21.log").read_text())
    assert nccl_net.read(str(tmp_path), 0)["transport"] == "Socket"
    assert nccl_net.read(str(tmp_path), 1)["transport"] == "IB"
    assert nccl_net.read(str(tmp_path), 2) is None
    assert paths.nccl_log_pattern(1) == "nccl-00001.%h.%p.log"


def ranks(*cases):
    """(rank, fixture, ports) -> the rule's rank dicts."""
    out = []
    for rank, name, ports in cases:
        nccl = parsed(name)
        out.append({"rank": rank, "host": nccl["host"], "nccl": nccl, "ports": ports})
    return out


def test_a_mix_across_ranks_flags_the_socket_ranks_on_infiniband_nodes():
    mix = ranks((0, "ib-2.21.log", IB_PORTS), (1, "ib-2.21.log", IB_PORTS),
                (2, "socket-2.21.log", IB_PORTS), (3, "socket-2.21.log", IB_PORTS))
    (flag,) = nccl_net.flags(mix, nodes=2)
    assert flag.startswith("NCCL ran over sockets on rank(s) 2, 3, on nodes that have InfiniBand "
                           "(node-02: mlx5_0:1 (InfiniBand)): most of the fabric's bandwidth is lost")


def test_no_flag_within_a_node_without_infiniband_or_with_its_ports_down():
    sockets = ranks((0, "socket-2.21.log", IB_PORTS), (1, "socket-2.21.log", IB_PORTS))
    assert nccl_net.flags(sockets, nodes=1) == []          # one node: NCCL needs no network
    assert nccl_net.flags(ranks((0, "socket-2.21.log", []), (1, "socket-2.21.log", None)), 2) == []
    assert nccl_net.flags(ranks((0, "socket-2.21.log", DOWN_PORTS)), 2) == []
    assert nccl_net.flags(ranks((0, "ib-2.21.log", IB_PORTS), (1, "roce-2.18.log", IB_PORTS),
                                (2, "plugin-2.23.log", IB_PORTS)), 3) == []


@pytest.mark.parametrize("expect,flagged", [
    ("IB", "1, 2"), ("ib", "1, 2"), ("RoCE", "0, 2"), ("plugin", "0, 1"),
    ("AWS Libfabric", "0, 1"), ("Socket", "0, 1, 2")])
def test_expect_requires_a_transport_or_a_plugins_name(expect, flagged):
    mix = ranks((0, "ib-2.21.log", IB_PORTS), (1, "roce-2.18.log", IB_PORTS), (2, "plugin-2.23.log", None))
    (flag,) = nccl_net.flags(mix, nodes=3, expect=expect)
    assert flag.startswith(f"rank(s) {flagged} used ") and flag.endswith(
        f"health.expect.nccl_transport requires {expect}")


def test_describe_in_words():
    assert nccl_net.describe(parsed("roce-2.18.log")) == "RoCE (mlx5_2:1/RoCE, mlx5_3:1/RoCE), NCCL 2.18.3"
    assert nccl_net.describe(parsed("plugin-2.23.log")) == "plugin AWS Libfabric, NCCL 2.23.4"
    assert nccl_net.describe(None) == "no NCCL"


def test_the_fixtures_are_in_nccls_line_format():
    """Every line of every fixture is one NCCL prints: its prefix, then INFO or WARN."""
    for path in DATA.glob("*.log"):
        for line in path.read_text().splitlines():
            assert nccl_net._LINE.match(line) or " NCCL WARN " in line, (os.path.basename(path), line)


def test_the_harness_asks_nccl_and_records_what_it_said(tmp_path, monkeypatch):
    """A session that writes NCCL's lines where NCCL_DEBUG_FILE says, %h and %p expanded as
    NCCL does: the record carries the network; the variables are put back after the run."""
    from frameworks.common import harness
    from frameworks.common.session import Session
    from frameworks.common.distenv import DistEnv
    from tests.runspecs import run_spec, stand_in
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)

    class Nccl(Session):
        def __init__(self, spec, dist):
            assert os.environ["NCCL_DEBUG"] == "INFO" and os.environ["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
            name = os.environ["NCCL_DEBUG_FILE"].replace("%h", "node-02").replace("%p", str(os.getpid()))
            Path(name).write_text((DATA / "socket-2.21.log").read_text())

        def step(self):
            return 1.0

    spec = run_spec({"point": "p", "repeat": 0, "framework": "none", "batch_size": 4,
                     "warmup_steps": 1, "measure_steps": 2}, record_dir=str(tmp_path))
    rec = harness.run(stand_in(Nccl), spec, DistEnv(1, 2, 1, 2, "h", 1))[0]
    assert rec["status"] == "ok", rec["error"]
    assert rec["nccl"]["transport"] == "Socket" and rec["nccl"]["version"] == "2.21.5"
    assert os.environ["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_FILE" not in os.environ
    assert list(tmp_path.glob("nccl-00001.node-02.*.log"))
