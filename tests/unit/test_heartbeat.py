"""Rank 0's heartbeat (contract/heartbeat.py, frameworks/common/heartbeat.py), what `launch
status` and the launcher's progress make of it (issue 52, item 4: nothing moved inside a point)."""
import io
import json
import os
import time

from contract import heartbeat, paths, records
from frameworks.common import heartbeat as beats
from launchers.commands import status
from launchers.driver import progress
from tests import sweepfiles


def test_the_heartbeat_is_written_whole_and_read_back(tmp_path):
    heartbeat.beat(str(tmp_path), 3, 52, 120, "timed", 1000.0, now=1026.0)
    assert os.listdir(tmp_path) == [paths.HEARTBEAT_FILE]  # no temporary left beside it
    hb = heartbeat.read(str(tmp_path))
    assert hb == {"schema": paths.HEARTBEAT_SCHEMA, "version": paths.SCHEMA_VERSION, "repeat": 3,
                  "step": 52, "steps": 120, "phase": "timed", "started_unix": 1000.0,
                  "updated_unix": 1026.0}
    assert heartbeat.live(hb, now=1026.0 + heartbeat.STALE_S)
    assert not heartbeat.live(hb, now=1026.0 + heartbeat.STALE_S + 1)   # rank 0 gone
    assert not heartbeat.live(dict(hb, phase="done"), now=1026.0)


def test_a_file_that_is_not_a_heartbeat_reads_as_none(tmp_path):
    assert heartbeat.read(str(tmp_path)) is None
    (tmp_path / paths.HEARTBEAT_FILE).write_text('{"schema": "dlbench.heartbeat", "rep')
    assert heartbeat.read(str(tmp_path)) is None
    records.write_json_atomic(str(tmp_path / paths.HEARTBEAT_FILE),
                              {"schema": paths.HEARTBEAT_SCHEMA, "repeat": "x"})
    assert heartbeat.read(str(tmp_path)) is None


def test_the_eta_by_hand():
    # 52 steps in 26 s: 0.5 s a step. Repeat 4 of 7 (index 3): 68 steps left in it, then
    # 3 repeats x 120 steps = 360: 428 steps x 0.5 s = 214 s.
    hb = {"repeat": 3, "step": 52, "steps": 120, "started_unix": 1000.0, "updated_unix": 1026.0}
    assert heartbeat.eta_s(hb, 7) == 214.0
    assert heartbeat.eta_s(dict(hb, repeat=6), 7) == 34.0         # the last repeat: 68 x 0.5
    assert heartbeat.eta_s(dict(hb, step=0), 7) is None           # no step done: no rate yet
    assert heartbeat.clock(214.0) == "3:34" and heartbeat.clock(3725) == "1:02:05"


def test_the_progress_line_and_bar():
    hb = {"repeat": 3, "step": 52, "steps": 120, "phase": "timed", "started_unix": 1000.0,
          "updated_unix": 1026.0}
    assert heartbeat.progress_line(hb, 7) == "repeat 4/7, step 52/120 (timed), 0.50 s/step, ETA 3:34"
    assert progress.bar(hb, 7, width=12) == \
        "[#####.......] repeat 4/7, step 52/120 (timed), 0.50 s/step, ETA 3:34"
    assert heartbeat.progress_line(dict(hb, step=0, phase="warmup"), 7) == \
        "repeat 4/7, step 0/120 (warmup), ETA ?"


def running_point(sweep, recorded=0, **beat):
    p = sweepfiles.write_point(sweep, "000-a", repeats=7)
    for r in range(recorded):
        sweepfiles.write_repeat(p, r, [1.0])
    os.makedirs(paths.repeat_dir(p["dir"], recorded), exist_ok=True)
    now = time.time()
    heartbeat.beat(p["dir"], **{"repeat": recorded, "step": 52, "steps": 120, "phase": "timed",
                                "started": now - 26, "now": now, **beat})
    return {q["name"]: q for q in status.read_points(str(sweep))}["000-a"]


def test_status_says_where_a_running_local_point_is(tmp_path):
    p = running_point(tmp_path, recorded=3)
    assert status.point_state(p, None) == ("RUNNING", "running: repeat 4/7, step 52/120")


def test_status_says_where_a_running_slurm_point_is(tmp_path):
    p = running_point(tmp_path, recorded=3)
    p["slurm"] = {"job_id": "41"}
    assert status.point_state(p, sweepfiles.slurm_live(p, "RUNNING")) == ("RUNNING", "running: repeat 4/7, step 52/120")


