"""The report's "Network NCCL used" section (analysis/sections/network.py, by
contract/nccl_net.py's rule) on a sweep whose records carry NCCL's network: a 2-node point whose
second node's ranks ran over sockets where the nodes have InfiniBand is flagged, in the terminal
report and in report.html; a 1-node point over sockets is not; health.expect.nccl_transport
flags another network."""
from pathlib import Path

import analysis
from analysis.report import contents, page
from contract import nccl_net, paths, records
from tests.sweepfiles import write_point, write_repeat

DATA = Path(__file__).parent / "data" / "nccl"
PORTS = [{"device": "mlx5_0", "port": "1", "state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)",
          "link_layer": "InfiniBand"}]


def nccl_of(name):
    return nccl_net.parse((DATA / name).read_text().splitlines())


def fields(by_rank):
    return lambda rank: {"nccl": nccl_of(by_rank(rank)),
                         "environment": {"device": "H100", "infiniband_ports": PORTS}}


def sweep(tmp_path):
    s = str(tmp_path / "sweep")
    two = write_point(s, "000-pytorch-resnet50-fp32-2x2-bs8", nodes=2, gpus_per_node=2, repeats=1)
    write_repeat(two, 0, [1.0] * 4, fields=fields(lambda r: "ib-2.21.log" if r < 2 else "socket-2.21.log"))
    one = write_point(s, "001-pytorch-resnet50-fp32-1x2-bs8", nodes=1, gpus_per_node=2, repeats=1)
    write_repeat(one, 0, [1.0] * 2, fields=fields(lambda r: "socket-2.21.log"))
    roce = write_point(s, "002-pytorch-resnet50-fp32-2x1-bs8", nodes=2, gpus_per_node=1, repeats=1)
    roce["health"] = {"expect": {"nccl_transport": "IB"}}
    records.write_json_atomic(f"{roce['dir']}/{paths.POINT_FILE}", roce)
    write_repeat(roce, 0, [1.0] * 2, fields=fields(lambda r: "roce-2.18.log"))
    return s


def test_sockets_on_infiniband_nodes_are_flagged_in_the_report(tmp_path):
    text = contents.render(analysis.load(sweep(tmp_path)))
    part = text[text.index("## Network NCCL used"):]
    part = part[:part.index("\n## ")] if "\n## " in part else part
    lines = part.splitlines()
    assert lines[1] == "FLAG: 2 of 3 NCCL point(s) did not use the network they should"
    assert lines[2] == ("- 000-pytorch-resnet50-fp32-2x2-bs8 (2 nodes): IB (mlx5_0:1/IB, mlx5_1:1/IB, "
                        "mlx5_2:1/IB, mlx5_3:1/IB), NCCL 2.21.5 on rank(s) 0, 1; Socket (eth0, eth1), "
                        "NCCL 2.21.5 on rank(s) 2, 3")
    assert lines[3].startswith("  - FLAG: NCCL ran over sockets on rank(s) 2, 3, on nodes that have "
                               "InfiniBand (node2: mlx5_0:1 (InfiniBand))")
    assert lines[4] == ("- 001-pytorch-resnet50-fp32-1x2-bs8 (1 node): Socket (eth0, eth1), NCCL 2.21.5 "
                        "on rank(s) 0, 1")   # within one node NCCL needs no network: no flag
    assert lines[6] == "  - FLAG: rank(s) 0, 1 used RoCE: health.expect.nccl_transport requires IB"


def test_the_flag_shows_in_report_html(tmp_path):
    html = page.page("r", contents.sections(analysis.load(sweep(tmp_path))))
    assert "Network NCCL used" in html and "FLAG: NCCL ran over sockets on rank(s) 2, 3" in html
