"""The network NCCL really chose, written once: how a rank asks NCCL to say it, how its lines
are read, and which points ran over sockets where the nodes have InfiniBand.

A rank's NCCL writes its INFO lines of the INIT and NET subsystems to a file of its own in the
repeat's folder (`debug_env`: NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET, NCCL_DEBUG_FILE with
NCCL's %h and %p), so the rank's log and the timed window's output stay as they were; after
the timed window the harness reads them (`read`) into the record's `nccl`. The lines, as
NCCL's source prints them (src/debug.cc: `host:pid:tid [cudaDev] NCCL INFO ...`, a
`[timestamp] ` before where NCCL_DEBUG_TIMESTAMP_LEVELS asks):

    NCCL version 2.21.5+cuda12.4                                        (init.cc, showVersion)
    NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>   (net_ib)
    NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.0.1.1<0>           (net_socket.cc)
    NET/Plugin: Loaded net plugin AWS Libfabric (v8)                      (2.19 to 2.29)
    Initialized NET plugin IB / Assigned NET plugin IB to comm            (2.30 on)
    Using network IB | Socket | <a plugin's name>                        (init.cc, per communicator)

`Using network` names the transport: NCCL's own `IB` (InfiniBand verbs, over InfiniBand or
RoCE: each device's link layer says which) and `Socket`; any other name is an external
network plugin's (`plugin`). A multi-node point one of whose ranks used sockets on a node
with an active InfiniBand or RoCE port lost most of the fabric's bandwidth, silently
(`flags`); health.expect.nccl_transport requires one transport. The report
(analysis/sections/network.py) and preflight (launchers/health/verdict.py) apply `flags`.
Standard library only: the worker, the health step and the analysis all read it.
"""
import glob
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import paths

Nccl = dict[str, Any]   # parse's facts of one rank's NCCL

IB, ROCE, SOCKET, PLUGIN = "IB", "RoCE", "Socket", "plugin"
SUBSYS = ("INIT", "NET")

_LINE = re.compile(r"^(?:\[[^\]]*\] )?(?P<host>[^\s:]+):\d+:\d+ \[\d+\] NCCL INFO (?P<msg>.*?)\s*$")
_VERSION = re.compile(r"^NCCL version (?P<v>\d+\.\d+\.\d+)\S*?\+cuda(?P<cuda>[\d.]+)")
_NETWORK = re.compile(r"^Using network (?P<name>.+)$")
_IB = re.compile(r"^NET/IB ?: Using(?P<devs>.*?); OOB ")
_IB_DEV = re.compile(r"\[\d+\](?P<dev>[^\s:]+):(?P<port>\d+)/(?P<link>IB|RoCE|UNSPECIFIED)")
_SOCKET = re.compile(r"^NET/Socket ?: Using(?P<devs>.*)$")
_SOCKET_DEV = re.compile(r"\[\d+\](?P<dev>[^\s:]+):")
_PLUGIN = re.compile(r"^(?:NET/Plugin ?: Loaded net plugin (?P<old>.+?) \(v\d+\)"
                     r"|Initialized NET plugin (?P<new>.+))$")


def debug_env(environ: Mapping[str, str], record_dir: str, rank: int) -> dict[str, str]:
    """The variables a rank sets before its framework starts NCCL: INFO at least (a site's
    TRACE stays), the INIT and NET subsystems added to a site's list (an exclusion list,
    `^...`, becomes ours), and NCCL's own file in the repeat's folder."""
    level = environ.get("NCCL_DEBUG", "").upper()
    subsys = [s for s in environ.get("NCCL_DEBUG_SUBSYS", "").split(",") if s.strip()]
    if not subsys or subsys[0].startswith("^"):
        subsys = list(SUBSYS)
    elif "ALL" not in (s.upper() for s in subsys):
        subsys += [s for s in SUBSYS if s not in (x.upper() for x in subsys)]
    return {"NCCL_DEBUG": "TRACE" if level == "TRACE" else "INFO",
            "NCCL_DEBUG_SUBSYS": ",".join(subsys),
            "NCCL_DEBUG_FILE": os.path.join(str(record_dir), paths.nccl_log_pattern(rank))}


def parse(lines: Iterable[str]) -> Nccl | None:
    """What one rank's NCCL lines say: {version, cuda, network, transport, plugin, devices,
    host}, or None where NCCL said nothing (no NCCL ran). `transport`: IB, RoCE, Socket,
    plugin, or None where no `Using network` line came (NCCL_DEBUG_SUBSYS left INIT out);
    `plugin`: the external plugin used; `loaded`, where one loaded but another network ran."""
    out: Nccl = {"version": None, "cuda": None, "network": None, "transport": None, "plugin": None,
           "devices": [], "host": None}
    ib: list[tuple[str, str, str]] = []
    sockets: list[str] = []
    networks: list[str] = []
    loaded: list[str] = []
    seen = False
    for line in lines:
        m = _LINE.match(line)
        if not m:  # NCCL_DEBUG=VERSION's or WARN's bare version line
            if (v := _VERSION.match(line.strip())):
                seen, out["version"], out["cuda"] = True, v["v"], v["cuda"]
            continue
        seen, msg = True, m["msg"]
        out["host"] = out["host"] or m["host"]
        if (v := _VERSION.match(msg)):
            out["version"], out["cuda"] = v["v"], v["cuda"]
        elif (v := _NETWORK.match(msg)):
            if v["name"] not in networks:
                networks.append(v["name"])
        elif (v := _IB.match(msg)):
            ib = [(d["dev"], d["port"], d["link"]) for d in _IB_DEV.finditer(v["devs"])]
        elif (v := _SOCKET.match(msg)):
            sockets = [d["dev"] for d in _SOCKET_DEV.finditer(v["devs"])]
        elif (v := _PLUGIN.match(msg)) and (v["old"] or v["new"]) not in (IB, SOCKET):
            loaded.append(v["old"] or v["new"])  # NCCL's own IB and Socket are plugins in 2.30
    if not seen:
        return None
    if networks:
        out["network"] = networks[0]
        if len(networks) > 1:
            out["networks"] = networks
        out["transport"], out["devices"] = _transport(networks[0], ib, sockets)
        if out["transport"] == PLUGIN:
            out["plugin"] = networks[0]
    if loaded and out["plugin"] is None:
        out["loaded"] = loaded
    return out


