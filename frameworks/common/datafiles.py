"""Training from files (`data=files`), the part every framework shares: what the point
asks for, the files of a dataset folder, each rank's disjoint shard, the order of its
samples across epochs, and a digest of the sample ids a rank has seen (docs/data.md).

Each framework reads the files with its own standard pipeline (frameworks/<name>/);
what it reads, and in which order, is decided here once, so that every framework's
rank r sees the same samples. Standard library only (numpy, imported where a BERT shard
is read, is in every framework's environment).
"""
import hashlib
import os
import random

from . import capability
from contract import models, paths

SYNTHETIC, FILES = "synthetic", "files"
# A BERT shard's arrays (numpy .npz; every framework's env has numpy), in the order of
# synthetic.arrays: inputs, then labels. Shapes (N, seq_len) or (N, P); nsp (N,).
BERT_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "masked_positions")
BERT_LABELS = ("masked_ids", "nsp_labels")
IGNORE = -100                               # a padded masked position's label
MEAN = (0.485, 0.456, 0.406)                # ImageNet's, on 0..1 pixels (torchvision's)
STD = (0.229, 0.224, 0.225)


class CorruptFile(Exception):
    """A file of the dataset cannot be decoded: the rank fails with the file named."""


def reads_files(spec) -> bool:
    """Whether the point trains from files (the harness then builds the bench's data=files
    session, frameworks/registry.py); Unsupported for a model no pipeline reads (its spec's
    `files`, contract/models/)."""
    if settings(spec)["source"] != FILES:
        return False
    if not models.get(spec.model.name).files:
        raise capability.Unsupported(f"data=files is not implemented for {spec.model.name} yet")
    return True


def images(model: str) -> bool:
    """Whether `model` trains on images (a folder of class folders), else on BERT shards."""
    return models.get(model).inputs == models.IMAGES


def wanted(model: str) -> str:
    """What a dataset folder must hold for `model`, as a refusal names it."""
    return f"{paths.IMAGES_DIR}/<class>/*.JPEG" if images(model) else f"{paths.BERT_DIR}/pretrain-*.npz"


def settings(spec, dist=None) -> dict:
    """The point's data settings: source, path, backend, workers (resolved: `null` is the
    cores given to this rank). A spec without `data` (written before it existed) is
    synthetic."""
    data = spec.data
    source = data.get("source", SYNTHETIC)
    if source != FILES:
        return {"source": SYNTHETIC, "path": None, "backend": None, "workers": 0}
    backend = data.get("backend") or "default"
    workers = data.get("workers")
    return {"source": FILES, "path": data.get("path"), "backend": backend,
            "workers": rank_cores(dist) if workers is None else int(workers)}


def rank_cores(dist=None) -> int:
    """The cores given to this rank: Slurm's --cpus-per-task where set, else this
    process's CPUs shared among the node's ranks."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    if slurm and slurm.isdigit():
        return max(1, int(slurm))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, cpus // (dist.local_world_size if dist is not None else 1))


def require(spec, framework: str, backends=(), dist=None) -> dict:
    """The settings, or Unsupported where the framework has no pipeline for them:
    `backends` are those it implements, its default first (none: data=files not
    implemented yet)."""
    s = settings(spec, dist)
    if s["source"] != FILES:
        return s
    if not backends:
        raise capability.Unsupported(f"data=files not implemented for {framework} yet")
    if s["backend"] == "default":
        s["backend"] = backends[0]
    if s["backend"] not in backends:
        raise capability.Unsupported(f"data.backend={s['backend']} is not available for "
                                     f"{framework} here (implemented: {', '.join(backends)})")
    return s


# ---- the files ------------------------------------------------------------------------
def image_files(root: str):
    """(paths, labels, class names) of ROOT/train/<class>/<file>: classes sorted by name
    and numbered from 0 (ImageNet's rule), files sorted within their class."""
    top = os.path.join(root, paths.IMAGES_DIR)
    classes = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d)))
    files, labels = [], []
    for label, name in enumerate(classes):
        folder = os.path.join(top, name)
        for f in sorted(os.listdir(folder)):
            if f.lower().endswith(paths.IMAGE_SUFFIXES):
                files.append(os.path.join(folder, f))
                labels.append(label)
    return files, labels, classes


def bert_shards(root: str) -> list:
    folder = os.path.join(root, paths.BERT_DIR)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names if paths.BERT_SHARD_RE.match(n))


