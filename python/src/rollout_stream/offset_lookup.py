"""Where newly assigned partitions start: committed offsets and watermarks, retried for a bounded time.

:class:`~rollout_stream.PackedConsumer` looks these up inside its assignment
callback. A lookup that fails there must neither drop the partition (the
consumer would throw away whatever librdkafka fetches for it) nor guess its
start (confluent-kafka's fallback, when the callback raises, assigns the
partitions itself at the committed offset or ``auto.offset.reset``: a lost
or repeated range the trainer never hears of). So each lookup is retried
with exponential backoff until one deadline for the whole assignment; a
partition whose start is still unknown then is reported with the last cause
(:class:`LookupResult.failed`), and the consumer leaves it unread and fails
its next poll (:class:`~rollout_stream.errors.OffsetLookupError`).

Only the lookups a partition needs are made: none for one with an explicit
start (``start_offsets``), the committed offset for the others, and the
watermarks only for one with neither a committed offset nor a place this
consumer left it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from confluent_kafka import KafkaException, TopicPartition

from .assignment import Assignment
from .positions import TopicPartitionKey

DEFAULT_LOOKUP_TIMEOUT = 30.0


class _LookupFailed(Exception):
    def __init__(self, failure: "LookupFailure") -> None:
        super().__init__(failure.cause)
        self.failure = failure


@dataclass
class LookupFailure:
    """Why one partition's start is unknown: ``what`` was looked up, ``cause`` the last error."""

    what: str  # "committed offset" | "watermarks" | "start_offsets"
    cause: BaseException


@dataclass
class LookupResult:
    """The outcome of one assignment's lookups.

    Attributes:
        offsets: ``{(topic, partition): start offset}`` of the partitions placed.
        failed: The partitions whose start could not be established, with why.
        tries: Lookup requests made (retries included).
        elapsed: Seconds spent.
    """

    offsets: dict[TopicPartitionKey, int] = field(default_factory=dict)
    failed: dict[TopicPartitionKey, LookupFailure] = field(default_factory=dict)
    tries: int = 0
    elapsed: float = 0.0


class OffsetLookup:
    """Committed offsets and watermarks of an assignment, each retried with backoff until one deadline.

    Args:
        timeout: Seconds all lookups of one assignment may take together,
            retries included (a last try is made at the deadline).
        first_backoff, max_backoff: Seconds between tries: doubling from the
            first, capped at the max.
        request_timeout: Seconds one request may wait (less when the deadline is nearer).
        clock, sleep: Injected in tests.
    """

    def __init__(
        self,
        timeout: float = DEFAULT_LOOKUP_TIMEOUT,
        *,
        first_backoff: float = 0.1,
        max_backoff: float = 2.0,
        request_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"the offset lookup timeout must be > 0 seconds, not {timeout!r}")
        self.timeout = timeout
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.request_timeout = request_timeout
        self.clock = clock
        self.sleep = sleep

    def start_offsets(self, client: Any, keys: Sequence[TopicPartitionKey], assignment: Assignment, reset_latest: bool) -> LookupResult:
        """Where each of ``keys`` starts, by :meth:`Assignment.start_offset`'s order.

        Args:
            client: The confluent-kafka consumer (``committed``, ``get_watermark_offsets``).
            keys: The newly assigned partitions.
            assignment: Supplies explicit starts and where this consumer left a partition.
            reset_latest: A partition with no other start begins at the high
                watermark (else the low one).

        Returns:
            :class:`LookupResult`; a failed lookup is in ``failed``, never raised.

        Raises:
            Exception: Whatever a callable ``start_offsets`` raised (not retried).
        """
        begun = self.clock()
        deadline = begun + self.timeout
        out = LookupResult()
        wanted = assignment.wanted(list(keys))
        need = [k for k in keys if not assignment.has_explicit_start(k, wanted)]
        committed = self._committed(client, need, deadline, out) if need else {}

        def reset(key: TopicPartitionKey) -> int:
            return self._watermark(client, key, reset_latest, deadline, out)

        for key in keys:
            if key in out.failed:
                continue
            try:
                out.offsets[key] = assignment.start_offset(key, wanted, committed, reset)
            except _LookupFailed as e:
                out.failed[key] = e.failure
        out.elapsed = self.clock() - begun
        return out

    def _committed(self, client: Any, keys: list[TopicPartitionKey], deadline: float, out: LookupResult) -> dict[TopicPartitionKey, int]:
        found: dict[TopicPartitionKey, int] = {}
        causes: dict[TopicPartitionKey, BaseException] = {}
        pending = list(keys)
        backoff = self.first_backoff
        while True:
            out.tries += 1
            try:
                answer = client.committed([TopicPartition(*k) for k in pending], timeout=self._request_timeout(deadline))
            except KafkaException as e:
                causes = {k: e for k in pending}
            else:
                by_key = {(tp.topic, tp.partition): tp for tp in answer or []}
                causes = {}
                for k in pending:
                    tp = by_key.get(k)
                    if tp is None:
                        causes[k] = RuntimeError("the broker's answer did not include it")
                    elif tp.error is not None:
                        causes[k] = KafkaException(tp.error)
                    elif tp.offset >= 0:
                        found[k] = tp.offset
            pending = [k for k in pending if k in causes]
            if not pending or not self._wait(deadline, backoff):
                break
            backoff = min(2 * backoff, self.max_backoff)
        for k in pending:
            out.failed[k] = LookupFailure("committed offset", causes[k])
        return found

    def _watermark(self, client: Any, key: TopicPartitionKey, latest: bool, deadline: float, out: LookupResult) -> int:
        backoff = self.first_backoff
        while True:
            out.tries += 1
            try:
                marks = client.get_watermark_offsets(TopicPartition(*key), timeout=self._request_timeout(deadline), cached=False)
                cause: BaseException = TimeoutError("no answer within the request timeout")
            except KafkaException as e:
                marks, cause = None, e
            if marks is not None:
                low, high = marks
                return high if latest else low
            if not self._wait(deadline, backoff):
                raise _LookupFailed(LookupFailure("watermarks", cause))
            backoff = min(2 * backoff, self.max_backoff)

    def _request_timeout(self, deadline: float) -> float:
        return max(0.1, min(self.request_timeout, deadline - self.clock()))

    def _wait(self, deadline: float, backoff: float) -> bool:
        """Sleeps before the next try; ``False`` when the deadline has passed (no more tries)."""
        left = deadline - self.clock()
        if left <= 0:
            return False
        self.sleep(min(backoff, left))
        return True
