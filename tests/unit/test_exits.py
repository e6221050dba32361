"""The one table of exit statuses (contract/exits.py, docs/statuses.md), each case through
`launch.main`: a sweep whose point passed, failed, ran out of memory, timed out, lost its node
or was unsupported (its repeat run once by a stand-in interpreter, then recorded so, the sweep
rerun into its folder), one stopped by Ctrl-C, one refused before anything ran (leaving no
folder), and `status`, `status --wait`, `health`, `doctor` on the same table."""
import json
import os

import pytest

import launch
from contract import exits, paths
from launchers.backends.slurm import sacct
from tests import sweepfiles

POINT = "000-pytorch-resnet50-fp32-1x1-bs4"
ARGS = ["preset=smoke", "repeats=1", "launcher=local"]


def interpreter(folder, name, body) -> str:
    """A stand-in for a framework's interpreter: a shell script each rank runs."""
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    """A point whose one repeat ran and failed: its rank exited 1 without a record."""
    folder = tmp_path_factory.mktemp("exits")
    python = interpreter(folder, "fails", "exit 1")
    args = [*ARGS, f"framework.python={python}", f"hydra.run.dir={folder / 'sweep'}"]
    return folder / "sweep", args, launch.main(args)


def recorded_as(sweep, status, error=None):
    path = os.path.join(paths.repeat_dir(paths.point_dir(str(sweep), POINT), 0), paths.RUN_FILE)
    with open(path) as f:
        run = json.load(f)
    run.update(status=status, error=error)
    with open(path, "w") as f:
        json.dump(run, f)


def test_a_sweep_whose_point_failed_exits_1_naming_it(failed, capsys):
    sweep, args, code = failed
    assert code == exits.FAILED
    recorded_as(sweep, "failed", "rank 0 left no record: exit code 1")
    assert launch.main(args) == exits.FAILED   # the rerun runs nothing: the records say it
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"sweep: 1 of 1 point(s) did not pass ({POINT} FAILED): python -m launch status {sweep}")


@pytest.mark.parametrize("status,error,code,word", [
    ("ok", None, exits.OK, None),
    ("unsupported", "bf16 AMP needs a CPU with AVX512-BF16 or AMX", exits.OK, None),
    ("oom", "rank 0: OutOfMemoryError", exits.FAILED, "OOM"),
    ("timeout", "repeat ended by timeout", exits.FAILED, "TIMEOUT"),
    ("failed", "rank 1 (node2) left no record: no exit status known (its node may be lost)",
     exits.FAILED, "FAILED"),
])
def test_each_ending_of_a_point_has_its_exit_status(failed, capsys, status, error, code, word):
    sweep, args, _ = failed
    recorded_as(sweep, status, error)
    capsys.readouterr()
    assert launch.main(args) == code
    err = capsys.readouterr().err
    assert (f"({POINT} {word})" in err) if word else "did not pass" not in err


def test_a_point_an_exclude_rule_skips_counts_for_nothing(failed, capsys):
    sweep, args, _ = failed
    recorded_as(sweep, "ok")
    given = [a for a in args if not a.startswith("hydra.run.dir")]
    assert launch.main(["-m", *given, "batch_size=4,8", "exclude=[{batch_size:8}]",
                        f"hydra.sweep.dir={sweep}"]) == exits.OK
    assert "skipped sweep point 1 (" in capsys.readouterr().out


def test_a_sweep_stopped_by_ctrl_c_exits_130(tmp_path, capsys):
    """The rank sends the launcher SIGINT, as a terminal's Ctrl-C would, then waits to be stopped."""
    python = interpreter(tmp_path, "interrupts", "kill -INT $PPID; exec sleep 30")
    code = launch.main([*ARGS, f"framework.python={python}", f"hydra.run.dir={tmp_path / 's'}"])
    assert code == exits.interrupted("SIGINT") == 130
    assert "got SIGINT: stopping" in capsys.readouterr().out


def test_bad_input_exits_2_in_one_line_and_leaves_no_folder(tmp_path, capsys):
    out = tmp_path / "out"
    assert launch.main(["-m", "nodes=1,2", "launcher=local", f"output_root={out}"]) == exits.REFUSED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: launcher=local runs on one node; nodes=2")
    assert os.listdir(out) == []      # no <time>/ folder with a multirun.yaml left behind
    assert launch.main(["nodes=2", "launcher=local", f"output_root={out}"]) == exits.REFUSED
    assert os.listdir(out) == []