def load_bert(root: str, model_cfg: dict) -> dict:
    """Every shard's arrays, concatenated, fitted to the model: token ids taken modulo a
    smaller vocabulary (the tiny size's), labels -100 kept."""
    import numpy as np
    parts = []
    for path in bert_shards(root):
        try:
            with np.load(path) as z:
                parts.append({k: z[k] for k in BERT_INPUTS + BERT_LABELS})
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptFile(f"cannot read {path}: {exc}") from None
    if not parts:
        raise CorruptFile(f"no BERT shard under {os.path.join(root, paths.BERT_DIR)}")
    arrays = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    seq, p = arrays["input_ids"].shape[1], arrays["masked_positions"].shape[1]
    if seq != model_cfg["seq_len"] or p != int(model_cfg["max_predictions_per_seq"]):
        raise CorruptFile(f"BERT shard has seq_len {seq} and {p} masked positions; the model "
                          f"wants {model_cfg['seq_len']} and {model_cfg['max_predictions_per_seq']}")
    vocab = model_cfg["vocab_size"]
    arrays["input_ids"] = arrays["input_ids"] % vocab
    ids = arrays["masked_ids"]
    arrays["masked_ids"] = np.where(ids == IGNORE, IGNORE, ids % vocab)
    return arrays


def has_samples(root: str, model: str) -> bool:
    """Whether the folder holds anything `model` reads, found without listing it all
    (ImageNet's train/ has 1.28 million files)."""
    if not images(model):
        return bool(bert_shards(root))
    top = os.path.join(root, paths.IMAGES_DIR)
    try:
        for entry in os.scandir(top):
            if entry.is_dir() and any(f.lower().endswith(paths.IMAGE_SUFFIXES)
                                      for f in os.listdir(entry.path)):
                return True
    except OSError:
        pass
    return False


def available(root: str, model: str) -> int:
    """How many samples of `model` the folder holds (0 when none)."""
    try:
        if not images(model):
            import numpy as np
            return sum(int(np.load(p, mmap_mode="r")["nsp_labels"].shape[0])
                       for p in bert_shards(root))
        return len(image_files(root)[0])
    except (OSError, ValueError, KeyError):
        return 0


# ---- who reads what, in which order ---------------------------------------------------
def shard(n: int, rank: int, world: int) -> list:
    """This rank's sample ids: every world-th id from `rank` (disjoint, covering all)."""
    return list(range(rank, n, world))


def epoch_order(ids: list, seed: int, epoch: int) -> list:
    """The rank's ids in epoch `epoch`'s order: a shuffle seeded by (seed, epoch)."""
    order = list(ids)
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return order


def batches(ids: list, batch_size: int, seed: int):
    """Endless batches of sample ids: epoch after epoch, each reshuffled; a batch that
    reaches an epoch's end is filled from the next (the loader wraps around)."""
    if not ids:
        raise CorruptFile("this rank's shard is empty: fewer samples than ranks")
    epoch = 0
    pending: list = []
    while True:
        while len(pending) < batch_size:
            pending += epoch_order(ids, seed, epoch)
            epoch += 1
        yield pending[:batch_size]
        pending = pending[batch_size:]


def _id_hash(i: int) -> int:
    return int.from_bytes(hashlib.blake2b(str(int(i)).encode(), digest_size=8).digest(), "big")


def ids_digest(ids) -> str:
    """An order-free digest of a set of sample ids: XOR of each id's 64-bit hash. Disjoint
    sets' digests XOR to their union's; an id two ranks both saw cancels out."""
    d = 0
    for i in set(int(i) for i in ids):
        d ^= _id_hash(i)
    return f"{d:016x}"


class Seen:
    """The sample ids a rank consumed, for its record (`data` field)."""

    def __init__(self):
        self.ids, self.samples = set(), 0

    def add(self, ids) -> None:
        ids = [int(i) for i in ids]
        self.samples += len(ids)
        self.ids.update(ids)

    def record(self) -> dict:
        return {"samples_read": self.samples, "ids_distinct": len(self.ids),
                "ids_digest": ids_digest(self.ids)}


def crop_box(width: int, height: int, rng: random.Random, scale=(0.08, 1.0),
             ratio=(3 / 4, 4 / 3)):
    """RandomResizedCrop's box (left, top, right, bottom), torchvision's algorithm: an area
    of `scale` of the image at an aspect ratio of `ratio` (log-uniform), 10 tries, then
    the centre crop at the nearest allowed ratio."""
    import math
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            left, top = rng.randint(0, width - w), rng.randint(0, height - h)
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def sample_rng(seed: int, sample_id: int, serial: int) -> random.Random:
    """The augmentation's random numbers for one read of one sample (`serial`: how many
    samples the rank had read before), the same whichever loader worker decodes it."""
    return random.Random(f"{seed}:{sample_id}:{serial}")


