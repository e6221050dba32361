"""How a site's secrets in cluster.env reach the ranks without being written (the rule of
what a secret is: contract/secrets.py; docs/configuration.md, "Secrets").

Every file of a sweep holds them masked (point.json, spec.json, the pickled drivers, step.json),
so the values travel by process environments only:
- at submission, `exported(points)` puts them into this process's environment for the while:
  on Slurm around the sbatch call, which exports its environment into the job (sbatch's
  --export=ALL, its default), so the driver in the allocation inherits them and a requeued
  job keeps them; here, around the points the local launcher runs;
- in the allocation, `values(point)` reads them back from the driver's environment for every
  step's ranks (srun passes its environment to its tasks, and every container runtime passes
  it into the image). Never in an argument (ps, sacct) nor in a file of the sweep.
"""
import contextlib
import os

from contract import secrets
from launchers.backends.worker import WorkerUnavailable
from launchers.suite import ConfigError


def _secret_items(point) -> list:
    """[(name, value)] of cluster.env that are secrets by the rule, or masked already."""
    env = {str(k): str(v) for k, v in point.cluster.env.items()}
    shown = secrets.masked(env, extra=point.cluster.secret_keys)
    return [(k, v) for k, v in env.items() if shown[k] != v or secrets.is_masked(v)]


def hidden(point) -> dict:
    """The secrets of the point's cluster.env with their values (a point made from the config,
    before it is written): what the submission exports."""
    return {k: v for k, v in _secret_items(point) if not secrets.is_masked(v)}


def values(point, environ=None) -> dict:
    """The secrets of cluster.env as the ranks get them: a value the point holds masked (read
    from its file) from this process's environment; WorkerUnavailable, naming the variable,
    where it is not there (a sbatch that does not export its environment: --export=NONE)."""
    environ = os.environ if environ is None else environ
    out = {}
    for name, value in _secret_items(point):
        if secrets.is_masked(value):
            if name not in environ:
                raise WorkerUnavailable(
                    f"cluster.env.{name} is a secret, written nowhere, and it did not reach this "
                    "process's environment (it travels from the submitting shell through sbatch's "
                    "--export=ALL; docs/configuration.md, Secrets)")
            value = environ[name]
        out[name] = value
    return out


@contextlib.contextmanager
def exported(points: list):
    """This process's environment with the points' secrets for the while (one sbatch, or the
    local launcher's run of them); ConfigError where two points give one variable two values,
    which one environment cannot carry (slurm/arrays.py submits such points apart)."""
    wanted: dict = {}
    for point in points:
        for name, value in hidden(point).items():
            if wanted.setdefault(name, value) != value:
                raise ConfigError(f"cluster.env.{name} is a secret with different values in points "
                                  "submitted together (one job array has one environment): "
                                  "sweep them in separate launches")
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
