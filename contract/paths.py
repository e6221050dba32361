"""The sweep's layout on disk and its schema names, written once (docs/contract.md).

    SWEEP/points/<point>/point.json                   the point (launchers/plan/points.py)
    SWEEP/points/<point>/slurm.json                   its Slurm job (launchers/backends/slurm/launcher.py)
    SWEEP/points/<point>/local.json                   the local launcher that runs it: its pid, when it
                                                      started, when it ended (launchers/backends/local_owner.py)
    SWEEP/points/<point>/repeat-NN/spec.json          what the ranks of repeat NN read
    SWEEP/points/<point>/repeat-NN/rank-KKKKK.json    one record per rank (the worker)
    SWEEP/points/<point>/repeat-NN/rank-KKKKK.log     the rank's stdout and stderr
    SWEEP/points/<point>/repeat-NN/run.json           the repeat's status (the driver)
    SWEEP/points/<point>/repeat-NN/step.json          the srun step that ran it (Slurm)
    SWEEP/points/<point>/repeat-NN/srun.log           srun's own output (Slurm)
    SWEEP/points/<point>/repeat-NN.interrupted-T/     an attempt cut short: kept, never read
    SWEEP/points/<point>/repeat-00/profile/rank-00000/ a trace on demand (profile=true:
                                                      frameworks/common/profile.py)
    SWEEP/points/<point>/heartbeat.json               rank 0's progress while a repeat runs: its
                                                      repeat, steps done of total, times
                                                      (frameworks/common/heartbeat.py writes it whole
                                                      every ~2 s; contract/heartbeat.py reads it)
    SWEEP/points/<point>/preflight.json               preflight=true: each health attempt, the nodes
                                                      left out and why, the outcome (launchers/driver/preflight.py)
    SWEEP/points/<point>/health/attempt-NN/           one attempt's health step: spec.json, its ranks'
                                                      rank-KKKKK.json and .log, srun.log, health.json
    SWEEP/searches/<point>.json                       a search's ledger (launchers/driver/ledger.py)
    SWEEP/checkpoints/<point>/repeat-NN/              bench=checkpoint and checkpoint.every: the
                                                      repeat's checkpoints (step-KKKKKK/, a DCP
                                                      folder; step-KKKKKK.partial/ while written)
                                                      and bare-KKKKK.bin, a rank's bare write; with
                                                      checkpoint.dir=D: D/<sweep>/<point>/repeat-NN/
                                                      (contract/checkpoint.py; docs/checkpoint.md)
    SWEEP/slurm/                                      submitit's folder: sbatch scripts, pickles,
                                                      driver logs <job>_0_log.out (launchers/backends/slurm/launcher.py)

`python -m launch health` writes OUTPUT_ROOT/health-<time>/ as one attempt's folder above;
`python -m analysis archive SWEEP` writes SWEEP.tar.zst, its manifest NAME/archive.json.

A certification (`python -m launch certify SUITE`, certify/; docs/certify.md):

    CERT/verdict.json                                 the verdict: each item's measured figure,
                                                      baseline, ratio, PASS or FAIL (certify/)
    CERT/health-<time>/                               the health gate, a folder each time it ran:
                                                      one attempt's folder above
    CERT/<item>/points/...                            each item's sweep, as above
    CERT.tar.zst                                      its archive (analysis/read/archive.py)

Every other module names these through this one. Standard library only: the worker
harness imports it in the framework's own Python.
"""
import os
import re
import time
from collections.abc import Iterable

StrPath = str | os.PathLike[str]   # a folder's or file's path: a str or a pathlib.Path

SCHEMA_VERSION = 1                      # of every schema below
POINT_SCHEMA = "dlbench.point"
SPEC_SCHEMA = "dlbench.spec"
RANK_SCHEMA = "dlbench.rank"
RUN_SCHEMA = "dlbench.run"
SLURM_SCHEMA = "dlbench.slurm"
SEARCH_SCHEMA = "dlbench.search"
REFERENCE_SCHEMA = "dlbench.reference"  # a regression gate's reference (analysis/gate/compare.py)
PEAKS_SCHEMA = "dlbench.peaks"          # device peak TFLOP/s, as data (analysis/peaks.yaml)
HEALTH_SPEC_SCHEMA = "dlbench.health_spec"  # what a health step's ranks read (launchers/health/step.py)
HEALTH_RANK_SCHEMA = "dlbench.health_rank"  # one rank's checks (healthchecks/rank.py)
HEALTH_SCHEMA = "dlbench.health"            # a health step's verdict (launchers/health/verdict.py)
PREFLIGHT_SCHEMA = "dlbench.preflight"      # a point's preflight attempts (launchers/driver/preflight.py)
ARCHIVE_SCHEMA = "dlbench.archive"          # an archive's manifest (analysis/read/archive.py)
STORE_SCHEMA = "dlbench.store"              # the store's meta table (analysis/store/schema.py)
CERTIFICATION_SCHEMA = "dlbench.certification"  # a certification's verdict.json (certify/)
HEARTBEAT_SCHEMA = "dlbench.heartbeat"      # rank 0's progress in a point (contract/heartbeat.py)
LOCAL_SCHEMA = "dlbench.local"              # the local launcher of a point (launchers/backends/local_owner.py)

