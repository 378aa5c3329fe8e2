"""One decode thread per model: a bounded queue of requests, drained into batches.

Requests wait in a queue of ``queue_size``; a full queue refuses the next at once
(:class:`QueueFull`, the API's 503) instead of letting it wait without end. The thread takes
the oldest request and every queued request that decodes the same way (same beam and
alpha: :meth:`Options.batch_key`) up to ``batch_lines`` lines and ``max_work`` decoder
positions together (:mod:`attnmt.serve.cost`: each request was refused up front past it,
so a batch holds the model no longer than the largest request may), and decodes their
lines in one call of the Translator, which length-sorts and batches them itself. A request's
n-best lists are cut to its own ``n_best`` (beam search does not depend on it), so batching
never changes a translation. Each request's result is built and encoded as JSON bytes in
this thread (:mod:`attnmt.serve.jsonio`), so the event loop only sends it.

A request whose client has gone (:meth:`DecodeWorker.abandon`: it hung up, or its wait ran
past ``timeout_s``) leaves the queue at once, and a batch whose requests are all abandoned
stops at its next decoder step. :meth:`DecodeWorker.close` (Ctrl-C) refuses new requests,
fails the queued and running ones with :class:`Stopping` and stops the batch in flight the
same way. A batch that fails is decoded again request by request, so a request that cannot
be decoded fails alone and never its batch-mates.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from attnmt.serve.backend import Options, ServedModel
from attnmt.serve.jsonio import json_parts
from attnmt.serve.references import Reference

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The model's queue holds ``queue_size`` requests already."""


class Stopping(Exception):
    """The server is stopping: the request was not decoded."""


class Abandoned(Exception):
    """The request's client left before its decode finished (no one reads this)."""


class Job(Future):
    """One request: its lines, options, the lines' references (None: none asked for;
    they never change the search, so they do not keep a request out of a batch) and its
    decode work (decoder positions, :class:`attnmt.serve.cost.DecodeWork`); as a Future,
    its result is the JSON byte parts of its ``lines`` array
    (:func:`attnmt.serve.jsonio.json_parts`)."""

    def __init__(
        self,
        lines: list[str],
        options: Options,
        references: list[Reference | None] | None = None,
        work: int = 0,
    ) -> None:
        super().__init__()
        self.lines, self.options, self.references = lines, options, references
        self.work = work
        self.abandoned = False  # its client left: drop it, stop its decode


def _settle(job: Job, result: Any = None, error: BaseException | None = None) -> None:
    """Give ``job`` its result or error unless it is settled already (cancelled, or failed
    by :meth:`DecodeWorker.close` meanwhile)."""
    try:
        if error is not None:
            job.set_exception(error)
        else:
            job.set_result(result)
    except InvalidStateError:
        pass


