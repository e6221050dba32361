"""What a secret is, and how it is masked: the one rule every writer of the suite applies
(docs/configuration.md, "Secrets"). Configuration is recorded so that a run can be
reproduced; a secret is configuration that must not be.

A secret is
- a value under a key that names one: a word of the key (split on `_`, `-`, `.` and
  camelCase, case-insensitive) is TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, CREDENTIALS,
  AUTH or COOKIE, or two words in a row are API KEY, ACCESS KEY or PRIVATE KEY (AUTHOR,
  TOKENS, MONKEY are none); libpq's PGPASSWORD; and the site's own keys (`cluster.secret_keys`,
  each matched as a run of whole words the same way: `license` names LM_LICENSE_KEY);
- a URL's password (`scheme://user:PASSWORD@host`, Hydra's escaped `\\:` too), and in text a
  `KEY=VALUE` or `KEY: VALUE` whose KEY names one (a URL's `?password=...`);
- a value already known to be one (`values`: those of the process environment's secret
  variables, or those a sweep's old files hold), wherever it appears in a text.

A masked value reads `***`, so that a reader still sees it was set; True, False, None and
empty values are left as they are (they say nothing), and so is a whole `${...}`
interpolation (it names where the value comes from, not the value). Standard library only:
workers, launchers and the analysis all read it.
"""
import contextlib
import functools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

Strs = tuple[str, ...]

MASK = "***"
WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "AUTH",
                   "COOKIE"})
PAIRS = (("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"))
NAMES = frozenset({"PGPASSWORD"})   # one word, but libpq's password
SITE_KEYS = "secret_keys"           # the site file's list of its own (contract/point.py Cluster)
MIN_KNOWN = 6                       # a known value shorter than this is not searched for in text

_SPLIT = re.compile(r"[_.\-\s]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_URL = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*\\?://[^\s:/@'\"\\]*\\?:)"
                  r"(?P<pw>[^\s@/'\"]+)(?=@)")
# KEY=VALUE anywhere; "KEY": VALUE (JSON, a dict's repr); KEY: VALUE at a line's start (YAML),
# not in prose ("holding a secret: x"). A value ends at a space, a quote, &, a comma that ends
# a phrase, or the next `,KEY=` (Hydra's override_dirname: a=1,HF_TOKEN=x,b=2); a sweep's
# a,b is one value.
_KEY = r"[A-Za-z_][\w.\-]*"
_ASSIGN = re.compile(rf"(?:(?P<key>{_KEY})\s*=\s*[\"']?"
                     rf"|(?<=[\"'])(?P<qkey>{_KEY})[\"']\s*:\s*[\"']?"
                     rf"|^[ \t]*(?:-[ \t]+)?(?P<lkey>{_KEY}):[ \t]+[\"']?)"
                     rf"(?P<value>(?:(?!,[+~]*{_KEY}=|,\s|,$)[^\s\"'&])+)", re.M)
_INTERPOLATION = re.compile(r"^\$\{[^{}]*\}$")


def words(key: object) -> Strs:
    """The key's words, upper case: HF_TOKEN, hf-token, hf.token and hfToken all (HF, TOKEN)."""
    return tuple(w.upper() for w in _SPLIT.split(_CAMEL.sub("_", str(key))) if w)


def _has_run(ws: Strs, run: Strs) -> bool:
    n = len(run)
    return n > 0 and any(ws[i:i + n] == run for i in range(len(ws) - n + 1))


def is_secret_key(key: object, extra: Iterable[str] = ()) -> bool:
    """Whether a value under `key` is a secret: the rule's words, PGPASSWORD, or one of the
    site's `extra` keys, each a run of whole words of the key."""
    return _is_secret(str(key), tuple(extra))


@functools.lru_cache(maxsize=8192)   # a sweep's files repeat the same keys
def _is_secret(key: str, extra: Strs) -> bool:
    if key == SITE_KEYS:   # the site's list names keys; it holds no value
        return False
    ws = words(key)
    if WORDS.intersection(ws) or "".join(ws) in NAMES:
        return True
    return any(_has_run(ws, run) for run in PAIRS) or any(_has_run(ws, words(e)) for e in extra)


def mask_url(text: str) -> str:
    """`text` with every URL's password masked: scheme://user:***@host."""
    return _URL.sub(lambda m: m["head"] + MASK, text) if "@" in text else text


def mask_text(text: str, extra: Iterable[str] = (), values: Iterable[object] = ()) -> str:
    """A text (a message, a log line, an override) with its secrets masked: known `values`,
    URLs' passwords, and the values of KEY=VALUE / KEY: VALUE whose KEY names a secret."""
    return _mask_text(text, tuple(extra), _known(values))


def _known(values: Iterable[object]) -> Strs:
    """The values searched for in text: long enough, the longest first."""
    return tuple(sorted({str(v) for v in values if v and len(str(v)) >= MIN_KNOWN}, key=len,
                        reverse=True))


def _mask_text(text: str, extra: Iterable[str], known: Strs) -> str:
    for v in known:
        if v in text:
            text = text.replace(v, MASK)
    text = mask_url(text)
    if "=" not in text and ":" not in text:
        return text
    return "".join(_assignments(text, extra, MASK))


