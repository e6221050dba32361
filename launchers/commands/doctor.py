"""`python -m launch doctor cluster=SITE [launcher settings]`: would a sweep run on this
site? Checked before the first sweep, as dgxc-benchmarking's system_info does before its runs
(docs/containers.md, "launch doctor").

    python -m launch doctor cluster=mysite
    python -m launch doctor cluster=localtest_charliecloud cluster.containers.pytorch=IMG

One line per check, in this order: `ok`, `FAILED` and why, or `skipped` and why.

    slurm     the controller answers (scontrol ping)
    submit    sbatch --test-only accepts the site's partition, account, QoS, constraint and
              sbatch_args for a one-node job
    node      one step on one node in the suite's Python, from the checkout, writing a file
              to the output folder that this host then reads: both are visible there
    gres      the partition's GPUs (gres) agree with cluster.gpus and max_gpus_per_node
    nccl      cluster.env's NCCL_SOCKET_IFNAME and NCCL_IB_HCA name what the node has
    image F   for each framework with an image: its runtime is here, and on one node the
              image starts and imports the framework (its version as the image has it)
    versions F  the image's releases of the framework and of what its worker imports beside
              it, against the adapter's supported ones (contract/versions.py): FAILED where
              every point would end `unsupported`

Exit status 1 when a check failed (a sweep would fail), else 0; bad input is one line and
exit status 2. Every job it starts is a one-node srun with a time limit, named
dlbench-doctor-<token>, waited for at most STEP_TIMEOUT_S; whatever of that name Slurm still
holds at the end is cancelled, so nothing is left queued.
"""
import json
import os
import secrets
import shutil
import subprocess
import sys
import time

import launchers
from contract import exits, records, versions
from contract.point import Framework
from launchers.backends import containers
from launchers.backends.slurm import job
from frameworks import registry
from launchers.commands import doctor_node
from launchers.plan import one_point, points
from launchers.suite import ROOT, ConfigError

STEP_TIMEOUT_S = 180   # one step: queueing, the image's start, the framework's import
ASK_TIMEOUT_S = 30     # one question to the controller
# A rank's imports: first the versions of the adapter's releases as the image has them (its
# packages' metadata, nothing imported), then the adapter's training session as a rank loads
# it (the suite's code in the image's Python, then the framework), and the framework's version
# (the module its adapter names). A constant program; the framework is its argument.
VERSION_PROGRAM = ("import importlib, json, sys; from contract import versions; "
                   "from frameworks import registry; a = registry.get(sys.argv[1]); "
                   "print('releases', json.dumps(versions.found(a.releases)), flush=True); "
                   "a.load(a.bench('train').session); "
                   "print(importlib.import_module(a.import_name).__version__)")


