"""Helpers for tests that run code inside a framework's own environment (.venvs/<name>),
and each framework described as data (FRAMEWORKS), which tests/integration/test_frameworks.py
runs as one table. A framework's own file keeps only what is specific to it."""
import dataclasses
import glob
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import pytest

from frameworks import registry
from tests.launching import launch

ROOT = Path(__file__).resolve().parent.parent
MODELS_CONF = ROOT / "conf" / "model"

MODELS = ("resnet50", "bert_base")
COUNT_CASES = [(m, s) for m in MODELS for s in ("tiny", "full")]
SMOKE_MEASURE_STEPS = 5  # conf/preset/smoke.yaml


def framework_python(name: str):
    """The interpreter its conf/framework/<name>.yaml names, or None for the suite's own."""
    from omegaconf import OmegaConf
    python = OmegaConf.load(ROOT / "conf" / "framework" / f"{name}.yaml").get("python")
    return str(ROOT / python) if python else None


def require_env(name: str) -> str:
    """The framework's interpreter, or skip the test saying how to build it."""
    python = framework_python(name)
    if python and not os.path.exists(python):
        pytest.skip(f"{name} environment not built: run `make env-{name}`")
    return python


# torch 2.11, as the lent GPU machines carry (the PyPI wheel with its CUDA libraries; it runs
# on a CPU): built by `make env-torch-2.11` from tests/versions/torch-2.11/requirements.txt;
# DLBENCH_TORCH_211 names another interpreter of the same requirements (one built elsewhere).
TORCH_211 = Path(os.environ.get("DLBENCH_TORCH_211") or ROOT / ".venvs" / "torch-2.11" / "bin" / "python")


def require_torch_211() -> str:
    """torch 2.11's interpreter, or skip the test saying how to build it. It is named by the
    environment's real folder, not through the clone's .venvs link: inductor keys its C++ kernels
    (/tmp/torchinductor_$USER) on compile commands that name torch's path, so every fresh clone
    compiled them again (mk/suite_venv.sh does the same for the suite's own torch)."""
    if not TORCH_211.exists():
        pytest.skip(f"no torch 2.11 environment at {TORCH_211}: run `make env-torch-2.11`")
    return str(Path(os.path.realpath(TORCH_211.parent.parent)) / TORCH_211.parent.name / TORCH_211.name)


def model_cfg(model: str, size: str) -> dict:
    """A model's resolved settings, as a run spec carries them."""
    from omegaconf import OmegaConf
    from launchers.plan.points import resolve_model
    cfg = OmegaConf.load(MODELS_CONF / f"{model}.yaml")
    cfg.size = size
    return resolve_model(cfg)