def _assignments(text: str, extra: Iterable[str], mask: str | None) -> Iterator[str]:
    """The pieces of `text`, each secret assignment's value as `mask` (None: the value
    itself, for `found`); a value that is not a secret is read on, for one inside it
    (override_dirname: a=1,HF_TOKEN=x)."""
    pos = 0
    while True:
        m = _ASSIGN.search(text, pos)
        if m is None:
            yield text[pos:] if mask is not None else ""
            return
        if is_secret_key(m["key"] or m["qkey"] or m["lkey"], extra):
            yield text[pos:m.start("value")] + mask if mask is not None else m["value"]
            pos = m.end()
        else:
            yield text[pos:m.start("value")] if mask is not None else ""
            pos = m.start("value")


def _secret_value(value: object) -> bool:
    """Whether a value under a secret key says anything (True, False, None, "" do not)."""
    return not (value is None or isinstance(value, bool) or value == "" or value == MASK
                or (isinstance(value, str) and _INTERPOLATION.match(value)))


def _kind(o: object) -> int:
    """0 a leaf, 1 a mapping, 2 a list (dict, list and str first: the ABCs are slow)."""
    t = type(o)
    if t is dict:
        return 1
    if t is list or t is tuple:
        return 2
    if t is str or o is None or t is int or t is float or t is bool:
        return 0
    return 1 if isinstance(o, Mapping) else 2 if isinstance(o, (list, tuple)) else 0


def _secret(key: object, extra: Strs) -> bool:
    return _is_secret(key if type(key) is str else str(key), extra)


def declared(obj: object) -> Strs:
    """The site's own secret keys wherever `obj` holds them (cluster.secret_keys of a point,
    of a spec's config, of a rank record's spec)."""
    keys: list[str] = []

    def walk(o: Any) -> None:
        kind = _kind(o)
        if kind == 1:
            for k, v in o.items():
                if k == SITE_KEYS and _kind(v) == 2:
                    keys.extend(str(e) for e in v)
                elif type(v) is not str:
                    walk(v)
        elif kind == 2:
            for v in o:
                walk(v)
    walk(obj)
    return tuple(dict.fromkeys(keys))


def _dotted(where: Any) -> str:
    """A path kept as nested (parent, key) pairs, as dotted text."""
    parts: list[str] = []
    while where:
        where, key = where
        parts.append(str(key))
    return ".".join(reversed(parts))


def changes(obj: Any, extra: Iterable[str] = (), values: Iterable[object] = ()) -> tuple[Any, list[str]]:
    """(a copy of `obj` with its secrets masked, the dotted paths of what was masked). Mappings
    become dicts and lists stay lists; the site's keys `obj` declares count with `extra`."""
    keys, known = tuple(extra) + declared(obj), _known(values)
    changed: list[str] = []

    def walk(o: Any, where: Any, secret: bool) -> Any:
        kind = _kind(o)
        if kind == 1:
            return {k: walk(v, (where, k), secret or _secret(k, keys)) for k, v in o.items()}
        if kind == 2:
            return [walk(v, (where, i), secret) for i, v in enumerate(o)]
        if secret and _secret_value(o):
            out = MASK
        elif type(o) is str:
            out = _mask_text(o, keys, known)
        else:
            return o
        if out != o:
            changed.append(_dotted(where))
        return out

    return walk(obj, None, False), changed


def masked(obj: Any, extra: Iterable[str] = (), values: Iterable[object] = ()) -> Any:
    """A copy of `obj` (a mapping, a list, a text) with its secrets masked (`changes`)."""
    return changes(obj, extra, values)[0]


def found(obj: object, extra: Iterable[str] = ()) -> set[str]:
    """The secret values `obj` holds: under secret keys, in URLs, in KEY=VALUE texts (what an
    old sweep's files give away, to be searched for in its other files)."""
    keys = tuple(extra) + declared(obj)
    out: set[str] = set()

    def text(s: str) -> None:   # Hydra escapes ':' in an override's value (\\:)
        got = [m["pw"] for m in _URL.finditer(s)] if "@" in s else []
        if "=" in s or ":" in s:
            got += [x for v in _assignments(s, keys, None) if v for x in (v, *v.split(","))]
        out.update(v.replace("\\", "") for v in got)

    def walk(o: Any, secret: bool) -> None:
        kind = _kind(o)
        if kind == 1:
            for k, v in o.items():
                walk(v, secret or _secret(k, keys))
        elif kind == 2:
            for v in o:
                walk(v, secret)
        elif secret and _secret_value(o):
            out.add(str(o))
        elif type(o) is str:
            text(o)
    walk(obj, False)
    return {v for v in out if v and MASK not in v}


def environ_values(environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> Strs:
    """The values of this process's secret variables (the rule's names, and `extra`): masked
    wherever they would be written."""
    env = os.environ if environ is None else environ
    return tuple(v for k, v in env.items() if len(v) >= MIN_KNOWN and is_secret_key(k, extra))


def is_masked(value: object) -> bool:
    """Whether a recorded value was masked (it holds `***`)."""
    return isinstance(value, str) and MASK in value


class MaskedStream:
    """A text stream whose writes are masked (sys.stdout, sys.stderr of a command): what it
    prints, its own messages, a library's (Hydra echoing an override) or a traceback, shows
    no secret."""

    def __init__(self, stream: TextIO, values: Iterable[object] = ()) -> None:
        self._stream, self._known = stream, _known(values)

    def write(self, text: str) -> int:
        self._stream.write(_mask_text(text, (), self._known) if isinstance(text, str) else text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def masked_output(argv: Iterable[str] = ()) -> Iterator[None]:
    """sys.stdout and sys.stderr masked for the while, the secrets of `argv` (a command's
    arguments: its overrides) and of this process's environment known."""
    values = found(list(argv)) | set(environ_values())
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskedStream(out, values), MaskedStream(err, values)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
