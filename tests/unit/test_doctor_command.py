"""`python -m launch doctor` where no Slurm is (issue 52): launcher=local is refused in one
line that does not speak of launcher=auto; launcher=auto (the default) says what it chose and
why, and asks no controller that is not there (squeue waited 30 s for one)."""
import time

import launch


def doctor(capsys, *argv):
    code = launch.main(["doctor", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_doctor_with_the_local_launcher_is_one_line_without_auto(capsys, tmp_path):
    code, out, err = doctor(capsys, "launcher=local", f"output_root={tmp_path}")
    assert code == 2 and out == ""
    assert err == ("error: launcher=local runs on this machine, with no site to check: launch "
                   "doctor checks a Slurm site (launcher=slurm)\n")


def test_doctor_where_auto_finds_no_controller_says_why_at_once(capsys, tmp_path):
    t0 = time.monotonic()
    code, out, err = doctor(capsys, f"output_root={tmp_path}")   # no controller here (conftest)
    assert code == 1, out + err
    assert out.splitlines()[0].startswith("FAILED   slurm: launcher=auto chose local: ")
    assert time.monotonic() - t0 < 15    # no squeue asked (30 s, waiting for a controller)