class DecodeWorker:
    """The thread that decodes every request of one model (see the module docstring)."""

    def __init__(
        self,
        model: ServedModel,
        queue_size: int,
        batch_lines: int,
        max_attention_values: int | None = None,
        max_work: int | None = None,
    ) -> None:
        self.model = model
        self.queue_size, self.batch_lines = queue_size, batch_lines
        self.max_work = max_work  # decoder positions a batch may hold (None: no limit)
        self.max_attention_values = max_attention_values
        self._jobs: deque[Job] = deque()  # waiting, oldest first
        self._running: list[Job] = []  # the batch in flight
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: called with the sizes of each decoded batch (tests and logs)
        self.on_batch: Callable[[list[int]], None] | None = None

    def submit(
        self,
        lines: list[str],
        options: Options,
        references: list[Reference | None] | None = None,
        work: int = 0,
    ) -> Job:
        """Queue a request of ``work`` decoder positions; the Job (a Future) gets its
        result. QueueFull when full, Stopping once closed."""
        job = Job(lines, options, references, work)
        with self._cond:
            if self._closed:
                raise Stopping
            if len(self._jobs) >= self.queue_size:
                raise QueueFull
            self._jobs.append(job)
            self._cond.notify()
        self._ensure_started()
        return job

    def pending(self) -> int:
        """Requests waiting (queued, not yet taken, not abandoned)."""
        with self._cond:
            return len(self._jobs)

    def abandon(self, job: Job) -> None:
        """``job``'s client has gone: take it out of the queue, or stop its batch when every
        request of it is abandoned."""
        job.abandoned = True
        with self._cond:
            if job in self._jobs:
                self._jobs.remove(job)
        job.cancel()

    def close(self) -> None:
        """Refuse new requests, fail the queued and running ones with Stopping, stop the
        batch in flight at its next decoder step; the thread then ends (idempotent,
        returns at once)."""
        with self._cond:
            self._closed = True
            failed = [*self._jobs, *self._running]
            self._jobs.clear()
            self._cond.notify_all()
        for job in failed:
            _settle(job, error=Stopping())

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the thread to end; True when it has."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def stop(self, timeout: float = 5.0) -> bool:
        """:meth:`close`, then :meth:`join`."""
        self.close()
        return self.join(timeout)

    def _ensure_started(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"decode-{self.model.label}", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            if batch:
                self._decode(batch)
            with self._cond:
                self._running = []

    def _take(self) -> list[Job] | None:
        """The oldest job and the queued jobs that decode like it, within ``batch_lines``
        lines and ``max_work`` decoder positions (the others keep their places); None
        once closed."""
        with self._cond:
            while not self._jobs and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            first = self._jobs.popleft()
            key, size, batch = first.options.batch_key(), len(first.lines), [first]
            work = first.work
            for job in list(self._jobs):
                if (
                    job.options.batch_key() == key
                    and size + len(job.lines) <= self.batch_lines
                    and (self.max_work is None or work + job.work <= self.max_work)
                ):
                    self._jobs.remove(job)
                    batch.append(job)
                    size, work = size + len(job.lines), work + job.work
            # running under the lock, so that close() finds them running, never half-taken
            self._running = [job for job in batch if job.set_running_or_notify_cancel()]
            return self._running

    def _stopped(self, jobs: list[Job]) -> bool:
        """True when the server is closing or every client of ``jobs`` has gone."""
        return self._closed or all(job.abandoned for job in jobs)

    def _decode(self, batch: list[Job]) -> None:
        lines = [line for job in batch for line in job.lines]
        n = max(job.options.n_best for job in batch)
        try:
            found = self.model.search(lines, batch[0].options, n, lambda: self._stopped(batch))
            if self.on_batch is not None:
                self.on_batch([len(job.lines) for job in batch])
        except KeyboardInterrupt:  # the search saw _stopped
            self._drop(batch)
            return
        except Exception as err:  # a failed batch fails its requests, never the thread
            if len(batch) > 1:
                log.warning(
                    "a batch of %d requests failed (%s: %s); decoding them one by one",
                    len(batch),
                    type(err).__name__,
                    err,
                )
                for job in batch:
                    self._decode([job])
                return
            log.exception("decoding a request of %d lines failed", len(lines))
            _settle(batch[0], error=err)
            return
        start = 0
        for job in batch:
            part = found[start : start + len(job.lines)]
            start += len(job.lines)
            self._finish(job, part)

    def _finish(self, job: Job, found: list[Any]) -> None:
        """Build and encode ``job``'s result from its hypotheses (skipped when its client
        has gone or the server stops)."""
        if self._stopped([job]):
            self._drop([job])
            return
        try:
            results = self.model.results(
                job.lines,
                found,
                job.options,
                self.max_attention_values,
                lambda: self._stopped([job]),
                job.references,
            )
            _settle(job, result=json_parts(results))
        except KeyboardInterrupt:
            self._drop([job])
        except Exception as err:
            log.exception("building the result of a request failed")
            _settle(job, error=err)

    def _drop(self, jobs: list[Job]) -> None:
        for job in jobs:
            _settle(job, error=Stopping() if self._closed else Abandoned())
