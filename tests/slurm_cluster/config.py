"""Files of the local test cluster: slurm.conf, gres.conf, slurmdbd.conf, the
nodes' hosts file, fake GPU devices and the munge key; plus daemon arguments.
Every path points under the cluster dir, so nothing touches /etc or /var."""
from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instance:
    """The machine-wide names and numbers of one cluster: the prefix of its network names
    (bridge, namespaces, veths), its private /24, its daemons' ports (away from Slurm's and
    MariaDB's defaults, so a system install is never disturbed) and its Slurm cluster name.
    SHARED is the tests' cluster; SECOND runs beside it, for a test module whose fault needs
    a cluster configured otherwise (tests/integration/test_health_slurm.py)."""
    prefix: str
    subnet: str
    ports: dict = field(hash=False)
    cluster_name: str

    @property
    def controller_addr(self) -> str:  # the bridge's address in the root namespace
        return f"{self.subnet}.1"

    def node_addr(self, k: int) -> str:
        return f"{self.subnet}.{10 + k}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br0"

    def netns(self, k: int) -> str:  # nodeK's network namespace, /run/netns/<prefix>-nodeK
        return f"{self.prefix}-node{k}"

    def veth(self, k: int) -> str:  # root-namespace end of nodeK's veth pair; eth0 inside
        return f"{self.prefix}-veth{k}"

    @property
    def owner(self) -> Path:  # the cluster dir that owns these names, while up
        return Path("/run/dlbench-slurm.owner" if self is SHARED
                    else f"/run/dlbench-slurm-{self.prefix}.owner")


SHARED = Instance("dlb", "10.77.0", {"slurmctld": 16817, "slurmd": 16818, "slurmdbd": 16819,
                                     "mariadb": 16306}, "dlbench")
SECOND = Instance("dlh", "10.78.0", {"slurmctld": 16827, "slurmd": 16828, "slurmdbd": 16829,
                                     "mariadb": 16316}, "dlbench2")
INSTANCES = {i.prefix: i for i in (SHARED, SECOND)}
# Small and fast: the database only lives for one test session.
MARIADB_OPTS = ["--skip-name-resolve", "--innodb-log-file-size=8M",
                "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=0",
                "--innodb-lock-wait-timeout=900", "--skip-log-bin"]


def which(name: str) -> str | None:
    """Daemons and `ip` live in sbin, which a venv's or a user's PATH may lack."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def controller_host() -> str:
    # slurmctld refuses to start unless SlurmctldHost equals `hostname -s`.
    return socket.gethostname().split(".")[0]


def munged_args(c) -> list[str]:
    m = c.dir / "munge"
    return [f"--socket={m}/munge.sock", f"--key-file={m}/munge.key", f"--seed-file={m}/munged.seed",
            f"--log-file={c.dir}/log/munged.log", f"--pid-file={c.dir}/run/munged.pid"]


def mariadbd_args(c) -> list[str]:
    # 127.0.0.1, own port and socket: a system MariaDB on this machine is left alone.
    return ["--no-defaults", f"--datadir={c.dir}/db", f"--socket={c.dir}/run/mariadb.sock",
            f"--port={c.instance.ports['mariadb']}", "--bind-address=127.0.0.1", "--user=root",
            f"--pid-file={c.dir}/run/mariadbd.pid", f"--log-error={c.dir}/log/mariadbd.log",
            *MARIADB_OPTS]


def slurm_conf(c) -> str:
    d, auth, net = c.dir, f"socket={c.dir}/munge/munge.sock", c.instance
    if c.accounting:
        acct = [f"AccountingStorageType=accounting_storage/slurmdbd",
                f"AccountingStorageHost={net.controller_addr}",
                f"AccountingStoragePort={net.ports['slurmdbd']}", "JobCompType=jobcomp/none",
                # Connections to slurmdbd take their munge socket from here, not AuthInfo.
                f"AccountingStoragePass={c.dir}/munge/munge.sock"]
    else:  # without slurmdbd, `sacct -c` can still list finished jobs from this file
        acct = ["AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/filetxt", f"JobCompLoc={d}/log/jobcomp.txt"]
    gres = f" Gres=gpu:{c.gpus_per_node}" if c.gpus_per_node else ""
    lines = [
        f"ClusterName={net.cluster_name}",
        f"SlurmctldHost={controller_host()}({net.controller_addr})",
        f"SlurmctldPort={net.ports['slurmctld']}", f"SlurmdPort={net.ports['slurmd']}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo={auth}",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid", f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "SlurmctldDebug=info", "SlurmdDebug=info",
        # No cgroups here: linuxproc tracking, no task containment.
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "MpiDefault=none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        # Trust slurm.conf over detected hardware: 3 "nodes" share 2 real cores.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2", "JobRequeue=1", "GresTypes=gpu",
        # Fast tests: cancelled jobs die in 5 s, scheduling runs every second,
        # finished jobs stay visible to squeue/scontrol for 30 s.
        "KillWait=5", "MinJobAge=30", "InactiveLimit=0", "OverTimeLimit=0",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=1,bf_interval=1,batch_sched_delay=0",
        "MailProg=/bin/true",  # none installed; silences an error at start
        "MessageTimeout=10", "SlurmdTimeout=60", "SlurmctldTimeout=60", "TCPTimeout=2",
        *acct,
        f"NodeName=DEFAULT CPUs=2 RealMemory=4000{gres} State=UNKNOWN",
        *[f"NodeName={n} NodeAddr={net.node_addr(k)} NodeHostname={n}" + _own_gres(c, n)
          for k, n in enumerate(c.node_names, 1)],
        f"PartitionName=debug Nodes={','.join(c.node_names)} Default=YES "
        "MaxTime=7-00:00:00 DefaultTime=01:00:00 State=UP",
    ]
    return "\n".join(lines) + "\n"


def _own_gres(c, node: str) -> str:
    """A node whose GPU count differs from the others' (`c.devices`) says so itself."""
    count = c.devices.get(node)
    return "" if count is None or count == c.gpus_per_node else f" Gres=gpu:{count}" if count else " Gres="