def test_a_stale_or_recorded_heartbeat_is_not_running(tmp_path):
    p = running_point(tmp_path, recorded=3, now=time.time() - heartbeat.STALE_S - 5)
    assert status.point_state(p, None) == ("INCOMPLETE", "4 repeat(s) not recorded")
    p = running_point(tmp_path / "b", recorded=3)
    sweepfiles.write_repeat(sweepfiles.write_point(tmp_path / "b", "000-a", repeats=7), 3, [1.0])
    p["runs"] = {q["name"]: q for q in status.read_points(str(tmp_path / "b"))}["000-a"]["runs"]
    assert status.point_state(p, None) == ("INCOMPLETE", "3 repeat(s) not recorded")


def test_between_two_repeats_the_next_one_is_starting(tmp_path):
    # repeat 4 (index 3) ended a moment ago and repeat 5's folder is there: its ranks start
    p = running_point(tmp_path, recorded=3, phase="done", step=120)
    sweepfiles.write_repeat(sweepfiles.write_point(tmp_path, "000-a", repeats=7), 3, [1.0])
    os.makedirs(paths.repeat_dir(p["dir"], 4))
    p = {q["name"]: q for q in status.read_points(str(tmp_path))}["000-a"]
    assert status.point_state(p, None) == ("RUNNING", "running: repeat 5/7, starting")
    assert status.running(p, now=time.time() + heartbeat.STALE_S + 1) is None   # never started


class Spec:
    warmup_steps, measure_steps, repeat = 2, 3, 4

    def __init__(self, record_dir):
        self.record_dir = record_dir


def test_rank_0_beats_from_a_thread_and_says_done_at_the_end(tmp_path):
    rdir = tmp_path / "points" / "000-a" / "repeat-04"
    rdir.mkdir(parents=True)
    other = beats.start(Spec(str(rdir)), 1)
    other.done += 1
    other.stop()
    assert not (rdir.parent / paths.HEARTBEAT_FILE).exists()   # only rank 0 writes
    beat = beats.start(Spec(str(rdir)), 0)
    for _ in range(5):
        beat.done += 1
    beat.stop()
    hb = json.loads((rdir.parent / paths.HEARTBEAT_FILE).read_text())
    assert (hb["repeat"], hb["step"], hb["steps"], hb["phase"]) == (4, 5, 5, "done")


class Point:
    name, repeats = "000-a", 7

    def __init__(self, pdir):
        self.dir = pdir


def test_the_launcher_logs_a_progress_line_off_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "POLL_S", 0.01)
    now = time.time()
    heartbeat.beat(str(tmp_path), 3, 52, 120, "timed", now - 26, now=now)
    lines, stream = [], io.StringIO()   # not a tty: lines to the log, nothing drawn
    with progress.shown(Point(str(tmp_path)), 3, lines.append, stream):
        time.sleep(0.2)
    assert lines == ["000-a repeat 4/7, step 52/120 (timed), 0.50 s/step, ETA 3:34"]  # one per 10 s
    assert stream.getvalue() == ""
    lines.clear()
    with progress.shown(Point(str(tmp_path)), 2, lines.append, stream):  # another repeat's beat
        time.sleep(0.05)
    assert lines == []


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_launcher_draws_a_bar_on_a_terminal_and_clears_it(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "POLL_S", 0.01)
    now = time.time()
    heartbeat.beat(str(tmp_path), 3, 60, 120, "timed", now - 30, now=now)
    lines, stream = [], Terminal()
    with progress.shown(Point(str(tmp_path)), 3, lines.append, stream):
        time.sleep(0.1)
    assert lines == []
    drawn = stream.getvalue()
    assert "\r000-a [############............] repeat 4/7, step 60/120 (timed)" in drawn
    assert drawn.endswith("\r\033[K")   # the bar gone before the repeat's own line


def test_a_heartbeat_thread_that_cannot_start_costs_the_heartbeat_not_the_run(tmp_path, monkeypatch):
    """Under memory_limit_mb (RLIMIT_AS) near its cap a thread cannot start ("can't start new
    thread"): the Slurm search's try then failed instead of running out of memory."""
    from frameworks.common import heartbeat as beats

    def refused(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(beats.threading.Thread, "start", refused)
    beat = beats.Beat(str(tmp_path), 0, 5)
    beat.done += 1
    beat.stop()   # no thread: nothing to stop, nothing written
    assert beat._thread is None and not list(tmp_path.iterdir())
