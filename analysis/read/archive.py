"""A sweep as one file to share: `python -m analysis archive SWEEP` writes SWEEP.tar.zst (a
folder of sweeps, or a certification, certify/, likewise).

    NAME/...                 every file of the sweep (profiles only with --profiles)
    NAME/archive.json        the manifest: each file's sha256 and size, what was left out,
                             what was masked

No secret goes in (contract/secrets.py): a sweep written before the rule has its secrets
masked file by file, named in the manifest's `masked` (file -> fields), a binary file that
holds one left out (`withheld`), or the archive refused where masking would change figures
(analysis/read/old_secrets.py).

It is a tar (PAX) compressed by zstandard, readable by `tar --zstd -xf` and `zstd -d`, with
two things more: each file is its own zstd frame, and a seek table (zstd's seekable format:
a skippable frame at the end listing every frame's compressed and decompressed size) says
where each frame lies. So a byte flipped anywhere costs the one file it lands in, not the
rest of the stream: that frame does not decompress (or decompresses to bytes whose sha256
is not the manifest's), and the file is named. analysis.load reads an archive as it reads a
folder (analysis/read/load.py `opened`: unpacked into a temporary folder, checked against the
manifest, the names shown as ARCHIVE/...), and a damaged file costs its repeat, as a torn
record does.
"""
import contextlib
import hashlib
import io
import json
import os
import shutil
import struct
import sys
import tarfile
import tempfile
import time
from typing import IO

import zstandard

from analysis.read import old_secrets
from analysis.read.record_file import RecordError
from contract import paths, records

SUFFIX = paths.ARCHIVE_SUFFIX
SKIPPABLE_MAGIC = 0x184D2A5E       # a skippable frame (zstd's format): decoders pass over it
SEEKABLE_MAGIC = 0x8F92EAB1        # the seek table's footer (zstd's seekable format)
FOOTER = struct.Struct("<IBI")     # frames, descriptor, magic
LEVEL = 6


def is_archive(path) -> bool:
    return str(path).endswith(SUFFIX) and os.path.isfile(str(path))


def default_out(sweep) -> str:
    return os.path.normpath(str(sweep)) + SUFFIX


def report_dir(archive_path) -> str:
    """Where `analysis report ARCHIVE` writes by default: beside it, ARCHIVE's name -report."""
    return str(archive_path)[:-len(SUFFIX)] + "-report"