def gres_conf(c) -> str:
    """The fake GPUs of each node: gpus_per_node, or `c.devices[node]` where given."""
    lines = ["AutoDetect=off"]
    for i in range(max([c.gpus_per_node, *c.devices.values()])):  # character devices, see write_files
        has = [n for n in c.node_names if i < c.devices.get(n, c.gpus_per_node)]
        if has:
            lines.append(f"NodeName={','.join(has)} Name=gpu File={c.dir}/dev/gpu{i}")
    return "\n".join(lines) + "\n"


def slurmdbd_conf(c) -> str:
    d, net = c.dir, c.instance
    return "\n".join([
        "AuthType=auth/munge", f"AuthInfo=socket={d}/munge/munge.sock",
        f"DbdHost={controller_host()}", f"DbdAddr={net.controller_addr}",
        f"DbdPort={net.ports['slurmdbd']}",
        "SlurmUser=root", f"LogFile={d}/log/slurmdbd.log", f"PidFile={d}/run/slurmdbd.pid",
        "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
        f"StoragePort={net.ports['mariadb']}", "StorageUser=root", "StorageLoc=slurm_acct_db",
    ]) + "\n"


def hosts(c) -> str:
    """/etc/hosts as seen inside every node (bind-mounted there)."""
    net = c.instance
    lines = ["127.0.0.1 localhost", f"{net.controller_addr} {controller_host()}"]
    lines += [f"{net.node_addr(k)} {n}" for k, n in enumerate(c.node_names, 1)]
    return "\n".join(lines) + "\n"


def write_files(c) -> None:
    """A fresh tree for one run (the MariaDB template is kept: it is reusable)."""
    shutil.rmtree(c.dir / "db", ignore_errors=True)  # copied afresh from the template
    for sub in ("etc", "run", "log", "state", "spool", "dev", "munge"):
        shutil.rmtree(c.dir / sub, ignore_errors=True)
        (c.dir / sub).mkdir(parents=True)
    for n in c.node_names:
        (c.dir / "spool" / n).mkdir()
    etc = c.dir / "etc"
    (etc / "slurm.conf").write_text(slurm_conf(c))
    (etc / "gres.conf").write_text(gres_conf(c))
    (etc / "hosts").write_text(hosts(c))
    if c.accounting:  # slurmdbd insists on a private slurmdbd.conf beside slurm.conf
        dbd = etc / "slurmdbd.conf"
        dbd.write_text(slurmdbd_conf(c))
        dbd.chmod(0o600)
    for i in range(max([c.gpus_per_node, *c.devices.values()])):
        # gres.conf wants device files; plain files are rejected. 1,3 = /dev/null.
        os.mknod(c.dir / "dev" / f"gpu{i}", 0o666 | 0o020000, os.makedev(1, 3))
    # munged checks: socket dir traversable by all, key private to its owner.
    (c.dir / "munge").chmod(0o755)
    key = c.dir / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)


def log_tails(c, lines: int = 15) -> str:
    """The end of every log, to explain a failed start."""
    parts = []
    for log in sorted((c.dir / "log").glob("*")):
        try:
            text = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        if text:
            parts.append(f"--- {log} ---\n" + "\n".join(text))
    return "\n".join(parts)
