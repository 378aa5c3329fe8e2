"""Token-budget batches with length bucketing, seeded shuffling, sharding and resume.

A batch of ``n`` pairs costs ``n * max_i max(|x_i| + 1, |y_i| + 1)`` token positions:
the size of the larger padded tensor (source gets EOS, target input gets BOS).
Lengths passed in are piece counts without specials.

One epoch, with ``rng = numpy.random.default_rng([seed, epoch])`` (seed 1 epoch 1 and
seed 2 epoch 0 get unrelated orders):
  1. shuffle all indices (when ``shuffle``), cut them into buckets of ``bucket_size``
     (default: one bucket holding everything);
  2. sort each bucket by cost (stable, so equal lengths keep their shuffled order);
  3. pack greedily (:func:`~attnmt.data.batching.pack_token_batches`): add pairs while
     ``max_cost * n <= max_tokens`` (a single pair above ``max_tokens`` gets a batch of
     its own);
  4. shuffle the order of the batches (when ``shuffle``);
  5. drop the last ``len % num_replicas`` batches; replica ``rank`` takes batches
     ``rank, rank + num_replicas, ...`` so every replica runs the same number of steps.

Resume: the sampler counts the batches it has yielded in the current epoch
(``state_dict() == {"epoch": e, "position": k}``); after ``load_state_dict`` the next
``__iter__`` yields exactly batches ``k, k+1, ...`` of epoch ``e``. Finishing an epoch
moves to ``epoch + 1, position 0``; ``set_epoch(e)`` with a *different* epoch restarts
at position 0, with the current one it changes nothing (so a resumed loop may call it).
The count equals the consumed batches only with ``DataLoader(num_workers=0)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
from torch.utils.data import Sampler

from attnmt.data.batching import pack_token_batches
from attnmt.errors import CheckpointError, ConfigError, DataError

#: piece counts per pair: a list, or a numpy array (the memory-mapped training set's)
Lengths = Sequence[int] | np.ndarray


class EpochLengths(Protocol):
    """A dataset whose pairs' lengths change with the epoch (subword sampling,
    :class:`attnmt.data.resample.EpochSegmentations`)."""

    def lengths(self, epoch: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(src [n], tgt [n] or None) piece counts of ``epoch``'s segmentation."""
        ...

    def set_epoch(self, epoch: int) -> None:
        """Serve ``epoch``'s segmentation from now on."""
        ...


def batch_cost(src_lengths: Lengths, tgt_lengths: Lengths | None) -> np.ndarray:
    """[n] int32: ``max(|x_i|, |y_i|) + 1``, the positions a pair takes in a batch."""
    cost = np.array(src_lengths, dtype=np.int32).reshape(-1)  # [n], built in place:
    if tgt_lengths is not None:  # millions of pairs make every temporary count
        tgt = np.asarray(tgt_lengths, dtype=np.int32).reshape(-1)
        if tgt.shape != cost.shape:
            raise DataError(f"{len(cost)} source lengths but {len(tgt)} target lengths")
        np.maximum(cost, tgt, out=cost)
    cost += 1
    return cost


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices whose padded size stays within ``max_tokens``.

    ``segmentation`` (subword sampling): the lengths of each epoch come from
    ``segmentation.lengths(epoch)`` instead of ``src_lengths``/``tgt_lengths``, and
    iterating an epoch first calls ``segmentation.set_epoch(epoch)``, so the dataset
    serves the segmentation the batches were packed for.
    """

    def __init__(
        self,
        src_lengths: Lengths,
        tgt_lengths: Lengths | None,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        bucket_size: int | None = None,
        segmentation: EpochLengths | None = None,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens={max_tokens!r} must be a positive integer")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError(f"rank={rank} must be in [0, num_replicas={num_replicas})")
        if bucket_size is not None and bucket_size < 1:
            raise ConfigError(f"bucket_size={bucket_size!r} must be a positive integer or null")
        self.cost = batch_cost(src_lengths, tgt_lengths)
        self.segmentation = segmentation
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.bucket_size = bucket_size
        self.epoch = 0
        self.position = 0
        self._cache: tuple[int, list[np.ndarray]] | None = None

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """Every replica's batches of ``epoch`` in order (after truncation), before sharding,
        as int64 index arrays (a few arrays per batch, not a Python int per pair)."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        cost = self.cost
        if self.segmentation is not None:
            cost = batch_cost(*self.segmentation.lengths(epoch))
            if len(cost) != len(self.cost):
                raise DataError(f"epoch {epoch}: {len(cost)} lengths for {len(self.cost)} pairs")
        n = len(cost)
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        size = self.bucket_size or max(n, 1)
        batches: list[np.ndarray] = []
        for start in range(0, n, size):
            bucket = order[start : start + size]
            bucket = bucket[np.argsort(cost[bucket], kind="stable")]
            batches.extend(pack_token_batches(bucket, cost, self.max_tokens))
        if self.shuffle:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        usable = len(batches) - len(batches) % self.num_replicas
        if n and usable == 0:
            raise DataError(
                f"only {len(batches)} batches of max_tokens={self.max_tokens} for "
                f"{self.num_replicas} replicas; lower max_tokens or use fewer GPUs"
            )
        self._cache = (epoch, batches[:usable])
        return self._cache[1]

    def all_batches(self, epoch: int) -> list[list[int]]:
        """:meth:`epoch_batches` as lists of ints."""
        return [b.tolist() for b in self.epoch_batches(epoch)]

    def _mine(self, epoch: int | None = None) -> list[np.ndarray]:
        epoch = self.epoch if epoch is None else epoch
        return self.epoch_batches(epoch)[self.rank :: self.num_replicas]

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """This replica's batches of ``epoch`` (default: the current one)."""
        return [b.tolist() for b in self._mine(epoch)]

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (its shuffle); a new epoch starts at position 0."""
        if epoch != self.epoch:
            self.epoch, self.position = int(epoch), 0

    def __iter__(self) -> Iterator[list[int]]:
        mine = self._mine()
        if self.segmentation is not None:
            self.segmentation.set_epoch(self.epoch)
        for k in range(self.position, len(mine)):
            self.position = k + 1
            yield mine[k].tolist()
        self.epoch, self.position = self.epoch + 1, 0

    def __len__(self) -> int:
        """Batches per replica in the current epoch (the whole epoch, not what is left)."""
        return len(self._mine())

    def state_dict(self) -> dict[str, int]:
        return {"epoch": int(self.epoch), "position": int(self.position)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`; CheckpointError if it is malformed."""
        try:
            epoch, position = state["epoch"], state["position"]
        except (KeyError, TypeError):
            raise CheckpointError(
                f"sampler state {state!r} lacks 'epoch' or 'position'; the checkpoint is incomplete"
            ) from None
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (epoch, position)
        ):
            raise CheckpointError(f"sampler state {state!r} must hold non-negative ints")
        self.epoch, self.position = epoch, position
