"""A local point's CPU ranks forked from a forkserver of their framework
(frameworks/common/forkserver.py), which imported it once, instead of each rank importing it
anew: some 3 s of CPU a PyTorch rank. The local launcher keeps one server per interpreter,
framework and environment (but the rank's own variables: what an import reads is the same)
for as long as it runs; each ends with it, and its ranks with it.

Only ranks that would start as `python -m frameworks --spec SPEC` in the suite's own
interpreter, of a framework that lists its preloads, on this machine's CPU (never a GPU: CUDA
does not survive a fork). A server that refuses (it says why, once) or fails leaves its ranks to start as new
interpreters, as every other rank does.
"""
import json
import queue
import select
import signal
import subprocess
import sys
import threading
from typing import Callable, Optional

from contract import owner, statuses
from frameworks import registry
from launchers import auto
from launchers.suite import ROOT

# A rank's own variables: not what its framework's import reads (launchers/backends/local.py)
PER_RANK = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
READY_S = 300   # a server's imports, on a loaded machine
FORK_S = 30     # a fork's answer


class Rank:
    """A forked rank as the step runner reads a subprocess.Popen: pid, poll, wait, returncode."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: Optional[int] = None
        self._ended = threading.Event()

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"rank (pid {self.pid})", timeout or 0)
        return self.returncode

    def end(self, code: int) -> None:
        self.returncode = code
        self._ended.set()


class Server:
    """One forkserver: started, then asked for ranks until closed."""

    def __init__(self, python: str, framework: str, env: dict, log: Callable[..., object] = print):
        self.log = log
        self.proc = subprocess.Popen([python, "-m", "frameworks.common.forkserver", framework],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=owner.die_with_owner())
        self.ranks: dict = {}
        self.ended: dict = {}       # ends read before their rank was registered
        self.lock = threading.Lock()
        self.started: queue.Queue = queue.Queue()
        self.refused = self._ready()
        if self.refused is None:
            threading.Thread(target=self._read, name="dlbench-forkserver", daemon=True).start()
        else:
            self.close()

    def _ready(self) -> Optional[str]:
        """None once the server has imported its framework, else why it will not fork."""
        assert self.proc.stdout is not None
        if not select.select([self.proc.stdout], [], [], READY_S)[0]:
            return f"its imports took over {READY_S} s"
        line = self.proc.stdout.readline()
        if not line:
            return f"it ended ({self.proc.wait()}) before it was ready"
        try:
            return json.loads(line).get("refused")
        except (ValueError, AttributeError):
            return f"it said {line[:200]!r}, not that it was ready"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            said = json.loads(line)
            if "pid" in said:
                self.started.put(said["pid"])
                continue
            with self.lock:
                rank = self.ranks.pop(said["ended"], None)
                if rank is None:
                    self.ended[said["ended"]] = said["code"]
            if rank is not None:
                rank.end(said["code"])
        with self.lock:  # the server ended: its parent-death signal killed its ranks
            self.refused = "it ended"
            gone, self.ranks = list(self.ranks.values()), {}
        if gone:
            self.log(f"the forkserver (pid {self.proc.pid}) ended "
                     f"({statuses.describe_end({'exit_code': self.proc.wait()})}): its "
                     f"{len(gone)} running rank(s) were killed with it")
        for rank in gone:
            rank.end(-signal.SIGKILL)

    def start(self, argv: list, env: dict, log: str) -> Optional[Rank]:
        """The rank forked, or None where the server cannot fork it (it is gone)."""
        assert self.proc.stdin is not None
        request = {"argv": argv, "env": env, "log": log, "cwd": str(ROOT)}
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            pid = self.started.get(timeout=FORK_S)
        except (OSError, queue.Empty):
            self.refused = "it stopped answering"
            self.close()
            return None
        rank = Rank(pid)
        with self.lock:
            if pid in self.ended:
                rank.end(self.ended.pop(pid))
            else:
                self.ranks[pid] = rank
        return rank

    def close(self) -> None:
        """Its stdin closed ends it (its ranks have ended by now, or end with it)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Servers:
    """The local launcher's forkservers, by interpreter, framework and environment."""

    def __init__(self, log: Callable[..., object] = print):
        self.log = log
        self.servers: dict = {}
        self.closed = False

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        for server in self.servers.values():
            server.close()
        self.servers, self.closed = {}, True

    def start(self, point, argv: list, env: dict, log: str) -> Optional[Rank]:
        """The rank forked, or None where it starts as a new interpreter."""
        if self.closed or not forkable(point, argv):
            return None
        shared = {k: v for k, v in env.items() if k not in PER_RANK}
        key = (argv[0], point.framework.name, tuple(sorted(shared.items())))
        server = self.servers.get(key)
        if server is None:
            server = self.servers[key] = Server(argv[0], point.framework.name, shared, self.log)
            if server.refused:
                self.log(f"{point.framework.name}'s ranks start as new interpreters: its "
                         f"forkserver says {server.refused}")
        return None if server.refused else server.start(argv, env, log)


def forkable(point, argv: list) -> bool:
    """Whether this rank may be forked: launcher.forkserver (true unless set false), the
    worker command in the suite's own interpreter (which has setproctitle), of a framework
    with preloads, on this machine's CPU."""
    fw = point.framework
    return (point.launcher.forkserver and argv[0] == sys.executable and argv[1:4] == ["-m", "frameworks", "--spec"]
            and not fw.container and bool(registry.get(fw.name).preload) and auto.on_cpu(point))
