"""A text file's SentencePiece ids, encoded once and cached beside it as .npy arrays.

``cached_token_array(path, tokenizer, side, cache_dir)`` returns the :class:`TokenArray`
of ``path`` (one sentence per line, read like :func:`attnmt.data.textio.read_lines`)
from ``cache_dir/ids-<file name>-<key>/`` (offsets memory-mapped, tokens read per
sentence by :class:`FileTokens`):

  tokens.npy   [n_tokens] int16 (uint16 / int32 for vocabularies above 32768 / 65536)
  offsets.npy  [n + 1] int64, sentence i = tokens[offsets[i]:offsets[i + 1]]
  meta.json    what the key was made of, counts and the encoding time

The key hashes the side's SentencePiece model bytes (so a retrained tokenizer or one
taken from a checkpoint never reuses another's ids), the file's name, size and mtime,
and :data:`CACHE_VERSION`. Encoding reads the file in chunks of :data:`CHUNK_LINES`
lines, encodes each on every core (SentencePiece's threads) and spills the ids to disk,
so memory stays flat however long the file is. The entry is built in a temporary
directory and renamed into place: an interrupted run leaves no entry that looks valid.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.atomic import atomic_dir
from attnmt.data.indexed import TokenArray, token_dtype
from attnmt.data.textio import utf8_lines
from attnmt.data.tokenizer import Tokenizer
from attnmt.errors import DataError
from attnmt.machine import usable_cores

CACHE_VERSION = 1
CHUNK_LINES = 100_000
TOKENS, OFFSETS, META = "tokens.npy", "offsets.npy", "meta.json"
_LOG = logging.getLogger(__name__)


def encode_threads() -> int:
    """The cores this process may run on (SentencePiece's encoding threads)."""
    return max(usable_cores(), 1)


def cache_key(path: Path, model_digest: str) -> dict[str, Any]:
    """What the cached ids of ``path`` depend on (hashed into the directory name)."""
    st = path.stat()
    return {
        "file": path.name,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "model_sha256": model_digest,
        "version": CACHE_VERSION,
    }


def entry_dir(path: Path, key: dict[str, Any], cache_dir: Path) -> Path:
    """``cache_dir/ids-<file name>-<first 16 hex of sha256(key)>``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"ids-{path.name}-{digest}"


class FileTokens:
    """A 1-D .npy file's values, read on demand with ``os.pread``: ``tokens[a:b]`` [b - a].

    A memory map would serve the same slices, but every page it touches stays mapped,
    and the kernel maps 64 KiB around each one: over an epoch of random pairs the whole
    file would count in the process' resident set. Reads through the file descriptor come
    from the page cache just as fast and leave the process' memory alone.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with self.path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            if version != (1, 0):
                raise DataError(f"{path}: .npy format {version}, expected (1, 0)")
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            self.start = f.tell()
        if len(shape) != 1 or fortran or dtype.hasobject:
            raise DataError(f"{path}: expected a 1-D array of integers, found {shape} {dtype}")
        self.dtype, self.shape = dtype, shape
        self._open()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return 1

    def __getitem__(self, part: slice) -> np.ndarray:
        a, b, step = part.indices(len(self))
        if step != 1:
            raise IndexError("FileTokens: only contiguous slices")
        size = self.dtype.itemsize
        raw = os.pread(self._fd, max(b - a, 0) * size, self.start + a * size)
        return np.frombuffer(raw, dtype=self.dtype)

    def __getstate__(self) -> dict[str, Any]:  # a DataLoader worker opens its own
        return {k: v for k, v in self.__dict__.items() if k != "_fd"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open()


def load_token_array(directory: Path) -> TokenArray:
    """The arrays of a cache entry: offsets memory-mapped read-only (every one is read for
    the lengths), tokens read per sentence (:class:`FileTokens`; a memory map where
    ``os.pread`` is missing)."""
    offsets = np.asarray(np.load(directory / OFFSETS, mmap_mode="r"))
    if hasattr(os, "pread"):
        return TokenArray(FileTokens(directory / TOKENS), offsets)
    return TokenArray(np.asarray(np.load(directory / TOKENS, mmap_mode="r")), offsets)


def encode_file(
    path: Path, tokenizer: Tokenizer, side: str, out: Path, threads: int
) -> dict[str, Any]:
    """Write ``out/tokens.npy`` and ``out/offsets.npy`` for ``path``; returns the counts."""
    vocab = tokenizer.src_vocab_size if side == "src" else tokenizer.tgt_vocab_size
    encode = tokenizer.encode_src if side == "src" else tokenizer.encode_tgt
    dtype = token_dtype(vocab)
    lengths: list[np.ndarray] = []
    raw = out / "tokens.raw"
    with path.open("rb") as f, raw.open("wb") as spill:
        lines = utf8_lines(f, f"{path}:", "convert the file to UTF-8")
        while chunk := list(itertools.islice(lines, CHUNK_LINES)):
            ids = encode(chunk, num_threads=threads)
            n = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(n.sum()))
            flat.tofile(spill)
            lengths.append(n)
    offsets = np.zeros(sum(map(len, lengths)) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    with (out / TOKENS).open("wb") as f, raw.open("rb") as spill:
        np.lib.format.write_array_header_1_0(f, {**header, "shape": (int(offsets[-1]),)})
        shutil.copyfileobj(spill, f, 1 << 22)
    raw.unlink()
    np.save(out / OFFSETS, offsets)
    return {"sentences": len(offsets) - 1, "tokens": int(offsets[-1]), "dtype": dtype.name}


def cached_token_array(
    path: Path,
    tokenizer: Tokenizer,
    side: str,
    cache_dir: Path,
    log: logging.Logger | None = None,
) -> TokenArray:
    """``path`` encoded with the ``side`` ("src"/"tgt") model: from the cache, or encoded
    into it first (see the module docstring)."""
    log = log or _LOG
    path, cache_dir = Path(path), Path(cache_dir)
    if not path.is_file():
        raise DataError(f"{path}: file not found; cannot encode it")
    key = cache_key(path, tokenizer.model_digest(side))
    target = entry_dir(path, key, cache_dir)
    if (target / META).is_file():
        log.info("train ids: loaded %s", target)
        return load_token_array(target)
    started, threads = time.perf_counter(), encode_threads()
    # meta.json is written last: an entry without it is damaged and replaced; with it, a
    # concurrent run finished first and its entry is kept
    with atomic_dir(target, complete=lambda p: (p / META).is_file()) as tmp:
        counts = encode_file(path, tokenizer, side, tmp, threads)
        if cache_key(path, key["model_sha256"]) != key:
            raise DataError(f"{path} changed while it was encoded; run again")
        seconds = time.perf_counter() - started
        meta = {"key": key, **counts, "encode_s": round(seconds, 3), "threads": threads}
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n")
    n = counts["sentences"]
    log.info(
        "train ids: encoded %s: %d sentences, %d pieces (%s) in %.1f s (%.0f sentences/s, "
        "%d threads) -> %s",
        path.name,
        n,
        counts["tokens"],
        counts["dtype"],
        seconds,
        n / max(seconds, 1e-9),
        threads,
        target,
    )
    return load_token_array(target)
