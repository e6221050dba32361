"""`python -m frameworks.common.forkserver FRAMEWORK`: a local point's CPU ranks forked from
one interpreter that imported the framework once (the launcher's side:
launchers/backends/forked.py).

A PyTorch rank spent some 3 s of CPU importing torch and torch._dynamo (which its optimizer
imports) before its first step: a 4-rank point 12 s of a 2-core machine. This process
imports what the framework's adapter lists in `preload` (third-party modules only: the
suite's own read their environment when imported, so each rank imports them itself), then
forks one rank per request, started as its command (`python -m frameworks --spec SPEC`)
starts it: a session of its own, the parent-death signal (contract/owner.py: this process
ends with its launcher, and its ranks with it), its environment, its log as stdout and
stderr, stdin /dev/null, and that command as its title in `ps`. Never on a GPU: CUDA does not survive a fork.

It refuses (and the launcher starts each rank as a new interpreter) where a preload fails,
where one leaves a Python thread running (a fork keeps only the forking thread), or where
setproctitle is not installed (a rank would not say what it runs).

One JSON object a line. In: {"argv", "env", "log", "cwd"} per rank. Out: {"ready": true} or
{"refused": why} once; then {"pid"} per rank, and {"ended": pid, "code"} as each ends, its
code as subprocess's returncode (-N: signal N). Its stdin's end ends it.
Standard library, contract/ and the registry only (and setproctitle): this runs in the
framework's Python.
"""
import ctypes
import importlib
import json
import os
import runpy
import select
import sys
import threading
import traceback

from contract import owner
from frameworks import registry

PR_SET_NAME = 15  # <linux/prctl.h>
LOG_LEVEL = ("TORCH_CPP_LOG_LEVEL", "ERROR")  # what frameworks/__main__.py sets before importing


def preload(framework: str) -> str:
    """Imports the adapter's `preload`: '' where forking is then safe, else why not."""
    os.environ.setdefault(*LOG_LEVEL)
    try:
        import setproctitle
    except ImportError:
        return "setproctitle is not installed"
    # It finds the title's memory through the environment, which a rank's replaces: first here
    title(setproctitle.getproctitle())
    for name in registry.get(framework).preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the rank, started whole, says what it is in its record
            return f"importing {name} failed: {type(exc).__name__}: {exc}"
    threads = threading.active_count()  # a native pool (numpy's OpenBLAS) stops itself for a fork
    return "" if threads == 1 else f"importing {framework} left {threads - 1} thread(s) running"


def title(text: str) -> None:
    """`text` as this process's command line in `ps`; its name stays the interpreter's (which
    setproctitle sets to the text's first 15 characters)."""
    import setproctitle
    setproctitle.setproctitle(text)
    ctypes.CDLL(None).prctl(PR_SET_NAME, os.path.basename(sys.executable).encode()[:15], 0, 0, 0)


def rank(request: dict, die_with_server) -> None:
    """In the forked child: become the rank `request` describes, and run its command (`python
    -m MODULE ARGS`); never returns."""
    code = 1
    try:
        os.setsid()
        if die_with_server is not None:
            die_with_server()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((null, 0), (log, 1), (log, 2)):
            os.dup2(fd, target)
        for fd in map(int, os.listdir("/proc/self/fd")):  # the server's pipes, the listing's own
            if fd > 2:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        title(" ".join(argv))
        if "numpy" in sys.modules:  # its global generator was seeded once, in the server
            sys.modules["numpy"].random.seed()
        sys.argv = argv[2:]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)  # the worker's os._exit ends it
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def serve(out: int) -> None:
    """Forks a rank per request line on stdin, says each one's pid and end on `out`."""
    die_with_server, buffered, children = owner.die_with_owner(), b"", set[int]()
    while True:
        ready, _, _ = select.select([0], [], [], 0.05 if children else None)
        if ready:
            data = os.read(0, 1 << 16)
            if not data:
                return  # the launcher is done (or gone): its ranks go with this process
            buffered += data
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    rank(json.loads(line), die_with_server)
                children.add(pid)
                _say(out, {"pid": pid})
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            _say(out, {"ended": pid, "code": os.waitstatus_to_exitcode(status)})


def _say(out: int, message: dict) -> None:
    os.write(out, json.dumps(message).encode() + b"\n")


def main() -> None:
    out = os.dup(1)
    os.dup2(2, 1)  # what an import prints goes to stderr; stdout is the answers'
    why = preload(sys.argv[1])
    _say(out, {"refused": why} if why else {"ready": True})
    if not why:
        serve(out)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