POINTS_DIR = "points"
SEARCHES_DIR = "searches"
SUBMITIT_DIR = "slurm"
REPORT_DIR = "report"
POINT_FILE = "point.json"
SLURM_FILE = "slurm.json"
LOCAL_FILE = "local.json"
SPEC_FILE = "spec.json"
RUN_FILE = "run.json"
STEP_FILE = "step.json"
SRUN_LOG = "srun.log"
HEALTH_FILE = "health.json"
PREFLIGHT_FILE = "preflight.json"
HEARTBEAT_FILE = "heartbeat.json"
ARCHIVE_SUFFIX = ".tar.zst"             # `python -m analysis archive SWEEP`: SWEEP.tar.zst
ARCHIVE_MANIFEST = "archive.json"       # in it, NAME/archive.json: each file's sha256
HEALTH_DIR = "health"
HEALTH_RUN_PREFIX = "health-"           # `launch health`'s folder: OUTPUT_ROOT/health-<time>
VERDICT_FILE = "verdict.json"           # a certification's verdict, at its folder's top
CERTIFY_RUN_PREFIX = "certify-"         # `launch certify`'s folder: OUTPUT_ROOT/certify-<time>
RANK_LOG_SRUN = "rank-%5t.log"          # srun --output's pattern of rank_log_name (%5t: the task)
CHECKPOINTS_DIR = "checkpoints"         # bench=checkpoint, checkpoint.every (docs/checkpoint.md)
PARTIAL_SUFFIX = ".partial"             # a checkpoint still being written: never loaded
DCP_METADATA = ".metadata"              # torch.distributed.checkpoint's index, written last
PROFILE_DIR = "profile"                 # traces of profile=true, in the traced repeat's folder
TORCH_TRACE = "trace.json.gz"           # torch.profiler's Chrome trace, gzip'd (a GPU's is megabytes),
                                        # in a rank's profile folder
JAX_PERFETTO_TRACE = "perfetto_trace.json.gz"  # jax.profiler's own name for its Perfetto trace

# A dataset folder (`python -m launch dataset OUT`, read with data=files; docs/data.md):
#   OUT/dataset.json                      what wrote it (seed, counts, format)
#   OUT/train/<class>/<name>.JPEG         ImageNet's layout, for ResNet-50
#   OUT/bert/pretrain-00000.npz           BERT pretraining sequences (numpy arrays)
DATASET_SCHEMA = "dlbench.dataset"
DATASET_FILE = "dataset.json"
IMAGES_DIR = "train"
IMAGE_SUFFIXES = (".jpeg", ".jpg")          # compared in lower case; ImageNet is JPEG
BERT_DIR = "bert"
BERT_SHARD_RE = re.compile(r"^pretrain-(\d+)\.npz$")

REPEAT_RE = re.compile(r"^repeat-(\d+)$")             # a recorded or running attempt
INTERRUPTED_RE = re.compile(r"^repeat-(\d+)\.interrupted-(\d+)$")  # set aside: never read
RANK_RECORD_RE = re.compile(r"^rank-(\d+)\.json$")


def repeat_name(repeat: int) -> str:
    return f"repeat-{repeat:02d}"


def rank_record_name(rank: int) -> str:
    return f"rank-{rank:05d}.json"


def rank_log_name(rank: int) -> str:
    return f"rank-{rank:05d}.log"


def nccl_log_pattern(rank: int) -> str:
    """NCCL_DEBUG_FILE of rank `rank` in its repeat's folder: NCCL's own INFO lines, %h and %p
    its host and process id (contract/nccl_net.py reads them back)."""
    return f"nccl-{rank:05d}.%h.%p.log"


def profile_dir(record_dir: StrPath, rank: int) -> str:
    """Where rank `rank` of a repeat writes its trace: repeat-NN/profile/rank-KKKKK/."""
    return os.path.join(str(record_dir), PROFILE_DIR, f"rank-{rank:05d}")