def _transport(network: str, ib: list[tuple[str, str, str]], sockets: list[str]) -> tuple[str, list[str]]:
    """(transport, devices) of the network a communicator used."""
    if network == SOCKET:
        return SOCKET, sockets
    devices = [f"{dev}:{port}/{link}" for dev, port, link in ib]
    if network == IB:
        return (ROCE if ib and all(link == ROCE for _, _, link in ib) else IB), devices
    return PLUGIN, devices  # a plugin over verbs devices (IBext, ...) prints NET/IB's line too


def read(record_dir: str, rank: int) -> Nccl | None:
    """`parse` of the lines rank `rank`'s NCCL wrote to its files in the repeat's folder."""
    pattern = paths.nccl_log_pattern(rank).replace("%h", "*").replace("%p", "*")
    lines: list[str] = []
    for path in sorted(glob.glob(os.path.join(str(record_dir), pattern))):
        try:
            with open(path, errors="replace") as f:
                lines += f.read().splitlines()
        except OSError:
            continue
    return parse(lines)


def active_rdma_ports(ports: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """'mlx5_0:1 (InfiniBand)' for each active InfiniBand or RoCE port of a node's
    (frameworks/common/environment.py's infiniband_ports)."""
    return [f"{p.get('device')}:{p.get('port')} ({p.get('link_layer') or 'InfiniBand'})"
            for p in ports or () if str(p.get("state") or "").endswith("ACTIVE")]


def meets(nccl: Mapping[str, Any], expect: str) -> bool:
    """Whether a rank's network is what health.expect.nccl_transport asks: its transport
    (IB, RoCE, Socket, plugin; IB is not RoCE, though NCCL names both networks IB) or its
    plugin's name (`AWS Libfabric`)."""
    if not nccl:
        return False
    names = {nccl.get("transport")} | ({nccl.get("network")} if nccl.get("transport") == PLUGIN else set())
    return str(expect).lower() in {str(n).lower() for n in names}


def short(nccl: Mapping[str, Any]) -> str:
    """'IB', 'Socket', 'plugin AWS Libfabric'."""
    if nccl.get("transport") == PLUGIN:
        return f"plugin {nccl.get('network')}"
    return nccl.get("transport") or "unknown network"


def describe(nccl: Mapping[str, Any] | None) -> str:
    """'IB (mlx5_0:1/IB, mlx5_1:1/IB), NCCL 2.21.5' in words."""
    if not nccl:
        return "no NCCL"
    what = short(nccl)
    if nccl.get("devices"):
        what += f" ({', '.join(nccl['devices'])})"
    return what + (f", NCCL {nccl['version']}" if nccl.get("version") else "")


def flags(ranks: Iterable[Mapping[str, Any]], nodes: int, expect: str | None = None) -> list[str]:
    """The lines a point's ranks earn: over sockets on a node with an active InfiniBand or RoCE
    port, on a multi-node point (within a node NCCL needs no network); and, where the site
    requires a transport (`expect`), each rank whose network is another. `ranks`: one dict per
    rank, {rank, host, nccl (`parse`'s), ports (its node's InfiniBand ports)}."""
    out: list[str] = []
    ncclers = [r for r in ranks if r.get("nccl")]
    if nodes > 1:
        lost = [(r, active_rdma_ports(r.get("ports"))) for r in ncclers
                if r["nccl"].get("transport") == SOCKET]
        lost = [(r, p) for r, p in lost if p]
        if lost:
            hosts = sorted({f"{r.get('host')}: {', '.join(p)}" for r, p in lost})
            out.append(f"NCCL ran over sockets on rank(s) {_ranks(r['rank'] for r, _ in lost)}, on "
                       f"nodes that have InfiniBand ({'; '.join(hosts)}): most of the fabric's "
                       "bandwidth is lost (check NCCL_IB_HCA, NCCL_NET and the network plugin's name)")
    if expect:
        off = [r for r in ncclers if not meets(r["nccl"], expect)]
        if off:
            seen = sorted({short(r["nccl"]) for r in off})
            out.append(f"rank(s) {_ranks(r['rank'] for r in off)} used {'; '.join(seen)}: "
                       f"health.expect.nccl_transport requires {expect}")
    return out


def _ranks(ranks: Iterable[int]) -> str:
    return ", ".join(str(r) for r in sorted(set(ranks)))
