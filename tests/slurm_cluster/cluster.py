"""A real multi-node Slurm cluster on this one machine, for integration tests.

`up()` starts, with every file under `dir` and every network name prefixed `dlb`:
munged (own key and socket), MariaDB + slurmdbd when installed (so `sacct` and
submitit see real job states), slurmctld in the root network namespace, and one
slurmd per node, each in its own network + UTS + mount namespace so `hostname`
prints nodeK and node names resolve inside the nodes. Facts behind the choices:
/work/shared/notes/local-slurm-cluster.md; usage: docs/slurm-test-cluster.md.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from . import config, net
from .config import which

LOCK = Path("/run/dlbench-slurm.lock")  # serializes up/down: names and ports are machine-wide
# Fixed text; values arrive as positional arguments, never interpolated.
NODE_SH = 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'
CLIENT_PREFIXES = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_")  # an outer job's leak
# The daemons, and so every job step and rank (PropagatePrioProcess=0, the default: a task
# takes slurmd's nice value), run ahead of the other processes of this machine: `make test`'s
# other tests share its cores, and a cluster test that times links or waits on a step should
# see cores as if idle (nice -10: some nine tenths of a core both want). Root only, as the
# cluster is.
NICE = -10


class ClusterError(RuntimeError):
    pass


def default_dir() -> Path:
    return Path(os.environ.get("DLBENCH_SLURM_DIR") or "/tmp/dlbench-slurm")


@functools.lru_cache(maxsize=None)
def skip_reason() -> str | None:
    """Why a cluster cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "local Slurm cluster needs root (network namespaces, mknod, mount)"
    for tool in ("ip", "nsenter", "unshare", "mknod", "munged",
                 "slurmctld", "slurmd", "sinfo", "srun", "sbatch", "scontrol"):
        if not which(tool):
            return f"local Slurm cluster needs `{tool}` (install with `make slurm-deps`)"
    # Anonymous throw-away namespaces: the probe leaves no /run/netns mount behind.
    probe = subprocess.run([which("unshare"), "--net", "--uts", "--mount",
                            "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode:
        return f"network namespaces not permitted here: {probe.stderr.strip()}"
    return None


_lock = {"fd": None, "depth": 0}


@contextlib.contextmanager
def _locked():
    """An exclusive lock across processes; re-entrant within one (up calls down)."""
    if _lock["depth"] == 0:
        _lock["fd"] = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(_lock["fd"], fcntl.LOCK_EX)
    _lock["depth"] += 1
    try:
        yield
    finally:
        _lock["depth"] -= 1
        if _lock["depth"] == 0:
            os.close(_lock["fd"])  # releases the flock


def _run(argv: list, check: bool = True, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    r = subprocess.run([str(a) for a in argv], text=True, timeout=timeout, **kw)
    if check and r.returncode:
        raise ClusterError(f"{' '.join(map(str, argv))} exited {r.returncode}: {(r.stderr or '').strip()}")
    return r


def _wait(pred, timeout: float, what: str, step: float = 0.05) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(step)


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(comm, state) of a process, None when gone; zombies count as gone later."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.index("(") + 1:raw.rindex(")")], raw[raw.rindex(")") + 2]


def _running(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[1] not in "ZX"


class LocalSlurmCluster:
    def __init__(self, dir: str | os.PathLike | None = None, nodes: int = 3,
                 gpus_per_node: int = 2, accounting: bool | None = None,
                 instance: config.Instance = config.SHARED, devices: dict | None = None):
        """`instance`: the machine-wide names and ports (config.SHARED, or config.SECOND to
        run beside the shared cluster); `devices`: node -> how many of its gpus_per_node
        fake GPUs really exist (gres.conf), where Slurm (slurm.conf) still counts them all."""
        if nodes < 1 or gpus_per_node < 0:
            raise ValueError("need nodes >= 1 and gpus_per_node >= 0")
        self.dir = Path(dir or default_dir()).absolute()
        if any(ch.isspace() for ch in str(self.dir)):  # slurm.conf cannot quote paths
            raise ValueError(f"cluster dir must not contain whitespace: {str(self.dir)!r}")
        self.nodes, self.gpus_per_node = nodes, gpus_per_node
        self.instance, self.devices = instance, dict(devices or {})
        if accounting is None:  # accounting when its packages are installed
            accounting = all(which(t) for t in ("slurmdbd", "mariadbd", "mariadb-install-db", "sacctmgr"))
        self.accounting = accounting
        self.node_names = [f"node{k}" for k in range(1, nodes + 1)]
        self.conf = self.dir / "etc" / "slurm.conf"
        self._state = self.dir / "cluster.json"

    def __repr__(self) -> str:
        extra = "" if self.instance is config.SHARED else f", instance={self.instance.prefix!r}"
        extra += f", devices={self.devices}" if self.devices else ""
        return (f"LocalSlurmCluster({str(self.dir)!r}, nodes={self.nodes}, "
                f"gpus_per_node={self.gpus_per_node}{extra})")

    @classmethod
    def load(cls, dir=None) -> "LocalSlurmCluster | None":
        """The cluster last started in `dir` (up or not), with its recorded shape."""
        path = Path(dir or default_dir()) / "cluster.json"
        try:
            s = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls(s["dir"], s["nodes"], s["gpus_per_node"], s["accounting"],
                   config.INSTANCES[s.get("instance", config.SHARED.prefix)], s.get("devices"))

    # ---- client side -------------------------------------------------------
    def env(self) -> dict[str, str]:
        """Variables a Slurm client needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf), "PATH": os.environ.get("PATH", os.defpath)}

    def client_env(self) -> dict[str, str]:
        """os.environ without an outer job's SLURM_* variables, plus env()."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith(CLIENT_PREFIXES)}
        return {**keep, **self.env()}

    @contextlib.contextmanager
    def as_client(self):
        """os.environ pointed at this cluster for the block: SLURM_CONF set, an outer job's
        SLURM_* variables dropped (they would leak into nested submissions); restored after."""
        saved = dict(os.environ)
        for key in [k for k in os.environ if k.startswith(CLIENT_PREFIXES)]:
            del os.environ[key]
        os.environ.update(self.env())
        try:
            yield self
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def wait_idle(self, timeout: float = 30) -> None:
        """Until every node answers `idle` in sinfo."""
        seen = {"out": ""}

        def all_idle() -> bool:
            r = _run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, env=self.client_env())
            seen["out"] = (r.stdout + r.stderr).strip()
            states = dict(line.split()[:2] for line in r.stdout.splitlines() if line.strip())
            return all(states.get(n) == "idle" for n in self.node_names)
        try:
            _wait(all_idle, timeout, f"{self.nodes} idle nodes", step=0.1)
        except ClusterError as e:
            raise ClusterError(f"{e}; sinfo said: {seen['out']!r}") from None

    # ---- state -------------------------------------------------------------
    def _pidfiles(self) -> dict[Path, str]:
        """pid file -> expected process name, for every daemon this shape runs."""
        names = ["munged"] + (["mariadbd", "slurmdbd"] if self.accounting else []) + ["slurmctld"]
        files = {self.dir / "run" / f"{n}.pid": n for n in names}
        files.update({self.dir / "run" / f"slurmd-{n}.pid": "slurmd" for n in self.node_names})
        return files

    def _our_pid(self, pidfile: Path, comm: str) -> int | None:
        """The pid in `pidfile` if that process is alive, named `comm` and started
        for this dir (its command line or environment names the dir)."""
        try:
            pid = int(pidfile.read_text().split()[0])
            marks = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
        except (OSError, ValueError, IndexError):
            return None
        st = _proc_stat(pid)
        ok = st and st[0] == comm[:15] and st[1] not in "ZX" and str(self.dir).encode() in marks
        return pid if ok else None

    def is_up(self) -> bool:
        """This dir's cluster runs, with this object's shape, every daemon alive."""
        other = LocalSlurmCluster.load(self.dir)
        if other is None or (other.nodes, other.gpus_per_node, other.accounting, other.instance,
                             other.devices) != (self.nodes, self.gpus_per_node, self.accounting,
                                                self.instance, self.devices):
            return False
        return all(self._our_pid(f, c) for f, c in self._pidfiles().items())

    # ---- up ----------------------------------------------------------------
    def up(self, timeout: float = 60) -> bool:
        """Start the cluster; False when one of this shape already runs here."""
        with _locked():
            return self._up(timeout)

    def _up(self, timeout: float) -> bool:
        if self.is_up():
            return False
        reason = skip_reason()
        if reason:
            raise ClusterError(reason)
        self.down()  # a crashed run, or one of another shape, in this dir
        owner = net.owner(self.instance)
        if owner and owner != str(self.dir):
            prev = LocalSlurmCluster.load(owner)
            if prev and any(prev._our_pid(f, c) for f, c in prev._pidfiles().items()):
                raise ClusterError(f"a local cluster from {owner} holds the {self.instance.prefix}-* names; "
                                   f"stop it: python -m tests.slurm_cluster down --dir {owner}")
            LocalSlurmCluster(owner, instance=self.instance).down()  # its leftovers
        for port in self.instance.ports.values():  # an occupied port would fool the readiness checks
            if _listening("127.0.0.1", port):
                raise ClusterError(f"port {port} is already in use on this machine")
        config.write_files(self)
        self._state.write_text(json.dumps({  # first, so that down() can clean a failed start
            "dir": str(self.dir), "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
            "accounting": self.accounting, "instance": self.instance.prefix,
            "devices": self.devices, "net": net.snapshot()}))
        try:
            net.up(self.dir, self.nodes, self.instance)
            self._daemon(["munged", *config.munged_args(self)])
            if self.accounting:
                self._start_accounting()
            self._daemon(["slurmctld", "-f", self.conf])
            # Clients retry a refused connection only after a second: wait for the port.
            _wait(lambda: _listening(self.instance.controller_addr, self.instance.ports["slurmctld"]),
                  30, "slurmctld")
            for name in self.node_names:
                self._start_slurmd(name)
            self.wait_idle(timeout)
        except Exception as e:
            tails = config.log_tails(self)
            self.down()
            raise ClusterError(f"{e}\n{tails}") from e
        except BaseException:  # KeyboardInterrupt: still leave nothing behind
            self.down()
            raise
        return True

    def _start_slurmd(self, name: str) -> None:
        k = self.node_names.index(name) + 1
        self._daemon(["nsenter", f"--net=/run/netns/{self.instance.netns(k)}", "unshare", "--uts",
                      "--mount", "--propagation", "private", "/bin/sh", "-c", NODE_SH, "sh",
                      name, self.dir / "etc" / "hosts", which("slurmd"), "-f", self.conf, "-N", name])

    def netns(self, name: str) -> str:
        """A node's network namespace (/run/netns/<it>)."""
        return self.instance.netns(self.node_names.index(name) + 1)

    # ---- a slow port: a rate limit on a node's veth, one end or both ---------
    def _tc_ends(self, name: str, both: bool) -> list:
        """tc's namespace arguments and device for the node's end of its veth (eth0 in its
        namespace: what it sends) and, with `both`, the bridge's end (what it receives)."""
        ends = [["-n", self.netns(name), "dev", "eth0"]]
        if both:
            ends.append(["dev", self.instance.veth(self.node_names.index(name) + 1)])
        return ends

    def limit_rate(self, name: str, rate: str = "20mbit", both: bool = False) -> None:
        """Shape what the node sends (tc's token bucket on eth0 in its namespace) and, with
        `both`, what it receives (the same on the bridge's end of its veth), as a degraded
        port would; `unlimit` undoes it. Callers undo it in a `finally` or a finalizer."""
        for *where, dev, veth in self._tc_ends(name, both):
            _run([which("tc") or "tc", *where, "qdisc", "replace", dev, veth, "root", "tbf",
                  "rate", rate, "burst", "32kbit", "latency", "400ms"])

    @contextlib.contextmanager
    def throttled(self, name: str, rate: str = "40mbit"):
        """The node's port rate-limited both ways while the body runs, lifted after it,
        whatever the body did."""
        try:
            self.limit_rate(name, rate, both=True)
            yield
        finally:
            self.unlimit(name)

    def unlimit(self, name: str) -> None:
        """Lift the node's rate limits, both ends (one never set is no error)."""
        for *where, dev, veth in self._tc_ends(name, True):
            r = _run([which("tc") or "tc", *where, "qdisc", "del", dev, veth, "root"], check=False)
            if r.returncode and not any(m in r.stderr for m in ("No such file", "Cannot find",
                                                                 "Cannot delete qdisc with handle of zero")):
                raise ClusterError(f"tc could not lift {name}'s rate limit: {r.stderr.strip()}")

    # ---- losing a node and getting it back ------------------------------------
    def kill_node(self, name: str) -> set[int]:
        """SIGKILL every process in a node's namespace (slurmd, slurmstepd, the job's
        tasks), as if the node lost power; returns their pids. `restart_node` undoes it."""
        with _locked():
            pids = net.ns_pids(self.netns(name))
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _wait(lambda: not any(_running(p) for p in pids), 10, f"{name}'s processes to die")
        return pids

    def connections(self, name: str, comm: str = "python") -> int:
        """Established TCP connections of processes named `comm` inside a node: a rank
        past its rendezvous holds one to the store and one to each peer."""
        ns = f"--net=/run/netns/{self.netns(name)}"
        r = _run([which("nsenter"), ns, which("ss") or "ss", "-Htnp", "state", "established"],
                 check=False)
        return sum(f'(("{comm}",' in line for line in r.stdout.splitlines())

    def node_state(self, name: str) -> str:
        """sinfo's short state of one node: idle, mix, alloc, down*, idle* (* = not responding)."""
        r = _run(["sinfo", "-h", "-N", "-n", name, "-o", "%t"], check=False, env=self.client_env())
        return r.stdout.strip()

    def restart_node(self, name: str, timeout: float = 60) -> None:
        """Start a killed node's slurmd again and return the node to service: it then
        answers and takes jobs, whatever Slurm had marked it (DOWN, NOT_RESPONDING)."""
        with _locked():
            if not self._our_pid(self.dir / "run" / f"slurmd-{name}.pid", "slurmd"):
                self._start_slurmd(name)
        # A node Slurm marked DOWN comes back on its own (ReturnToService=2) once it
        # registers; resume is for one still marked, and is refused for one that is not.
        end = time.monotonic() + timeout
        while (state := self.node_state(name)) not in ("idle", "mix", "alloc"):
            if time.monotonic() > end:
                raise ClusterError(f"{name} did not come back within {timeout:.0f}s (sinfo: {state!r})")
            if state.startswith(("down", "drain", "fail")) and not state.endswith("*"):
                _run(["scontrol", "update", f"nodename={name}", "state=resume"], check=False,
                     env=self.client_env())
            time.sleep(0.5)

    def _daemon(self, argv: list) -> None:
        """Run a daemon that detaches itself (or via `setsid -f`); its output goes
        to a log file, not a pipe, so this returns once it has forked away."""
        argv = [which(argv[0]) or argv[0], *argv[1:]]
        log = self.dir / "log" / f"start-{Path(str(argv[0])).name}.out"
        with open(log, "a") as out:
            _run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                 capture_output=False, env=self.client_env(),
                 preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, NICE))

    def _start_accounting(self) -> None:
        """MariaDB + slurmdbd. Creating slurmdbd's tables and adding the cluster
        takes seconds, so that is done once per dir into db-template, and each
        up starts from a copy of it (no jobs in it, so every run starts clean)."""
        db, template = self.dir / "db", self.dir / "db-template"
        if not (template / "READY").exists():
            shutil.rmtree(template, ignore_errors=True)
            _run([which("mariadb-install-db"), "--no-defaults", f"--datadir={db}", "--user=root",
                  "--auth-root-authentication-method=normal", "--skip-test-db",
                  *config.MARIADB_OPTS], timeout=120)
            self._start_db_daemons()
            _run(["sacctmgr", "-i", "add", "cluster", self.instance.cluster_name], env=self.client_env())
            for name in ("slurmdbd", "mariadbd"):  # a clean shutdown makes a consistent copy
                pid = self._our_pid(self.dir / "run" / f"{name}.pid", name)
                if pid and not self._terminate({pid}, grace=60):
                    raise ClusterError(f"{name} did not shut down cleanly")
            db.rename(template)
            (template / "READY").touch()
        shutil.copytree(template, db)
        self._start_db_daemons()

    def _start_db_daemons(self) -> None:
        self._daemon(["setsid", "-f", which("mariadbd"), *config.mariadbd_args(self)])
        _wait(lambda: _listening("127.0.0.1", self.instance.ports["mariadb"]), 30, "MariaDB")
        self._daemon(["slurmdbd"])
        _wait(lambda: _listening(self.instance.controller_addr, self.instance.ports["slurmdbd"]), 30,
              "slurmdbd")

    # ---- down --------------------------------------------------------------
    def down(self) -> None:
        """Stop what this dir started; safe to call twice or after a failed up."""
        with _locked():
            self._down()

    def _down(self) -> None:
        try:
            snap = json.loads(self._state.read_text()).get("net")
        except (OSError, ValueError):
            snap = None
        pids = {p for f in (self.dir / "run").glob("*.pid")
                if (p := self._our_pid(f, f.stem.split("-")[0]))}
        owns_net = net.owner(self.instance) in ("", str(self.dir))  # never another dir's cluster
        namespaces = net.namespaces(self.instance) if owns_net else []
        for ns in namespaces:  # slurmstepd and job tasks, all inside our namespaces
            pids |= net.ns_pids(ns)
        self._terminate(pids)
        if owns_net:
            net.down(snap, self.instance)
        for f in (self.dir / "run").glob("*.pid"):
            f.unlink(missing_ok=True)
        self._state.unlink(missing_ok=True)

    @staticmethod
    def _terminate(pids: set[int], grace: float = 5) -> bool:
        """SIGTERM, then SIGKILL after `grace` seconds; True if SIGTERM sufficed."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            try:
                _wait(lambda: not any(_running(p) for p in pids), grace, "daemons to stop")
                return sig == signal.SIGTERM
            except ClusterError:
                continue
        return False