def checkpoint_root(record_dir: StrPath, configured: StrPath | None = None) -> str:
    """Where a repeat's checkpoints go: SWEEP/checkpoints/<point>/repeat-NN, or with
    checkpoint.dir=D, D/<sweep>/<point>/repeat-NN (the sweep's name keeps sweeps apart)."""
    rdir = os.path.normpath(str(record_dir))
    pdir = os.path.dirname(rdir)
    sweep = sweep_of(pdir)
    base = os.path.join(sweep, CHECKPOINTS_DIR) if configured is None \
        else os.path.join(str(configured), os.path.basename(sweep))
    return os.path.join(base, os.path.basename(pdir), os.path.basename(rdir))


def checkpoint_name(step: int) -> str:
    """A committed checkpoint's folder; `+ PARTIAL_SUFFIX` while it is written."""
    return f"step-{step:06d}"


def bare_file_name(rank: int) -> str:
    """A rank's bare write of its checkpoint's bytes (no DCP), in the checkpoint root."""
    return f"bare-{rank:05d}.bin"


def point_dir(sweep: StrPath, point: str) -> str:
    return os.path.join(str(sweep), POINTS_DIR, point)


def repeat_dir(point_dir_: StrPath, repeat: int) -> str:
    return os.path.join(str(point_dir_), repeat_name(repeat))


def heartbeat_file(record_dir: StrPath) -> str:
    """A point's heartbeat, from one of its repeats' folders: SWEEP/points/<point>/heartbeat.json."""
    return os.path.join(os.path.dirname(os.path.normpath(str(record_dir))), HEARTBEAT_FILE)


def interrupted_dir(rdir: StrPath, when: float | None = None) -> str:
    """Where an interrupted attempt is set aside: repeat-NN.interrupted-<unix time>."""
    return f"{rdir}.interrupted-{time.time() if when is None else when:.0f}"


def health_attempt_dir(point_dir_: StrPath, attempt: int) -> str:
    return os.path.join(str(point_dir_), HEALTH_DIR, f"attempt-{attempt:02d}")


def health_run_dir(output_root: StrPath, when: float | None = None) -> str:
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(time.time() if when is None else when))
    return os.path.join(str(output_root), HEALTH_RUN_PREFIX + stamp)


def certify_run_dir(output_root: StrPath, when: float | None = None) -> str:
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(time.time() if when is None else when))
    return os.path.join(str(output_root), CERTIFY_RUN_PREFIX + stamp)


def certification_files(root: StrPath) -> list[str]:
    """Every CERT/verdict.json under root (a certification, or a folder of them), sorted;
    a sweep's own folders (its points, checkpoints, Slurm files) are not searched."""
    found, skip = [], (POINTS_DIR, CHECKPOINTS_DIR, SUBMITIT_DIR, HEALTH_DIR)
    for folder, dirs, names in os.walk(str(root)):
        if VERDICT_FILE in names:
            found.append(os.path.join(folder, VERDICT_FILE))
        dirs[:] = [d for d in dirs if not d.startswith((".", HEALTH_RUN_PREFIX)) and d not in skip]
    return sorted(found)


def submitit_dir(sweep: StrPath) -> str:
    return os.path.join(str(sweep), SUBMITIT_DIR)


def search_ledger(sweep: StrPath, point: str) -> str:
    return os.path.join(str(sweep), SEARCHES_DIR, f"{point}.json")


def sweep_of(point_dir_: StrPath) -> str:
    """SWEEP of SWEEP/points/<point>."""
    return os.path.dirname(os.path.dirname(os.path.normpath(str(point_dir_))))


def point_files(root: StrPath) -> list[str]:
    """Every SWEEP/points/<point>/point.json under root (a sweep, or a folder of sweeps),
    sorted. Point folders are not searched for further sweeps."""
    found = []
    for folder, dirs, _ in os.walk(str(root)):
        if POINTS_DIR in dirs:
            pdir = os.path.join(folder, POINTS_DIR)
            try:
                names = os.listdir(pdir)
            except OSError:
                names = []
            found += [os.path.join(pdir, n, POINT_FILE) for n in names
                      if os.path.isfile(os.path.join(pdir, n, POINT_FILE))]
            dirs.remove(POINTS_DIR)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    return sorted(found)


def search_files(sweeps: Iterable[StrPath]) -> list[str]:
    """Every SWEEP/searches/*.json of the given sweep folders, sorted."""
    out = []
    for sweep in sorted(set(map(str, sweeps))):
        sdir = os.path.join(sweep, SEARCHES_DIR)
        try:
            names = os.listdir(sdir)
        except OSError:
            continue
        out += [os.path.join(sdir, n) for n in names if n.endswith(".json") and not n.startswith(".")]
    return sorted(out)


def bert_shard_name(shard: int) -> str:
    return f"pretrain-{shard:05d}.npz"
