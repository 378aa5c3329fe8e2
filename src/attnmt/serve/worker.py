"""One decode thread per model: a bounded queue of requests, drained into batches.

Requests wait in a queue of ``queue_size``; a full queue refuses the next at once
(:class:`QueueFull`, the API's 503) instead of letting it wait without end. The thread takes
the oldest request and every queued request that decodes the same way (same beam and
alpha: :meth:`Options.batch_key`) up to ``batch_lines`` lines, and decodes their lines in
one call of the Translator, which length-sorts and batches them itself. A request's
n-best lists are cut to its own ``n_best`` (beam search does not depend on it), so batching
never changes a translation. A request whose client has given up (its future was
cancelled) is skipped. An error in one batch fails only that batch's requests.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from attnmt.serve.backend import Options, ServedModel

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The model's queue holds ``queue_size`` requests already."""


@dataclass
class Job:
    """One request: its lines, options and where its result goes."""

    lines: list[str]
    options: Options
    future: Future = field(default_factory=Future)


_STOP = object()


class DecodeWorker:
    """The thread that decodes every request of one model (see the module docstring)."""

    def __init__(self, model: ServedModel, queue_size: int, batch_lines: int) -> None:
        self.model = model
        self.batch_lines = batch_lines
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._held: list[Job] = []  # taken from the queue, not yet decodable with the last batch
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: called with the sizes of each decoded batch (tests and logs)
        self.on_batch: Callable[[list[int]], None] | None = None

    def submit(self, lines: list[str], options: Options) -> Future:
        """Queue a request; its Future gets the per-line results. QueueFull when full."""
        self._ensure_started()
        job = Job(lines, options)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise QueueFull from None
        return job.future

    def pending(self) -> int:
        """Requests waiting (queued, not yet taken)."""
        return self._queue.qsize()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread after the batch in flight (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        with contextlib.suppress(queue.Full):  # else a daemon thread: ends with the process
            self._queue.put(_STOP, timeout=timeout)
        thread.join(timeout)

    def _ensure_started(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"decode-{self.model.label}", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._held.pop(0) if self._held else self._queue.get()
            if first is _STOP:
                return
            batch = [first, *self._compatible(first)]
            batch = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if batch:
                self._decode(batch)

    def _compatible(self, first: Job) -> list[Job]:
        """Queued jobs that decode like ``first``, within ``batch_lines`` lines; the others
        are held, in order, for the next rounds."""
        key, size, taken = first.options.batch_key(), len(first.lines), []
        candidates, self._held = self._held, []
        while True:
            try:
                candidates.append(self._queue.get_nowait())
            except queue.Empty:
                break
        for job in candidates:
            if job is _STOP:
                self._held.append(job)
            elif job.options.batch_key() == key and size + len(job.lines) <= self.batch_lines:
                taken.append(job)
                size += len(job.lines)
            else:
                self._held.append(job)
        return taken

    def _decode(self, batch: list[Job]) -> None:
        lines = [line for job in batch for line in job.lines]
        n = max(job.options.n_best for job in batch)
        try:
            found = self.model.search(lines, batch[0].options, n)
            if self.on_batch is not None:
                self.on_batch([len(job.lines) for job in batch])
        except Exception as err:  # a failed batch fails its requests, never the thread
            log.exception("decoding a batch of %d lines failed", len(lines))
            for job in batch:
                job.future.set_exception(err)
            return
        start = 0
        for job in batch:
            part = found[start : start + len(job.lines)]
            start += len(job.lines)
            try:
                job.future.set_result(self.model.results(job.lines, part, job.options))
            except Exception as err:
                log.exception("building the result of a request failed")
                job.future.set_exception(err)
