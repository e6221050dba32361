"""The harness beside its bare loop, rounds alternated in one call, so that a ratio tells the
harness's cost from the machine's noise (ratio.py: the ratio and its spread):

    python -m benchmarks.gpu_check.pair POINT_DIR OUT_DIR ROUNDS KIND[,KIND]

POINT_DIR: a point of a sweep the suite ran (its point.json and first repeat's spec.json);
KIND: bare.py's (suite, torchvision). Each round: the harness's round, the suite's real rank
(the worker entry and environment the local launcher gives rank 0: launchers/backends/local.py,
worker.py), in a fresh process that writes its record to OUT_DIR/harness-NN/; then each
kind's bare round, in one process per kind that waits between its rounds (bare.py --gated;
each round rebuilt from the seed, as a fresh rank is), started at its first round so that
nothing else runs beside a round. Both sides run the same
spec (model, batch, dtype, warm-up and timed steps) under the same interpreter, working
folder and environment (threads included). A harness round's rate is its record's timed
samples over its window (analysis/figures/method.py), a bare round's the same steps over the
host clock around a sync. Prints a line per round and, last, `PAIR {json}`; exit 0 when every
harness round and one bare kind ran, 1 otherwise, 2 on bad arguments.
"""
import json
import os
import subprocess
import sys

from analysis.figures import method
from contract import paths
from launchers import sweepdir
from launchers.backends import local, ports, worker
from launchers.suite import ROOT


def harness_round(point, spec: dict, folder: str, env: dict) -> dict:
    """One run of the point's rank 0 with its record in `folder` -> its rate, threads, dtype."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, paths.SPEC_FILE)
    with open(path, "w") as f:
        json.dump(dict(spec, record_dir=folder), f, indent=1)
    with open(os.path.join(folder, paths.rank_log_name(0)), "w") as log:
        rc = subprocess.run(worker.worker_argv(point, path, sys.executable), cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT).returncode
    try:
        with open(os.path.join(folder, paths.rank_record_name(0))) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return {"error": f"rc {rc}, no record"}
    if rec["status"] != "ok":
        return {"error": f"{rec['status']}: {rec.get('error')}"}
    samples, window = method.rank_timing([s["samples"] for s in rec["steps"] if s["phase"] == "measure"],
                                         rec["window"])
    env_rec = rec["environment"]
    return {"samples_per_s": method.throughput([samples], [window]), "torch_threads": env_rec.get("torch_threads"),
            "amp_dtype": env_rec.get("autocast_dtype")}


class Bare:
    """One kind's bare loop, a round at a time (bare.py --gated)."""

    def __init__(self, python: str, spec_path: str, kind: str, rounds: int, env: dict):
        self.argv = [python, "-m", "benchmarks.gpu_check.bare", spec_path, kind, str(rounds), "--gated"]
        self.kind, self.env = kind, env
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.error: str | None = None

    def round(self):
        """Its next round's samples/s, or None (self.error says why)."""
        if self.error:
            return None
        if self.proc is None:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            self.proc.stdin.write("round\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        for line in self.proc.stdout:
            if line.startswith("ROUND "):
                return json.loads(line[len("ROUND "):])["samples_per_s"]
            self.lines.append(line.rstrip())
        self.proc.wait()
        last = [x for x in self.lines if x.strip()]
        self.error = f"rc {self.proc.returncode}: " + (last[-1][:300] if last else "no output")
        return None

    def close(self) -> dict:
        """Its last line's figures (dtype, threads, device), once its rounds are done."""
        out = {"kind": self.kind, "error": self.error}
        if self.proc is not None and self.proc.stdin and self.proc.stdout:   # both piped (start)
            try:
                self.proc.stdin.close()
                for line in self.proc.stdout:
                    if line.startswith("BARE "):
                        out.update(json.loads(line[len("BARE "):]), error=self.error)
            except (BrokenPipeError, ValueError):   # stopped with the stage: what it said is kept
                pass
            self.proc.wait()
        return out


def main(point_dir: str, out: str, rounds: int, kinds: list, say=print) -> dict:
    point = sweepdir.read_point(point_dir)
    spec_path = os.path.join(point_dir, paths.repeat_name(0), paths.SPEC_FILE)
    with open(spec_path) as f:
        spec = json.load(f)
    env = local.rank_env(point, 0, ports.free_block(point.world_size))   # rank 0's, as launched
    python = worker.worker_argv(point, spec_path, sys.executable)[0]
    bares = [Bare(python, spec_path, kind, rounds, env) for kind in kinds]
    harness: list = []
    bare: dict[str, list] = {b.kind: [] for b in bares}
    seen: dict = {}
    stopped = None
    try:
        for r in range(rounds):
            h = harness_round(point, spec, os.path.join(out, f"harness-{r:02d}"), env)
            if "error" not in h and not seen:
                seen = h
            say(f"round {r}: harness " + (f"{h['samples_per_s']:.1f} samples/s" if "error" not in h else h["error"]))
            round_bare = [b.round() for b in bares]
            harness.append(h.get("samples_per_s"))   # a round counts once both sides ran
            for b, rate in zip(bares, round_bare):
                bare[b.kind].append(rate)
                say(f"round {r}: bare {b.kind} " + (f"{rate:.1f} samples/s" if b.error is None else b.error))
    except KeyboardInterrupt:   # the runner's stop at the stage's limit: the rounds done so far
        stopped = f"stopped after {len(harness)} of {rounds} rounds"
    found = {b.kind: b.close() for b in bares}
    for kind, info in found.items():
        info["samples_per_s"] = bare[kind]
    failed = sum(h is None for h in harness)
    error = f"{failed} of {len(harness)} harness rounds failed (records in {out})" if failed else None
    if not harness:
        error = stopped or "no round ran"
    return {"point": point.name, "rounds": len(harness), "stopped": stopped, "harness": harness, "harness_error": error,
            "harness_threads": seen.get("torch_threads"), "harness_amp_dtype": seen.get("amp_dtype"),
            "omp_num_threads": env.get("OMP_NUM_THREADS"), "bare": found}


if __name__ == "__main__":
    if len(sys.argv) != 5 or not sys.argv[3].isdigit() or int(sys.argv[3]) < 1:
        print("usage: python -m benchmarks.gpu_check.pair POINT_DIR OUT_DIR ROUNDS KIND[,KIND]", file=sys.stderr)
        sys.exit(2)
    result = main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","))
    print("PAIR " + json.dumps(result), flush=True)
    ok = result["harness_error"] is None and any(b["error"] is None for b in result["bare"].values())
    sys.exit(0 if ok else 1)
