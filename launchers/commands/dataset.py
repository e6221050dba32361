"""`python -m launch dataset OUT [--images N] [--classes C] [--sequences S] [--seed S]`:
a small, realistic dataset to train from files (data=files data.path=OUT; docs/data.md).

    python -m launch dataset /tmp/data
    python -m launch -m bench=input data=files data.path=/tmp/data data.workers=1,2 preset=smoke

    OUT/train/<class>/<class>_<k>.JPEG   ImageNet's layout: JPEGs of 300 to 500 px a side
                                         at quality 90, content that compresses like photos
    OUT/bert/pretrain-00000.npz          BERT pretraining sequences (frameworks/common/datafiles.py)
    OUT/dataset.json                     what wrote it

Deterministic from the seed: each image from its own generator (seed, index). The whole
folder is built beside OUT and renamed into place, so OUT is whole or absent.

Exit status (docs/statuses.md): 0 when OUT is written; 2 on bad input (a count < 1, more
classes than images, an OUT that is not an empty folder) or an OUT that cannot be written.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from frameworks.common import datafiles, synthetic
from contract import exits, paths

SIDES = (300, 500)           # ImageNet's images are mostly 300 to 500 px a side
QUALITY = 90                 # a typical ImageNet JPEG quality
BERT = {"name": "bert_base", "seq_len": 128, "vocab_size": 30522, "mask_prob": 0.15,
        "max_predictions_per_seq": 20}   # the full model's; the tiny size reads ids modulo its vocab


def class_name(c: int) -> str:
    return f"n{c:08d}"   # ImageNet's folders are WordNet ids: n01440764, ...


def image(seed: int, index: int, label: int):
    """One photo-like RGB image (PIL): smooth colour fields at two scales, a few shapes
    with hard edges, a class tint and sensor-like noise, so that JPEG spends on it about
    what it spends on a photo (tens of KB, not the few hundred bytes of a flat colour)."""
    from PIL import Image, ImageDraw
    rng = np.random.default_rng([seed, index])
    w, h = (int(v) for v in rng.integers(SIDES[0], SIDES[1] + 1, 2))
    tint = np.random.default_rng([seed, 1 << 30, label]).integers(-40, 41, 3)

    def field(cells, spread):
        small = np.clip(128 + spread * rng.standard_normal((cells[1], cells[0], 3)), 0, 255)
        return Image.fromarray(small.astype(np.uint8)).resize((w, h), Image.BICUBIC)

    base = field((int(rng.integers(3, 8)), int(rng.integers(3, 8))), 60)
    draw = ImageDraw.Draw(base)
    for _ in range(int(rng.integers(3, 9))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(20, w // 2)), y0 + int(rng.integers(20, h // 2))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=colour)
    # int16 arithmetic: a third of float's time, and the generator is what costs here
    detail = np.asarray(field((max(2, w // 12), max(2, h // 12)), 50), np.int16) // 2 - 64
    pixels = np.asarray(base, np.int16) + detail + tint.astype(np.int16)
    pixels += rng.integers(-12, 13, (h, w, 3), dtype=np.int16)   # sensor-like noise
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_images(out: str, images: int, classes: int, seed: int) -> int:
    total = 0
    for c in range(classes):
        os.makedirs(os.path.join(out, paths.IMAGES_DIR, class_name(c)))
    for i in range(images):
        c = i % classes
        path = os.path.join(out, paths.IMAGES_DIR, class_name(c),
                            f"{class_name(c)}_{i // classes}.JPEG")
        image(seed, i, c).save(path, "JPEG", quality=QUALITY)
        total += os.path.getsize(path)
    return total


def write_bert(out: str, sequences: int, seed: int) -> None:
    """The synthetic batch's rules (frameworks/common/synthetic.py) as a file: token ids,
    token types, attention mask, P = 20 masked positions (sorted, padded with 0), their
    labels (padded with -100) and the NSP label, int32."""
    inputs, labels = synthetic.arrays(BERT, sequences, seed, int_dtype="int32")
    arrays = dict(zip(datafiles.BERT_INPUTS + datafiles.BERT_LABELS, inputs + labels))
    os.makedirs(os.path.join(out, paths.BERT_DIR))
    np.savez(os.path.join(out, paths.BERT_DIR, paths.bert_shard_name(0)), **arrays)


def build(out: str, images: int, classes: int, sequences: int, seed: int) -> dict:
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".dataset-", dir=parent)
    try:
        t0 = time.perf_counter()
        jpeg_bytes = write_images(tmp, images, classes, seed)
        write_bert(tmp, sequences, seed)
        manifest = {"schema": paths.DATASET_SCHEMA, "version": paths.SCHEMA_VERSION,
                    "seed": seed, "images": images, "classes": classes,
                    "image_sides": list(SIDES), "jpeg_quality": QUALITY,
                    "jpeg_bytes": jpeg_bytes, "sequences": sequences,
                    "bert": {k: BERT[k] for k in ("seq_len", "vocab_size", "max_predictions_per_seq")},
                    "bert_arrays": list(datafiles.BERT_INPUTS + datafiles.BERT_LABELS),
                    "seconds": round(time.perf_counter() - t0, 2)}
        with open(os.path.join(tmp, paths.DATASET_FILE), "w") as f:
            json.dump(manifest, f, indent=1)
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide it from other users
        if os.path.isdir(out):
            os.rmdir(out)  # empty (checked before): replaced by the finished folder
        os.rename(tmp, out)
        return manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch dataset", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the folder to create (absent or empty)")
    parser.add_argument("--images", type=int, default=1000, help="JPEGs in all (default 1000)")
    parser.add_argument("--classes", type=int, default=10, help="class folders (default 10)")
    parser.add_argument("--sequences", type=int, default=1024,
                        help="BERT sequences of 128 tokens (default 1024)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    problem = None
    for key in ("images", "classes", "sequences"):
        if getattr(args, key) < 1:
            problem = f"--{key} must be >= 1, got {getattr(args, key)}"
    if args.classes > args.images:
        problem = problem or f"--classes {args.classes} is more than --images {args.images}"
    if os.path.exists(args.out) and not (os.path.isdir(args.out) and not os.listdir(args.out)):
        problem = problem or f"{args.out} exists and is not an empty folder"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return exits.REFUSED
    try:
        m = build(args.out, args.images, args.classes, args.sequences, args.seed)
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return exits.REFUSED
    print(f"{args.out}: {m['images']} JPEGs in {m['classes']} classes "
          f"({m['jpeg_bytes'] / m['images'] / 1024:.0f} KiB each on average), "
          f"{m['sequences']} BERT sequences, in {m['seconds']} s")
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
