"""A sweep's archive (analysis/read/archive.py): the same report as its folder, read by the usual
tools, profiles left out unless asked, and a damaged file named and charged to its repeat."""
import io
import json
import os
import struct
import tarfile

import pandas as pd
import zstandard

from analysis.read import archive
from tests.store_scenario import T0, run, sweep
from tests.sweepfiles import write_point, write_repeat

POINT1 = "001-pytorch-resnet50-fp32-1x2-bs8"


def two_points(tmp_path) -> str:
    s = sweep(tmp_path, "S", T0, [1.0, 1.1, 0.9])
    write_repeat(write_point(s, POINT1, gpus_per_node=2, repeats=1), 0, [1.0, 0.8])
    return s


def frames_of(path) -> tuple:
    with open(path, "rb") as f:
        return bytearray(open(path, "rb").read()), archive.seek_table(f, os.path.getsize(path))


def member_frame(data, table, ends_with) -> int:
    """The index of the frame that holds the member whose name ends with `ends_with`."""
    for i, (offset, c, d) in enumerate(table):
        raw = zstandard.ZstdDecompressor().decompress(bytes(data[offset:offset + c]), max_output_size=d)
        names = [m.name for m, _ in archive._members(raw)]
        if any(n.endswith(ends_with) for n in names):
            return i
    raise AssertionError(ends_with)


def test_an_archive_reports_the_same_tables_as_its_folder(tmp_path, capsys):
    s = two_points(tmp_path)
    code, folder_out, _ = run(capsys, "report", s, "--no-plot", "--store", "off")
    assert code == 0
    code, out, _ = run(capsys, "archive", s)
    # 2 point.json, 4 run.json, 5 rank records; its report: 2 CSV, steps.parquet, report.html
    assert code == 0 and ": 15 files, " in out
    code, archive_out, err = run(capsys, "report", s + ".tar.zst", "--no-plot", "--store", "off")
    assert code == 0, err
    cut = "tables: "   # the report's tables, the same; then where its files went
    shown = archive_out.split(cut)[0].replace(s + ".tar.zst", "SWEEP")
    assert "sweep: S.tar.zst\n" in shown     # the summary names the archive
    assert shown.replace("S.tar.zst", "S") == folder_out.split(cut)[0].replace(s, "SWEEP")
    for name in ("points.csv", "runs.csv"):
        a = pd.read_csv(os.path.join(s, "report", name)).drop(columns="sweep")
        b = pd.read_csv(os.path.join(s + "-report", name)).drop(columns="sweep")
        pd.testing.assert_frame_equal(a, b)
    assert pd.read_csv(os.path.join(s + "-report", "points.csv")).sweep.unique().tolist() == [s + ".tar.zst"]


def test_tar_and_zstd_read_it_and_its_manifest_has_every_sha256(tmp_path, capsys):
    s = two_points(tmp_path)
    profile = os.path.join(s, "points", POINT1, "repeat-00", "profile", "rank-00000")
    os.makedirs(profile)
    with open(os.path.join(profile, "trace.json"), "w") as f:
        f.write("{}")
    run(capsys, "archive", s)
    with open(s + ".tar.zst", "rb") as f:   # one stream, as `tar --zstd -xf` reads it
        raw = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("S/archive.json"))
    assert f"S/points/{POINT1}/repeat-00/rank-00001.json" in names
    assert not [n for n in names if "/profile/" in n]
    assert manifest["left_out"] == [f"points/{POINT1}/repeat-00/profile/"]
    assert sorted(manifest["files"]) == sorted(n[2:] for n in names if n != "S/archive.json")
    code, out, _ = run(capsys, "archive", s, "--profiles", "--out", str(tmp_path / "all.tar.zst"))
    assert code == 0 and "left out" not in out
    data, table = frames_of(str(tmp_path / "all.tar.zst"))
    assert len(table) == len(names) + 2   # a frame per file, the manifest, tar's end


def test_a_flipped_byte_is_named_and_costs_its_repeat(tmp_path, capsys):
    s = two_points(tmp_path)
    run(capsys, "archive", s)
    data, table = frames_of(s + ".tar.zst")
    i = member_frame(data, table, f"{POINT1}/repeat-00/rank-00001.json")
    offset, c, _ = table[i]
    data[offset + c // 2] ^= 0x10
    bad = str(tmp_path / "bad.tar.zst")
    with open(bad, "wb") as f:
        f.write(data)
    code, out, err = run(capsys, "report", bad, "--no-plot", "--store", "off")
    assert code == 1
    named = f"{bad}/points/{POINT1}/repeat-00/rank-00001.json"
    assert f"- {named}: its part of the archive does not decompress" in out
    runs = pd.read_csv(str(tmp_path / "bad-report" / "runs.csv"))
    status = dict(zip(zip(runs.point, runs.repeat), runs.status))
    assert status[(POINT1, 0)] == "corrupt"                 # its repeat, and nothing else
    assert [v for k, v in status.items() if k != (POINT1, 0)] == ["ok", "ok", "ok"]


def test_bytes_that_decompress_but_are_not_the_manifests_are_named(tmp_path, capsys):
    """A frame rewritten (decompressed, a byte of the file changed, compressed again, the
    seek table mended): zstd cannot tell; the manifest's sha256 can."""
    s = two_points(tmp_path)
    run(capsys, "archive", s)
    data, table = frames_of(s + ".tar.zst")
    i = member_frame(data, table, "000-pytorch-resnet50-fp32-1x1-bs8/repeat-01/run.json")
    offset, c, d = table[i]
    raw = zstandard.ZstdDecompressor().decompress(bytes(data[offset:offset + c]), max_output_size=d)
    raw = raw.replace(b'"ok"', b'"Ok"', 1)
    frame = zstandard.ZstdCompressor().compress(raw)
    sizes = [(cc, dd) for _, cc, dd in table]
    sizes[i] = (len(frame), len(raw))
    body = b"".join(struct.pack("<II", cc, dd) for cc, dd in sizes)
    body += archive.FOOTER.pack(len(sizes), 0, archive.SEEKABLE_MAGIC)
    end = table[-1][0] + table[-1][1]
    mended = bytes(data[:offset]) + frame + bytes(data[offset + c:end]) \
        + struct.pack("<II", archive.SKIPPABLE_MAGIC, len(body)) + body
    bad = str(tmp_path / "mended.tar.zst")
    with open(bad, "wb") as f:
        f.write(mended)
    code, out, _ = run(capsys, "report", bad, "--no-plot", "--store", "off")
    assert code == 1
    assert (f"- {bad}/points/000-pytorch-resnet50-fp32-1x1-bs8/repeat-01/run.json: its sha256 "
            "is not the archive manifest's") in out
    runs = pd.read_csv(str(tmp_path / "mended-report" / "runs.csv"))
    assert runs.status.tolist() == ["ok", "corrupt", "ok", "ok"]


def test_bad_input_is_one_line(tmp_path, capsys):
    code, _, err = run(capsys, "archive", str(tmp_path / "nothing"))
    assert code == 2 and err == f"error: no sweep points under {tmp_path / 'nothing'} (expected " \
                                "SWEEP/points/*/point.json)\n"
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"\x28\xb5\x2f\xfd" + b"\xff" * 64)
    code, _, err = run(capsys, "report", str(junk), "--no-plot", "--store", "off")
    assert code == 2 and err.startswith(f"error: archive {junk} is damaged (") and err.count("\n") == 1