def run_in_env(python: str, code: str, *args, timeout=600) -> str:
    """Run a snippet with the framework's interpreter from the repository root (one thread:
    tests/conftest.py's one_thread_a_rank)."""
    out = subprocess.run([python, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


_COUNTS = {}


def parameter_counts(framework: str) -> dict:
    """{(model, size): count} for COUNT_CASES: frameworks.<framework>.models.parameter_count(cfg)
    of each, in ONE process of the framework's env (importing a framework once instead of once
    a case saves up to 20 s). Computed once per session (per pytest-xdist worker)."""
    if framework not in _COUNTS:
        python = require_env(framework) or sys.executable
        code = ("import json, sys; from frameworks.%s.models import parameter_count; "
                "print(json.dumps([parameter_count(c) for c in json.loads(sys.argv[1])]))"
                % framework)
        cfgs = [model_cfg(m, s) for m, s in COUNT_CASES]
        counts = json.loads(run_in_env(python, code, json.dumps(cfgs)).strip().splitlines()[-1])
        _COUNTS[framework] = dict(zip(COUNT_CASES, counts))
    return _COUNTS[framework]


def amp_gap(framework: str, amp_dtype: str = "bf16", compile: bool = False):
    """What the capability check says of AMP in this framework on this machine's CPU: None
    where it runs, else the one line its `unsupported` record carries. Tests expect `ok`
    or `unsupported` from it, so they hold on CPUs with and without bf16."""
    from frameworks.common import capability
    from tests.runspecs import run_spec
    return capability.precision_gap(framework, run_spec(precision="amp", amp_dtype=amp_dtype,
                                                        compile=compile))


def assert_unsupported(run: dict, ranks: list, gap: str) -> None:
    """A point the device cannot run: every rank said so in one line, nothing trained."""
    assert run["status"] == "unsupported", run
    assert run["error"] == f"rank 0: {gap}", run["error"]
    assert ranks and all(r["status"] == "unsupported" and r["error"] == gap for r in ranks), ranks
    assert all(not r["steps"] for r in ranks)


# ---- each framework as data -----------------------------------------------------------

CASES = ("counts", "fp32", "amp", "compile", "two_ranks", "auto")


@dataclasses.dataclass(frozen=True)
class Framework:
    """What the tests expect of one framework on this machine's CPU (smoke preset)."""
    name: str
    version: str                        # record["framework"]["version"]
    env: dict                           # environment values of every trained record
    compile_key: Optional[str]          # the environment key naming the compile mode ...
    compile_modes: tuple = (None, None)  # ... and its value with compile=false, compile=true
    compile_env: dict = dataclasses.field(default_factory=dict)  # more values when compiled
    amp_key: Optional[str] = None       # the environment key naming the AMP setting ...
    amp_labels: dict = dataclasses.field(default_factory=dict)  # ... by AMP dtype (None: fp32)
    # bf16 AMP on a CPU: "ok", "unsupported" (on every CPU), or "capability" (ok or
    # unsupported, as amp_gap says for this CPU); eager, and with compile=true.
    amp: str = "ok"
    amp_compiled: str = "ok"
    amp_error: Optional[str] = None     # how an always-unsupported AMP's one line begins
    compile_sweep: tuple = ("precision=fp32,amp",)  # overrides of the compile case (both models)
    compile_amp_dtype: str = "bf16"     # the AMP dtype the compile case asks for
    two_ranks: tuple = ("model=resnet50,bert_base", "precision=fp32")  # overrides, 2 ranks
    two_ranks_env: dict = dataclasses.field(default_factory=dict)  # every rank's, 2 ranks
    world_keys: tuple = ()              # environment keys whose value is the world size
    rank_keys: tuple = ()               # several ranks: keys whose values over the ranks are 0..world-1
    checksum_rel: float = 0.0           # the ranks' parameter checksums agree to this (0: exactly)
    compiled_loss_is_global: bool = False  # 2 ranks, compiled: every rank reports the global loss
    import_check: Optional[str] = None  # skip, with its error, where `import <this>` fails
    cases: tuple = CASES                # what test_frameworks.py runs for it
    # data=files: the loader backend its records name (`files` in cases runs it); None: no
    # pipeline yet, so data=files is `unsupported` (frameworks/common/datafiles.py: require)
    files: Optional[str] = None
    # its modes' names at compile=false, compile=true and compile=auto: its official benchmark
    # or example scripts' way to train for throughput (docs/frameworks/<name>.md;
    # tests/unit/test_modes.py holds its adapter to them)
    modes: tuple = ()

    def expected_env(self, spec: dict, world: int) -> dict:
        """The environment values a trained record of this spec must carry: the framework's,
        and in every framework the recipe's (BERT: the MLM head's P gathered positions and
        clipping at global norm 1.0; ResNet: no clipping)."""
        env = {"device": "cpu", **self.env, **RECIPES[spec["model"]["name"]]}
        compiled = bool(spec["compile"])
        if self.compile_key:
            env[self.compile_key] = self.compile_modes[compiled]
        if compiled:
            env.update(self.compile_env)
        if self.amp_key:
            amp = spec["precision"] == "amp"
            env[self.amp_key] = self.amp_labels[(spec.get("amp_dtype") or "bf16") if amp else None]
        env.update({key: world for key in self.world_keys})
        if world > 1:
            env.update(self.two_ranks_env)
        return env


# The recipe's environment values (contract/modes.py: recipe_environment) of the
# smoke preset's models, whatever the framework: the tiny BERT gathers 20 positions per
# sequence and clips at 1.0, as conf/model/bert_base.yaml says; ResNet does not clip.
RECIPES = {"bert_base": {"max_predictions_per_seq": 20, "clip_grad": True, "clip_norm": 1.0},
           "resnet50": {"clip_grad": False, "clip_norm": None}}


FRAMEWORKS = {fw.name: fw for fw in [
    Framework(
        # PyTorch's own sweeps are tests/integration/test_local_e2e.py; here its ranks' checksums.
        name="pytorch", version="2.13.0+cpu", env={}, compile_key=None, cases=("two_ranks", "auto"),
        modes=("eager", "torch.compile", "eager"),
        files="torch"),  # its data=files sweeps: tests/integration/test_data_files.py
    Framework(
        name="tensorflow", version="2.21.0", env={"keras": "3.15.1"},
        modes=("tf.function", "xla", "tf.function"),
        compile_key="jit_compile", compile_modes=(False, True), compile_env={"jit_scope": "step"},
        amp_key="policy", amp_labels={None: "float32", "bf16": "mixed_bfloat16"},
        # XLA with bf16 AMP, the combination most likely to break (fp32 + XLA is the same
        # code path with the float32 policy; XLA compiling takes 5-10 s a point here).
        compile_sweep=("precision=amp",),
        two_ranks_env={"strategy": "MultiWorkerMirroredStrategy", "communication": "RING",
                       "replicas": 2},
        checksum_rel=1e-9, cases=CASES + ("files",), files="tf.data"),
    Framework(
        name="jax", version="0.10.2",
        modes=("eager", "jit", "jit"),
        env={"jax_backend": "cpu", "jaxlib": "0.10.2", "flax": "0.12.8", "optax": "0.2.8"},
        compile_key="jit", compile_modes=(False, True),
        amp_key="amp_dtype", amp_labels={None: None, "bf16": "bf16"},
        compile_sweep=("precision=fp32",),  # test_framework_jax.py compares its losses with jit off
        two_ranks=("model=resnet50", "precision=fp32", "compile=true"),
        two_ranks_env={"cpu_collectives": "gloo"}, world_keys=("global_device_count",),
        cases=CASES + ("files",), files="grain"),
    Framework(
        name="paddle", version="3.3.1", env={},
        modes=("eager", "to_static", "eager"),
        compile_key="compile", compile_modes=("eager", "paddle.jit.to_static"),
        amp_key="amp", amp_labels={None: None, "bf16": "auto_cast O1 bfloat16"},
        # paddle.amp.auto_cast is a no-op on a CPU place in dygraph: refused, not faked;
        # under to_static a CPU without bf16 makes oneDNN abort, so the check refuses it.
        amp="unsupported", amp_compiled="capability",
        amp_error="PaddlePaddle cannot run AMP on a CPU in dynamic-graph mode",
        cases=CASES + ("files",), files="paddle.io"),
    Framework(
        name="mxnet", version="1.9.1", env={},
        modes=("imperative", "hybridize", "hybridize"),
        compile_key="compile", compile_modes=("imperative", "hybridize"),
        amp_key="amp", amp_labels={None: None, "bf16": "contrib.amp bfloat16"},
        amp="capability", amp_compiled="capability",
        two_ranks_env={"kvstore": "dist_sync"}, cases=CASES + ("files",), files="gluon"),
    Framework(
        name="mindspore", version="2.10.0", env={},
        modes=("pynative", "graph", "graph"),
        compile_key="mode", compile_modes=("PYNATIVE_MODE", "GRAPH_MODE+jit"),
        amp_key="amp", amp_labels={None: None, "fp16": "O2 fp16"},
        # precision=amp's default dtype is bf16: no CPU kernels for it; fp16 (O2 + loss
        # scaling) trains, and the compile case runs it.
        amp="unsupported", amp_error="MindSpore has no bf16 CPU kernels",
        compile_sweep=("precision=fp32,amp", "precision.amp_dtype=fp16"), compile_amp_dtype="fp16",
        two_ranks=("model=resnet50",), two_ranks_env={"comm_backend": "mccl"},
        rank_keys=("ms_rank",), checksum_rel=1e-6, cases=CASES + ("files",),
        files="mindspore.dataset"),
    Framework(
        name="oneflow", version="0.9.0", env={},
        modes=("eager", "graph", "graph"),
        compile_key="mode", compile_modes=("eager", "nn.Graph"),
        amp="unsupported", amp_error="OneFlow 0.9 has no CPU autocast",  # no CPU autocast in 0.9
        compile_sweep=(),  # fp32
        # DistributedDataParallel (eager) and the global view (nn.Graph)
        two_ranks=("model=resnet50", "compile=false,true"), checksum_rel=1e-6,
        compiled_loss_is_global=True, import_check="oneflow",
        cases=CASES + ("files",), files="oneflow.utils.data"),
]}


_READY = {}


def framework_ready(name: str):
    """The framework's interpreter (None: the suite's own), or skip the test: its env is
    not built, or `import <import_check>` fails in it (OneFlow's CUDA build can fail so),
    with the import's own last error line. Checked once per session."""
    fw = FRAMEWORKS[name]
    if name not in _READY:
        python, why = framework_python(name), None
        if python and not os.path.exists(python):
            why = f"{name} environment not built: run `make env-{name}`"
        elif fw.import_check:
            out = subprocess.run([python or sys.executable, "-c", f"import {fw.import_check}"],
                                 capture_output=True, text=True, timeout=300)
            if out.returncode != 0:
                why = f"import {fw.import_check} fails: " + (out.stderr.strip().splitlines() or ["?"])[-1]
        _READY[name] = (python, why)
    python, why = _READY[name]
    if why:
        pytest.skip(why)
    return python


# ---- sweeps and what their records must say -------------------------------------------

class Point(NamedTuple):
    run: dict       # repeat-00/run.json
    ranks: list     # repeat-00/rank-*.json, by rank
    dir: str        # repeat-00


def expected_points(*overrides) -> int:
    """How many points a sweep of these overrides has: the product of their values' counts."""
    return math.prod(len(o.split("=", 1)[1].split(",")) for o in overrides if "=" in o)


def sweep(tmp_path, name, *overrides, timeout=600) -> dict:
    """Run `python -m launch -m framework=NAME preset=smoke repeats=1 ...` with its output
    under tmp_path; return {point name without its number: Point}. Its ranks get one thread
    each (tests.launching.launch): a one-rank point would otherwise take both shared cores, and
    threads spinning on a busy machine cost CPU, not speed (half of a PyTorch rank's here)."""
    out = launch("-m", f"framework={name}", "preset=smoke", "repeats=1", f"output_root={tmp_path}",
                 *overrides, env={"PYTHONPATH": str(ROOT)}, timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    points = {}
    for sweep_dir in sorted(glob.glob(str(Path(tmp_path) / "*"))):
        points.update(read_points(sweep_dir))
    assert points, out.stdout[-3000:] + out.stderr[-3000:]
    assert len(points) == expected_points(*overrides), sorted(points)
    return points


def read_points(sweep_dir) -> dict:
    """{point name without its number: Point} of a sweep's folder (repeat 0 of each point)."""
    points = {}
    for pdir in sorted(glob.glob(os.path.join(sweep_dir, "points", "*"))):
        rdir = os.path.join(pdir, "repeat-00")
        with open(os.path.join(rdir, "run.json")) as f:
            run = json.load(f)
        ranks = []
        for path in sorted(glob.glob(os.path.join(rdir, "rank-*.json"))):
            with open(path) as f:
                ranks.append(json.load(f))
        points[os.path.basename(pdir).split("-", 1)[1]] = Point(run, ranks, rdir)
    return points


_SWEEPS = {}


@pytest.fixture(scope="session")
def sweeps(tmp_path_factory):
    """sweeps(name, *overrides): `sweep`'s points, run once per session, so that the table's
    tests and a framework's own file share a sweep (a failed sweep fails each of them)."""
    def get(name, *overrides):
        key = (name, overrides)
        if key not in _SWEEPS:
            try:
                _SWEEPS[key] = sweep(tmp_path_factory.mktemp(f"{name}-sweep"), name, *overrides)
            except Exception as exc:  # noqa: BLE001  (kept, and raised again for each user)
                _SWEEPS[key] = exc
        if isinstance(_SWEEPS[key], Exception):
            raise _SWEEPS[key]
        return _SWEEPS[key]
    return get


def fp32_amp_sweep(sweeps, name) -> dict:
    """Both models, fp32 and AMP, compile=false (the suite's default before compile=auto;
    the eager, or tf.function, mode of every framework)."""
    return sweeps(name, f"model={','.join(MODELS)}", "precision=fp32,amp", "compile=false")


def compile_sweep(sweeps, name) -> dict:
    return sweeps(name, f"model={','.join(MODELS)}", "compile=true", *FRAMEWORKS[name].compile_sweep)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """A dataset of DATASET's counts (`python -m launch dataset`), made once per session."""
    from launchers.commands import dataset as writer
    out = tmp_path_factory.mktemp("dataset") / "ds"
    writer.build(str(out), DATASET["images"], 3, DATASET["sequences"], seed=0)
    return out


DATASET = {"images": 24, "sequences": 16}


def files_sweep(sweeps, name, dataset) -> dict:
    """Both models trained from files, and read by the pipeline alone (bench=input), with
    one loader worker."""
    return sweeps(name, f"model={','.join(MODELS)}", "data=files", f"data.path={dataset}",
                  "data.workers=1", "bench=train,input")


def two_ranks_sweep(sweeps, name) -> dict:
    """Also profile=true: its extra steps come after the timed window, traced on rank 0 while
    rank 1 steps along (test_frameworks.py: test_a_trace_on_demand)."""
    return sweeps(name, "gpus_per_node=2", "profile=true", *FRAMEWORKS[name].two_ranks)


def _logs(rdir) -> str:
    return "".join(f"--- {p}\n" + open(p, errors="replace").read()[-1500:]
                   for p in sorted(glob.glob(os.path.join(rdir, "*.log"))))


MISSING = "<missing>"


def assert_trained(name: str, point: Point, world: int = 1) -> list:
    """The repeat and every rank `ok`, on `world` ranks, with the framework's version and
    environment, all steps there with finite losses, the measured ones inside the window.
    Returns the rank records."""
    fw, (run, ranks, rdir) = FRAMEWORKS[name], point
    assert run["status"] == "ok", (rdir, run["error"], _logs(rdir))
    assert run["world_size"] == world
    assert len(ranks) == world, rdir
    for rec in ranks:
        assert rec["status"] == "ok", rec["error"]
        assert rec["world_size"] == world
        assert {k: rec["framework"].get(k) for k in ("name", "version")} == {"name": name, "version": fw.version}
        # every release its adapter declares, as installed (contract/versions.py: read before the import)
        releases = registry.get(name).releases
        assert set(rec["framework"]["releases"]) == {r.package for r in releases}
        assert rec["framework"]["releases"][releases[0].package] is not None
        spec = rec["spec"]
        # The mode the point resolved (its adapter's modes), in the spec and the record.
        fw_modes = registry.get(name).modes
        assert rec["mode"] == spec["mode"] == fw_modes.name(spec["compile"]), rec["mode"]
        assert spec["compile"] == fw_modes.compiled(spec["compile_setting"])
        measured = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(measured) == spec["measure_steps"] == SMOKE_MEASURE_STEPS
        assert len(rec["steps"]) == spec["warmup_steps"] + spec["measure_steps"]
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])
        # Step edges (host clock, or MXNet's EngineTimer): ordered, inside the window.
        w = rec["window"]
        assert w["end"] > w["start"]
        assert all(w["start"] <= s["start"] <= s["end"] <= w["end"] + 1e-6 for s in measured)
        expected = fw.expected_env(spec, world)
        got = {key: rec["environment"].get(key, MISSING) for key in expected}
        assert got == expected, (rdir, rec["rank"])
    for key in fw.rank_keys if world > 1 else ():
        assert sorted(r["environment"][key] for r in ranks) == list(range(world)), key
    return ranks


def assert_amp(name: str, point: Point, expect: str, amp_dtype: str = "bf16",
               compile: bool = False) -> None:
    """An AMP point: trained, or `unsupported` with the capability check's one line, as the
    framework's table row (`expect`) and amp_gap say."""
    fw, gap = FRAMEWORKS[name], amp_gap(name, amp_dtype, compile)
    if expect == "ok":
        assert gap is None, gap
    elif expect == "unsupported":
        assert gap and gap.startswith(fw.amp_error), gap
    else:
        assert expect == "capability", expect
    if gap is None:
        assert_trained(name, point)
        return
    run, ranks, _ = point
    assert_unsupported(run, ranks, gap)
    if expect == "unsupported":
        assert fw.amp_error in run["error"]
        assert ranks[0]["error"].startswith(fw.amp_error), ranks[0]["error"]


def losses(rec) -> list:
    return [s["loss"] for s in rec["steps"]]


def checksums(ranks) -> list:
    """Each rank's `parameter_checksum` (the harness asks the adapter after the timed loop),
    by rank; asserts every rank has one."""
    for rec in ranks:
        assert rec.get("parameter_checksum") is not None, \
            (rec["rank"], rec.get("parameter_checksum_error"))
    return [rec["parameter_checksum"] for rec in sorted(ranks, key=lambda r: r["rank"])]