class _Frames:
    """What tarfile writes, compressed: a new zstd frame at each `end_frame`; keeps every
    frame's (compressed, decompressed) size for the seek table."""

    def __init__(self, out):
        self.out, self.sizes, self.pos = out, [], 0
        self._zc = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
        self._start()

    def _start(self):
        self._obj, self._at, self._raw = self._zc.compressobj(), self.out.tell(), 0

    def write(self, data) -> int:
        self.out.write(self._obj.compress(bytes(data)))
        self._raw += len(data)
        self.pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self.pos

    def end_frame(self) -> None:
        if self._raw:
            self.out.write(self._obj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
            self.sizes.append((self.out.tell() - self._at, self._raw))
            self._start()

    def seek_table(self) -> None:
        entries = b"".join(struct.pack("<II", c, d) for c, d in self.sizes)
        body = entries + FOOTER.pack(len(self.sizes), 0, SEEKABLE_MAGIC)
        self.out.write(struct.pack("<II", SKIPPABLE_MAGIC, len(body)) + body)


class _Hashing(io.RawIOBase):
    """A file read through, its sha256 and size taken on the way."""

    def __init__(self, f):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = self.f.readinto(buf)
        self.sha.update(memoryview(buf)[:n])
        self.size += n
        return n


def _files(sweep: str, profiles: bool, skip: str) -> tuple:
    """(the sweep's files, relative and sorted; what was left out) of the archive."""
    files, left = [], []
    for folder, dirs, names in os.walk(sweep):
        dirs.sort()
        if not profiles and os.path.basename(folder) == paths.PROFILE_DIR and \
                paths.REPEAT_RE.match(os.path.basename(os.path.dirname(folder))):
            left.append(os.path.relpath(folder, sweep) + "/")
            dirs[:] = []
            continue
        for n in sorted(names):
            full = os.path.join(folder, n)
            if os.path.abspath(full) != skip and os.path.isfile(full) and not os.path.islink(full):
                files.append(os.path.relpath(full, sweep))
    return files, left


def write(sweep, out=None, profiles: bool = False) -> tuple:
    """SWEEP -> its archive (whole or not at all: written to OUT.part, then renamed);
    returns (the archive's path, its manifest)."""
    sweep = os.path.normpath(str(sweep))
    if not paths.point_files(sweep) and not paths.certification_files(sweep):
        raise RecordError(f"no sweep points under {sweep} (expected SWEEP/{paths.POINTS_DIR}/"
                          f"*/{paths.POINT_FILE})")
    out = os.path.abspath(out or default_out(sweep))
    name = os.path.basename(os.path.abspath(sweep))
    files, left = _files(sweep, profiles, out)
    masking = old_secrets.Masking(sweep)   # the secrets of a sweep written before the rule
    manifest = {"schema": paths.ARCHIVE_SCHEMA, "version": paths.SCHEMA_VERSION, "sweep": name,
                "created_unix": time.time(), "profiles": profiles, "left_out": left, "files": {},
                "masked": {}, "withheld": []}
    part = out + ".part"
    try:
        with open(part, "wb") as raw:
            frames = _Frames(raw)
            # _Frames only writes, all a "w:" tar asks; typeshed's fileobj protocol asks for reading too
            with tarfile.open(fileobj=frames, mode="w:", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for rel in files:
                    full = os.path.join(sweep, rel)
                    info = tar.gettarinfo(full, arcname=f"{name}/{rel}")
                    with open(full, "rb") as f:
                        body: IO[bytes] = f
                        if masking:   # an old sweep's secrets: each file as masking makes it
                            data, what = masking.file(rel, f.read())
                            if data is None:
                                manifest["withheld"].append(rel)
                                continue
                            if what:
                                manifest["masked"][rel] = what
                            info.size, body = len(data), io.BytesIO(data)
                        hashing = _Hashing(body)
                        tar.addfile(info, hashing)
                    manifest["files"][rel] = {"sha256": hashing.sha.hexdigest(), "bytes": hashing.size}
                    frames.end_frame()
                text = json.dumps(manifest, indent=1).encode()
                info = tarfile.TarInfo(f"{name}/{paths.ARCHIVE_MANIFEST}")
                info.size, info.mtime, info.mode = len(text), int(time.time()), 0o644
                tar.addfile(info, io.BytesIO(text))
                frames.end_frame()
            frames.end_frame()   # tar's end-of-archive blocks
            frames.seek_table()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(part, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise RecordError(f"cannot write the archive {out}: {exc.strerror or exc}") from None
    except RecordError:   # masking would change figures: no archive
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
    return out, manifest


def seek_table(f, size: int):
    """[(offset, compressed, decompressed)] of every frame, or None where the file ends in
    no seek table that agrees with its size."""
    if size < FOOTER.size + 8:
        return None
    f.seek(size - FOOTER.size)
    count, descriptor, magic = FOOTER.unpack(f.read(FOOTER.size))
    entry = 12 if descriptor & 0x80 else 8
    table = 8 + count * entry + FOOTER.size
    if magic != SEEKABLE_MAGIC or table > size:
        return None
    f.seek(size - table)
    head, body = struct.unpack("<II", f.read(8)), f.read(count * entry)
    if head != (SKIPPABLE_MAGIC, table - 8):
        return None
    out, at = [], 0
    for i in range(count):
        c, d = struct.unpack_from("<II", body, i * entry)
        out.append((at, c, d))
        at += c
    return out if at == size - table else None


def _members(data: bytes):
    """(name, bytes) of each regular file in a piece of tar."""
    if not data.strip(b"\0"):
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for m in tar:
            if m.isfile():
                yield m, tar.extractfile(m).read()  # type: ignore[union-attr]  # a file member's is never None


def _pieces(path: str):
    """The archive's pieces of tar, each (bytes, or None with why it is lost)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        table = seek_table(f, size)
        if table is None:   # a .tar.zst made elsewhere: one stream; damage ends it
            f.seek(0)
            reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
            try:
                yield reader.read(), None
            except zstandard.ZstdError as exc:
                raise RecordError(f"archive {path} is damaged ({exc}), and it has no seek "
                                  "table to read past the damage") from None
            return
        dctx = zstandard.ZstdDecompressor()
        for offset, c, d in table:
            f.seek(offset)
            try:
                data = dctx.decompress(f.read(c), max_output_size=d)
                yield (data, None) if len(data) == d else (None, "its size is not the seek table's")
            except zstandard.ZstdError as exc:
                yield None, f"its part of the archive does not decompress ({exc})"


@contextlib.contextmanager
def unpacked(path):
    """(folder, damaged): the archive unpacked into a temporary folder (removed after the
    block), the sweep's folder in it, and {file's path there: why it is damaged} for every
    file whose part did not decompress or whose sha256 is not the manifest's."""
    path = str(path)
    tmp = tempfile.mkdtemp(prefix="dlbench-archive-")
    try:
        got, lost = {}, []
        for data, why in _pieces(path):
            if data is None:
                lost.append(why)
                continue
            try:
                for member, content in _members(data):
                    tarfile.data_filter(member, tmp)   # no absolute paths, no '..', no links out
                    target = os.path.join(tmp, member.name)
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with open(target, "wb") as out:
                        out.write(content)
                    got[member.name] = hashlib.sha256(content).hexdigest()
            except (tarfile.TarError, OSError) as exc:
                lost.append(f"its part of the archive is not tar ({exc})")
        if not got and not lost:
            raise RecordError(f"archive {path} holds no file (a sweep's archive holds "
                              f"NAME/{paths.POINTS_DIR}/...)")
        tops = {n.split("/")[0] for n in got}
        name = tops.pop() if len(tops) == 1 else None
        manifest = records.read_json(os.path.join(tmp, name or "", paths.ARCHIVE_MANIFEST))
        if not isinstance(manifest, dict) or manifest.get("schema") != paths.ARCHIVE_SCHEMA:
            if lost:
                raise RecordError(f"archive {path} is damaged ({len(lost)} part(s): {lost[0]}) "
                                  "and has no readable manifest to say which files were lost")
            print(f"warning: archive {path} has no manifest: its files' checksums are not checked",
                  file=sys.stderr)
            yield os.path.join(tmp, name or ""), {}
            return
        damaged, top = {}, os.path.join(tmp, name)
        for rel, entry in sorted((manifest.get("files") or {}).items()):
            have = got.pop(f"{name}/{rel}", None)
            if have is None:
                damaged[os.path.join(top, rel)] = lost[0] if lost else "missing from the archive"
            elif have != (entry or {}).get("sha256"):
                damaged[os.path.join(top, rel)] = "its sha256 is not the archive manifest's"
        got.pop(f"{name}/{paths.ARCHIVE_MANIFEST}", None)
        for extra in got:
            damaged[os.path.join(tmp, extra)] = "not in the archive's manifest"
        yield top, damaged
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def relabel(results, folder: str, name: str):
    """`results` read from the unpacked `folder`, every path in it shown as `name` (the
    archive's) instead: sweeps, file names in errors, manifests' keys."""
    def fix(v):
        if isinstance(v, str):
            return v.replace(folder, name) if folder in v else v
        if isinstance(v, dict):
            return {fix(k): fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(fix(x) for x in v)
        if hasattr(v, "columns") and hasattr(v, "dtypes"):   # a DataFrame
            v = v.copy()
            for c in v.columns:
                if v[c].dtype == object or str(v[c].dtype) in ("str", "string"):
                    v[c] = v[c].map(fix)
            return v
        return v
    for attr, value in list(vars(results).items()):
        if attr not in ("_columns", "_steps"):
            setattr(results, attr, fix(value))
    return results