# ---- a loader's samples, in numpy, for the loaders that decode with PIL ---------------
class KeyBatches:
    """`batches` as keys (sample id, serial), for a DataLoader's batch_sampler (endless: it
    has no length). The serial, how many samples the rank read before, seeds the sample's
    augmentation (sample_rng) in whichever loader worker decodes it."""

    def __init__(self, ids: list, batch_size: int, seed: int):
        self.ids, self.batch_size, self.seed = ids, batch_size, seed

    def __iter__(self):
        serial = 0
        for batch in batches(self.ids, self.batch_size, self.seed):
            yield [(i, serial + k) for k, i in enumerate(batch)]
            serial += len(batch)


def pil_image(path: str, size: int, rng: random.Random, chw: bool = True):
    """Decode, RandomResizedCrop to size x size (bilinear), flip half of the time: uint8."""
    import numpy as np
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB")
        box = crop_box(im.width, im.height, rng)
        im = im.resize((size, size), Image.Resampling.BILINEAR, box=box)
    if rng.random() < 0.5:
        im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    pixels = np.asarray(im, dtype=np.uint8)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1)) if chw else pixels


class Samples:
    """A map-style dataset of numpy samples that a framework's DataLoader (PyTorch, Paddle,
    OneFlow, MXNet's gluon) reads with its workers: key (sample id, serial) ->
    (*inputs, *labels, id, ok). Images: (uint8 image, label); BERT: its six arrays. A file
    that cannot be decoded comes back as ok = 0, so that the main process names it however
    many workers there are (`check`)."""

    def __init__(self, spec, data: dict, chw: bool = True):
        cfg = spec.model
        self.images, self.seed, self.chw = images(cfg.name), spec.seed, chw
        if self.images:
            self.paths, labels, _ = image_files(data["path"])
            self.labels = [y % cfg["num_classes"] for y in labels]
            self.size = cfg["image_size"]
        else:
            self.arrays = load_bert(data["path"], cfg)

    def __len__(self):
        return len(self.paths) if self.images else len(self.arrays["nsp_labels"])

    def __getitem__(self, key):
        import numpy as np
        i, serial = (int(k) for k in key)
        if not self.images:
            return (*(self.arrays[k][i].astype(np.int64) for k in BERT_INPUTS + BERT_LABELS),
                    i, 1)
        try:
            x = pil_image(self.paths[i], self.size, sample_rng(self.seed, i, serial), self.chw)
        except Exception:  # noqa: BLE001  (PIL raises OSError, SyntaxError, ValueError...)
            shape = (3, self.size, self.size) if self.chw else (self.size, self.size, 3)
            return np.zeros(shape, np.uint8), 0, i, 0
        return x, self.labels[i], i, 1

    def take(self, fields, seen: "Seen"):
        """(inputs, labels) of a collated batch's fields (tensors or arrays; the last two are
        the sample ids and whether each decoded): `check`ed, the ids added to `seen`."""
        ids = fields[-2].tolist()
        self.check(ids, fields[-1].tolist())
        seen.add(ids)
        n = 1 if self.images else len(BERT_INPUTS)
        return tuple(fields[:n]), tuple(fields[n:-2])

    def check(self, ids, oks) -> None:
        """CorruptFile naming the first sample of a batch that could not be decoded."""
        for i, ok in zip(ids, oks):
            if not ok:
                try:
                    pil_image(self.paths[int(i)], self.size, random.Random(0))
                    why = "decoding failed in a loader worker"
                except Exception as exc:  # noqa: BLE001
                    why = f"{type(exc).__name__}: {exc}"
                raise CorruptFile(f"cannot decode {self.paths[int(i)]}: {why}")


class FromLoader:
    """Mixed into a session fed by a data=files loader (`self.loader`, which the adapter
    sets): each step trains on the loader's next batch, put where the synthetic batch would
    be, and the record says what this rank read. It comes first among the bases, so that
    its step wraps the framework session's; a session that steps otherwise overrides step."""

    def step(self):
        self.inputs, self.labels = self.loader.next()
        return super().step()

    def data_record(self):
        return self.loader.seen.record()