def test_a_missing_interpreter_is_refused_before_any_point_runs(tmp_path, capsys):
    """Point 0 (the suite's own Python) would run; point 1's interpreter is not there: neither runs."""
    sweep = tmp_path / "s"
    code = launch.main(["-m", *ARGS, "framework.python=null,/nonexistent/bin/python",
                        f"hydra.sweep.dir={sweep}"])
    assert code == exits.REFUSED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: pytorch interpreter /nonexistent/bin/python not found (sweep point 1: ")
    assert err[0].endswith("1 of 2 points refused, none was run)")
    assert not sweep.exists()


def test_what_builds_a_missing_interpreter_of_the_suites_own_is_named(tmp_path, capsys, monkeypatch):
    """A checkout whose OneFlow environment is not built (its make target's requirements are
    there, .venvs/oneflow is not): the line names `make env-oneflow`, as the issue met it."""
    from launchers.backends import worker
    checkout = tmp_path / "checkout"
    (checkout / "frameworks" / "oneflow").mkdir(parents=True)
    (checkout / "frameworks" / "oneflow" / "requirements.txt").write_text("oneflow\n")
    monkeypatch.setattr(worker, "ROOT", checkout)
    code = launch.main([*ARGS, "framework=oneflow", f"hydra.run.dir={tmp_path / 's'}"])
    assert code == exits.REFUSED
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: oneflow interpreter .venvs/oneflow/bin/python not found (make env-oneflow builds it)"]


def test_a_dry_run_with_a_missing_interpreter_is_one_line_not_a_traceback(tmp_path, capsys):
    run_dir = tmp_path / "dry"
    code = launch.main([*ARGS, "framework=oneflow", "framework.python=/nonexistent/bin/python",
                        "dry_run=true", f"hydra.run.dir={run_dir}"])
    out = capsys.readouterr()
    assert code == exits.REFUSED and "Traceback" not in out.out + out.err
    assert out.err.strip().splitlines() == ["error: oneflow interpreter /nonexistent/bin/python not found"]
    assert not run_dir.exists()


def test_an_empty_folder_given_before_is_kept_when_refused(tmp_path, capsys):
    run_dir = tmp_path / "mine"
    run_dir.mkdir()
    assert launch.main(["nodes=2", "launcher=local", f"hydra.run.dir={run_dir}"]) == exits.REFUSED
    assert run_dir.is_dir()


def slurm_point(sweep, name, job, status=None):
    p = sweepfiles.write_point(sweep, name, repeats=1)
    if status:
        sweepfiles.write_repeat(p, 0, [1.0], status=status)
    with open(os.path.join(p["dir"], paths.SLURM_FILE), "w") as f:
        json.dump({"schema": paths.SLURM_SCHEMA, "job_id": job, "log": "L"}, f)


def test_status_shows_0_and_wait_counts_failed_unsupported_and_gives_up(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sacct, "_run", lambda argv, timeout: "43|PENDING|Priority\n")
    slurm_point(tmp_path / "a", "000-a", "41", "unsupported")
    wait = ["--wait", "--interval", "0"]
    assert launch.main(["status", str(tmp_path / "a"), *wait]) == exits.OK
    slurm_point(tmp_path / "a", "001-b", "42", "failed")
    assert launch.main(["status", str(tmp_path / "a")]) == exits.OK          # it only shows
    assert launch.main(["status", str(tmp_path / "a"), *wait]) == exits.FAILED
    slurm_point(tmp_path / "b", "000-c", "43")                               # pending
    assert launch.main(["status", str(tmp_path / "b"), *wait, "--timeout", "0"]) == exits.GAVE_UP
    assert launch.main(["status", str(tmp_path / "none")]) == exits.REFUSED


@pytest.mark.parametrize("command", ["health", "doctor"])
def test_health_and_doctor_refuse_bad_input_with_2(command, tmp_path, capsys):
    assert launch.main([command, "nodes=0", f"output_root={tmp_path}"]) == exits.REFUSED
    assert capsys.readouterr().err.strip().splitlines() == ["error: nodes must be an integer >= 1, got 0"]


def test_the_rule_by_hand():
    assert exits.of(["COMPLETED", "unsupported", "skipped", "ok"]) == exits.OK
    assert exits.of([]) == exits.OK
    for bad in ("FAILED", "oom", "TIMEOUT", "CANCELLED", "INCOMPLETE", "UNHEALTHY", "sick", "partial", "missing"):
        assert exits.of(["ok", bad]) == exits.FAILED
    assert [exits.interrupted(s) for s in ("SIGHUP", "SIGINT", "SIGTERM")] == [129, 130, 143]