class Doctor:
    def __init__(self, point, out: str):
        self.point, self.out = point, out
        self.name = f"dlbench-doctor-{secrets.token_hex(4)}"
        self.lines: list = []
        self.failed = 0

    def say(self, status: str, check: str, detail: str) -> None:
        self.failed += status == "FAILED"
        line = f"{status:<8} {check}: {detail}"
        self.lines.append(line)
        print(line, flush=True)

    # ---- Slurm ---------------------------------------------------------------------------
    def ask(self, argv, timeout=ASK_TIMEOUT_S, env=None):
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=self.ask_env() if env is None else env)

    def job_options(self) -> list:
        """The site's placement of a one-node job, as sbatch and srun take it."""
        cl = self.point.cluster
        opts = [f"--{k}={getattr(cl, k)}" for k in ("partition", "account", "qos", "constraint")
                if getattr(cl, k) not in (None, "")]
        return opts + (["--gpus-per-node=1"] if cl.gpus else [])

    def slurm(self) -> bool:
        if launchers.get(self.point.launcher.name).no_site:   # auto's choice: no site answered
            self.say("FAILED", "slurm", f"launcher=auto chose {self.point.launcher.name}: "
                     f"{self.point.launcher.auto or 'no Slurm here'}")
            return False
        if not (shutil.which("sbatch") and shutil.which("srun")):
            self.say("FAILED", "slurm", "sbatch and srun are not on PATH (a Slurm login node has them)")
            return False
        try:
            out = self.ask(["scontrol", "ping"])
        except subprocess.TimeoutExpired:
            out = None
        if out is None or out.returncode != 0 or "UP" not in out.stdout:
            why = "no answer within 30 s" if out is None else one_line(out.stdout + out.stderr)
            self.say("FAILED", "slurm", f"the controller does not answer (scontrol ping: {why})")
            return False
        self.say("ok", "slurm", one_line(out.stdout))
        return True

    def submit(self) -> bool:
        extra = [f"--{k}" if v is True else f"--{k}={v}"
                 for k, v in self.point.cluster.sbatch_args.as_dict().items() if v is not False]
        argv = ["sbatch", "--test-only", f"--job-name={self.name}", "--nodes=1", "--ntasks=1",
                "--time=1", *self.job_options(), *extra, "--wrap=true"]
        out = self.ask(argv)
        asked = placement(self.point.cluster)
        if out.returncode != 0:
            errors = [ln.split("error:", 1)[1].strip() for ln in out.stderr.splitlines() if "error:" in ln]
            self.say("FAILED", "submit", f"sbatch --test-only refused {asked}: "
                     f"{'; '.join(errors) or one_line(out.stderr)}")
            return False
        self.say("ok", "submit", f"sbatch --test-only accepts {asked}")
        return True

    def step(self, argv, env=None):
        """One step to its end, at most STEP_TIMEOUT_S -> (returncode or None, output)."""
        full = ["srun", f"--job-name={self.name}", *self.job_options(), *argv]
        try:
            out = self.ask(full, timeout=STEP_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            self.cancel()
            return None, f"no end within {STEP_TIMEOUT_S} s (queued behind other jobs?); cancelled"
        return out.returncode, (out.stdout + out.stderr).strip()

    # ---- one node ------------------------------------------------------------------------
    def node(self):
        """The checkout and the output folder from one node -> the node's facts, or None."""
        probe = os.path.join(self.out, f".{self.name}.json")
        code, text = self.step(["--nodes=1", "--ntasks=1", "--time=2", f"--chdir={ROOT}",
                                sys.executable, "-m", "launchers.commands.doctor_node", probe])
        got = records.read_json(probe)
        if os.path.exists(probe):
            os.unlink(probe)
        if code != 0:
            self.say("FAILED", "node", f"the suite's Python ({sys.executable}) did not run from "
                     f"{ROOT} on a node: {one_line(text)}")
            return None
        if not got:
            self.say("FAILED", "node", f"a node ran the suite, but what it wrote to {self.out} "
                     "is not here: the output folder is not shared with the nodes")
            return None
        self.say("ok", "node", f"{got['host']} sees the checkout {ROOT} and writes to "
                 f"the output folder {self.out}")
        return got

    def gres(self) -> None:
        cl = self.point.cluster
        argv = ["sinfo", "-h", "-N", "-o", "%N %G"] + (["-p", str(cl.partition)] if cl.partition else [])
        counts = {}
        for line in self.ask(argv).stdout.splitlines():
            name, _, gres = line.partition(" ")
            counts[name] = max([int(g.split("(")[0].split(":")[-1]) for g in gres.split(",")
                                if g.startswith("gpu") and g.split("(")[0].split(":")[-1].isdigit()] or [0])
        if not counts:
            self.say("FAILED", "gres", f"no node in partition {cl.partition or '(default)'}")
            return
        shown = ", ".join(f"{n} gpu:{c}" for n, c in sorted(counts.items()))
        most, want = max(counts.values()), int(cl.max_gpus_per_node or 1)
        if cl.gpus and most < want:
            self.say("FAILED", "gres", f"cluster.gpus is true and max_gpus_per_node={want}, but the "
                     f"nodes have {shown}: a point that asks for {want} GPUs per node never starts")
        elif not cl.gpus and most:
            self.say("ok", "gres", f"{shown}; cluster.gpus is false, so ranks get no GPU")
        else:
            self.say("ok", "gres", shown + (f" (cluster.max_gpus_per_node={want})" if cl.gpus else ""))

    def nccl(self, facts) -> None:
        env = {str(k): str(v) for k, v in self.point.cluster.env.items()}
        if not any(k in env for k in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")):
            self.say("skipped", "nccl", "the site sets neither NCCL_SOCKET_IFNAME nor NCCL_IB_HCA "
                     "(cluster.env)")
            return
        if facts is None:
            self.say("skipped", "nccl", "no node to compare with (see `node`)")
            return
        bad = doctor_node.agrees(env, facts["interfaces"], facts["hcas"])
        if bad:
            self.say("FAILED", "nccl", f"on {facts['host']}: " + "; ".join(bad))
        else:
            self.say("ok", "nccl", f"{facts['host']} has what NCCL_SOCKET_IFNAME and NCCL_IB_HCA name")

    def image(self, fw: str) -> None:
        """The framework's image on one node: started by the runtime, the framework imported.
        The point's own framework keeps its framework.container, so refusals name that key."""
        own = self.point.framework
        point = self.point.replace(framework=Framework(fw, container=own.container if own.name == fw
                                                       else None), nodes=1, gpus_per_node=1, world_size=1)
        check, image = f"image {fw}", point.container_image
        try:
            containers.require(point)
        except ConfigError as exc:
            self.say("FAILED", check, str(exc))
            return
        box = containers.step(point, image)
        python = point.cluster.container_python or "python"
        argv = ["--nodes=1", "--ntasks=1", "--time=3", f"--chdir={ROOT}", *box.srun,
                *[str(a) for a in point.cluster.srun_args], *box.wrap, python, "-c", VERSION_PROGRAM, fw]
        env = containers.environ(point, self.ask_env(root_on_path=True))
        code, text = self.step(argv, env=env)
        found = [json.loads(ln.split(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("releases {")]
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("releases {"))
        last = text.splitlines()[-1] if text else ""
        if code != 0:
            self.say("FAILED", check, f"{point.cluster.container_runtime} {image} on a node: "
                     f"{one_line(text)}")
        else:
            self.say("ok", check, f"{point.cluster.container_runtime} ran {image} on a node: "
                     f"{fw} {last} imports there")
        if found:
            self.releases(fw, found[0])

    def releases(self, fw: str, found: dict) -> None:
        """The image's versions against the releases the framework's adapter supports."""
        pinned = versions.pins()
        said = [versions.judge(r, found.get(r.package), pinned) for r in registry.get(fw).releases]
        refused = [words for no, words in said if no]
        self.say("FAILED" if refused else "ok", f"versions {fw}",
                 "; ".join(refused or [words for _, words in said])
                 + " (docs/frameworks/README.md, \"Supported versions\")")

    @staticmethod
    def ask_env(root_on_path=False) -> dict:
        """Ours, without an outer job's Slurm variables (they would shape the doctor's jobs)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(job.OUTER_JOB_PREFIXES) or k in job.KEEP}
        if root_on_path:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        return env

    def images(self):
        """framework -> image of every framework the site (or framework.container) names."""
        named = {str(k): v for k, v in self.point.cluster.containers.items() if v}
        if self.point.framework.container:
            named[self.point.framework.name] = self.point.framework.container
        return named

    def cancel(self) -> None:
        """Whatever job of this doctor's name Slurm still holds."""
        try:
            left = self.ask(["squeue", "-h", "-n", self.name, "-o", "%i"]).stdout.split()
            if left:
                self.ask(["scancel", *left])
        except (OSError, subprocess.SubprocessError):
            pass

    def run(self) -> int:
        t0 = time.monotonic()
        answered = False
        try:
            answered = self.slurm()
            if answered and self.submit():
                facts = self.node()
                self.gres()
                self.nccl(facts)
                named = self.images()
                if not named:
                    self.say("skipped", "image", "the site names no container image (ranks run in "
                             "the frameworks' own interpreters)")
                for fw in named:
                    self.image(fw)
            else:
                self.say("skipped", "the rest", "Slurm must answer and accept the job first")
        finally:
            if answered:   # else no job was asked for, and squeue would wait for no controller
                self.cancel()
        print(f"doctor: {'FAILED' if self.failed else 'ok'} in {time.monotonic() - t0:.1f} s "
              f"({self.failed} failed of {len(self.lines)}); no job left queued")
        return exits.FAILED if self.failed else exits.OK


def placement(cl) -> str:
    return ", ".join(f"{k} {getattr(cl, k) or '(default)'}" for k in ("partition", "account", "qos"))


def one_line(text: str) -> str:
    return " / ".join(ln.strip() for ln in str(text).strip().splitlines() if ln.strip())[-600:] or "no output"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        overrides = one_point.overrides(argv, __doc__)
    except one_point.Done as done:
        return done.code
    try:
        cfg = one_point.compose(overrides)
        out = os.path.abspath(str(cfg.output_root))
        point = points.make_point(cfg, out, 0, overrides, commit=None)
        os.makedirs(out, exist_ok=True)
    except one_point.bad_input() as exc:
        return one_point.refuse(exc)
    no_site = launchers.get(point.launcher.name).no_site
    if no_site and not point.launcher.auto:   # asked for, not auto's choice
        print(f"error: {no_site}: launch doctor checks a Slurm site (launcher=slurm)", file=sys.stderr)
        return exits.REFUSED
    return Doctor(point.replace(name="doctor"), out).run()
