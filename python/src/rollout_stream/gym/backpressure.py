"""Backpressure for :func:`~rollout_stream.gym.collector.collect`: no new rollouts while the trainer is behind.

NeMo-RL's in-process async GRPO stops generating while ``max_buffered_rollouts``
wait in its replay buffer. Over Kafka the buffer is what lies between the
collector and the trainer's consumer group ``G``, counted in groups:

- **unconsumed**: data records of ``rollout.packed`` past ``G``'s committed
  offsets (every group of every collector: they all wait for the same trainer);
- **in the pipeline**: groups of this collector whose every row it has
  published in this run and that are not yet on ``rollout.packed`` nor
  dead-lettered as a whole group.

A rollout starts only while fewer than ``M`` (``max_buffered_groups``) groups
are buffered; rollouts already running finish, so the buffer can exceed
``M`` by the groups those complete (at most ``concurrency``).

How it is counted (one read_committed consumer of this process, assigned, in
no consumer group, and one committed-offsets request to the broker every
``interval`` seconds while rollouts start):

- ``G``'s lag is counted in records, not offsets: pack writes in
  transactions, and every commit (or abort) marker takes an offset of each
  partition the transaction wrote, as do aborted records. So the reader
  reads ``rollout.packed`` from ``G``'s committed offset (the log start where
  ``G`` has none: the trainer's default ``auto_offset_reset="earliest"``) and
  keeps the offsets of the data records it received; the lag of a partition
  is how many of them are at or past ``G``'s committed offset now. Each record
  is read once, and only its key is looked at; the offsets below the committed
  one are dropped. Records still in an open transaction are invisible to the
  trainer, and to this reader, until they commit.
- A group leaves "in the pipeline" when its key (the group id) is read on
  ``rollout.packed`` (it is then counted as unconsumed until ``G`` commits past
  it), or on ``rollout.dead-letter`` with a whole-group reason
  (``incomplete_group``, ``processing_error``, ... or ``group_already_closed``:
  it was closed before). Both are read from their end when the collector
  starts, so no clock is involved; a group not yet read there still counts.
- What the reader has not read yet of ``rollout.packed`` (up to the high
  watermark of its last fetch) counts as that many groups, markers included:
  a slow reader over-counts (waits longer), never under-counts. At start it
  reads what is there first (up to 5 s: an open transaction holds it back).

The cost: ``rollout.packed`` is read once more, by every collector that
uses backpressure (the broker sends whole records; the keys are all this
reader looks at), plus ``rollout.dead-letter``, which is small.

Not counted: groups an earlier run of the same batch completed (after a
crash) that are still between stages; they count once they are on
``rollout.packed``. A ``G`` whose offsets are moved back during a run is not
followed below where this reader started.
"""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from typing import Any, Mapping

from ..chunks import ChunkFormatError, is_chunk, parse_chunk
from ..errors import BrokerUnavailableError, DecodeError, InvalidRowError, KafkaOperationError
from ..framing import HEADER_SIZE
from .published import avro_string

ROW_COMPLETED = "rollout.row-completed"
PACKED = "rollout.packed"
DEAD_LETTER = "rollout.dead-letter"
# Dead-letter reasons that take a whole group out of the pipeline (docs/formats.md, "Dead letter").
GROUP_REASONS = frozenset(
    {
        "mixed_agents",
        "task_index_mismatch",
        "incomplete_group",
        "unsupported_roles",
        "reward_components_mismatch",
        "processing_error",
        "group_already_closed",
    }
)


def is_data_record(value: bytes | None) -> bool:
    """Whether a ``rollout.packed`` record starts a group: a whole record or a chunk set's first chunk."""
    if not is_chunk(value):
        return True
    try:
        return parse_chunk(value)[0].index == 0  # type: ignore[arg-type]
    except ChunkFormatError:
        return True  # undecodable: one record, as the consumer counts it


def dead_letter_reason(value: bytes) -> str | None:
    """The ``reason`` of a Confluent-framed ``DeadLetter`` value (its first field); ``None`` if unreadable.

    A chunked dead letter's reason is in its first chunk's payload (later chunks: ``None``).
    """
    if is_chunk(value):
        try:
            header, payload = parse_chunk(value)
        except ChunkFormatError:
            return None
        if header.index != 0:
            return None
        value = bytes(payload)
    try:
        if len(value) <= HEADER_SIZE or value[0] != 0:
            return None
        return avro_string(value, HEADER_SIZE)[0]
    except (IndexError, UnicodeDecodeError, DecodeError):
        return None


def sibling_topic(row_completed_topic: str, base: str) -> str:
    """``rollout.packed`` (``base``) with the prefix of the publisher's ``rollout.row-completed`` topic."""
    if row_completed_topic.endswith(ROW_COMPLETED):
        return row_completed_topic[: -len(ROW_COMPLETED)] + base
    return base


class Backpressure:
    """The ``wait_for_room`` of :func:`collect`: ``await bp()`` returns once fewer than ``M`` groups are buffered.

    Args:
        max_buffered_groups: ``M`` (>= 1).
        trainer_group: The trainer's Kafka consumer group on ``rollout.packed``.
        brokers: Bootstrap servers.
        packed_topic, dead_letter_topic: The pipeline's topics (with their prefix).
        config: More librdkafka settings (SASL/TLS).
        interval: Seconds between two looks at the broker (committed offsets, new records).
        timeout: Seconds for a broker request.

    Call :meth:`track` with the batch being published, ``close()`` at the end
    (or use it as a context manager). ``status`` says what it waits for, for
    the progress line; ``waited_s`` is the wall time rollouts were held.

    Raises:
        InvalidRowError: ``M`` < 1 or no trainer group.
        BrokerUnavailableError: No broker answered.
        KafkaOperationError: A topic does not exist.
    """

    def __init__(
        self,
        max_buffered_groups: int,
        trainer_group: str,
        *,
        brokers: str,
        packed_topic: str = PACKED,
        dead_letter_topic: str = DEAD_LETTER,
        config: Mapping[str, Any] | None = None,
        interval: float = 0.2,
        timeout: float = 30.0,
    ) -> None:
        if not isinstance(max_buffered_groups, int) or isinstance(max_buffered_groups, bool) or max_buffered_groups < 1:
            raise InvalidRowError("max_buffered_groups", f"must be an integer >= 1, got {max_buffered_groups!r}")
        if not trainer_group:
            raise InvalidRowError("trainer_group", "is needed with max_buffered_groups: the trainer's consumer group on rollout.packed")
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient

        self.max_buffered = max_buffered_groups
        self.trainer_group = trainer_group
        self.packed_topic, self.dead_letter_topic = packed_topic, dead_letter_topic
        self.interval, self.timeout = interval, timeout
        self.status = ""
        self.waited_s = 0.0
        self.unconsumed = 0
        self.in_pipeline = 0
        self.max_seen = 0  # the most groups seen buffered at a rollout's start
        self._batch: Any = None
        self._groups: set[bytes] = set()  # this batch's group ids
        self._rows_of: dict[bytes, int] = {}
        self._count: dict[bytes, int] = collections.Counter()
        self._complete: set[bytes] = set()  # completed by this run
        self._seen_rows: set[int] = set()
        self._left: set[bytes] = set()  # seen on packed or whole-group dead-lettered
        self._data: dict[int, collections.deque[int]] = {}  # packed partition -> offsets of data records read
        self._committed: dict[int, int] = {}
        self._last = 0.0
        self._lock: asyncio.Lock | None = None
        self._waiters = 0
        self._wait_start = 0.0
        self._TopicPartition = TopicPartition
        conf = {**dict(config or {}), "bootstrap.servers": brokers}
        self._admin = AdminClient(conf)
        self._consumer = Consumer(
            {
                **conf,
                "group.id": f"rollout-stream-backpressure-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            try:
                md = self._consumer.list_topics(timeout=timeout)
            except KafkaException as e:
                raise BrokerUnavailableError(f"no Kafka broker answered at {brokers} ({e})", cause=e) from e
            self._parts: dict[str, list[int]] = {}
            for topic in (packed_topic, dead_letter_topic):
                t = md.topics.get(topic)
                if t is None or t.error is not None or not t.partitions:
                    raise KafkaOperationError(f"topic {topic} is not usable at {brokers}", topic=topic)
                self._parts[topic] = sorted(t.partitions)
            self._committed = self._fetch_committed()
            assign = []
            self._start: dict[int, int] = {}
            self._high: dict[int, int] = {}
            for p in self._parts[packed_topic]:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(packed_topic, p), timeout=timeout)
                start = self._committed.get(p, -1)
                start = low if start < 0 else max(start, low)
                self._committed[p] = self._start[p] = start
                self._high[p] = high
                self._data[p] = collections.deque()
                assign.append(TopicPartition(packed_topic, p, start))
            for p in self._parts[dead_letter_topic]:
                _low, high = self._consumer.get_watermark_offsets(TopicPartition(dead_letter_topic, p), timeout=timeout)
                assign.append(TopicPartition(dead_letter_topic, p, high))
            self._consumer.assign(assign)
            # Read what is there now before the first count (what is not read yet counts as unread offsets).
            deadline = time.monotonic() + min(timeout, 5.0)  # an open transaction holds the reader back
            while self._unread() and time.monotonic() < deadline:
                self._drain(0.1)
        except BaseException:
            self.close()
            raise

    @classmethod
    def for_publisher(cls, publisher: Any, max_buffered_groups: int, trainer_group: str, **kw: Any) -> "Backpressure":
        """One on the publisher's brokers, client settings and topic prefix."""
        return cls(
            max_buffered_groups,
            trainer_group,
            brokers=publisher.brokers,
            packed_topic=sibling_topic(publisher.topic, PACKED),
            dead_letter_topic=sibling_topic(publisher.topic, DEAD_LETTER),
            config=getattr(publisher, "client_config", None),
            **kw,
        )

    # ------------------------------------------------------------ what this collector has published

    def track(self, batch: Any) -> None:
        """Counts the complete groups of ``batch`` (a ``BatchPublisher``) from now on; those complete already are not."""
        self._batch = batch
        self._groups = {ident.group_id.encode() for ident in batch.identities}
        self._rows_of = {g: 0 for g in self._groups}
        for ident in batch.identities:
            self._rows_of[ident.group_id.encode()] += 1
        self._seen_rows = set(batch.published)
        self._count = collections.Counter(batch.identities[i].group_id.encode() for i in self._seen_rows)
        self._complete = set()
        self._baseline = {g for g, n in self._count.items() if n >= self._rows_of[g]}

    def _update_published(self) -> None:
        b = self._batch
        if b is None or len(b.published) == len(self._seen_rows):
            return
        for i in b.published - self._seen_rows:
            g = b.identities[i].group_id.encode()
            self._count[g] += 1
            if self._count[g] >= self._rows_of[g] and g not in self._baseline:
                self._complete.add(g)
        self._seen_rows = set(b.published)

    # ------------------------------------------------------------ the broker

    def _fetch_committed(self) -> dict[int, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

        req = ConsumerGroupTopicPartitions(
            self.trainer_group, [self._TopicPartition(self.packed_topic, p) for p in self._parts[self.packed_topic]]
        )
        try:
            res = self._admin.list_consumer_group_offsets([req], request_timeout=self.timeout)[self.trainer_group].result(self.timeout)
        except KafkaException as e:
            raise BrokerUnavailableError(f"committed offsets of consumer group {self.trainer_group}: {e}", cause=e) from e
        return {tp.partition: tp.offset for tp in res.topic_partitions if tp.error is None}

    def refresh(self) -> None:
        """Reads the trainer group's committed offsets and the records that arrived since the last call."""
        for p, off in self._fetch_committed().items():
            if off >= 0 and p in self._committed:
                self._committed[p] = max(self._committed[p], off)
        self._drain(0)
        n = 0
        for p, offsets in self._data.items():
            c = self._committed[p]
            while offsets and offsets[0] < c:
                offsets.popleft()
            n += len(offsets)
        self.unconsumed = n + self._unread()
        self._last = time.monotonic()

    def _drain(self, timeout: float) -> None:
        """Takes every record fetched so far (waits up to ``timeout`` for the first)."""
        while True:
            msgs = self._consumer.consume(1000, timeout)
            if not msgs:
                return
            timeout = 0
            for m in msgs:
                if m.error():
                    continue
                key = m.key()
                if m.topic() == self.packed_topic:
                    if not is_data_record(m.value()):
                        continue  # a later chunk of a chunk set: its group was counted at chunk 0
                    self._data[m.partition()].append(m.offset())
                    if key in self._groups:
                        self._left.add(key)
                elif key in self._groups and dead_letter_reason(m.value() or b"") in GROUP_REASONS:
                    self._left.add(key)

    def _unread(self) -> int:
        """Offsets of ``rollout.packed`` past the trainer's committed ones that this reader has not read yet.

        Counted as groups (records or markers: not known before they are read), so the count errs high.
        """
        TP, topic = self._TopicPartition, self.packed_topic
        n = 0
        for tp in self._consumer.position([TP(topic, p) for p in self._data]):
            p = tp.partition
            _low, high = self._consumer.get_watermark_offsets(TP(topic, p), cached=True)
            self._high[p] = high = max(high if high is not None else -1, self._high[p])
            pos = tp.offset if tp.offset >= 0 else self._start[p]
            n += max(0, high - max(pos, self._committed[p]))
        return n

    def buffered(self) -> int:
        """Groups buffered now: unconsumed on ``rollout.packed`` (as of the last refresh) + this run's in the pipeline."""
        self._update_published()
        self.in_pipeline = len(self._complete - self._left)
        return self.unconsumed + self.in_pipeline

    # ------------------------------------------------------------ the collector's wait

    async def __call__(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        held = False
        try:
            while True:
                if time.monotonic() - self._last >= self.interval:
                    async with self._lock:
                        if time.monotonic() - self._last >= self.interval:
                            await asyncio.to_thread(self.refresh)
                n = self.buffered()
                if n < self.max_buffered:
                    self.max_seen = max(self.max_seen, n)
                    return
                if not held:
                    held = True
                    self._waiters += 1
                    if self._waiters == 1:
                        self._wait_start = time.monotonic()
                self.status = (
                    f"waiting for the trainer: {n} groups buffered, max {self.max_buffered} "
                    f"({self.unconsumed} unconsumed by {self.trainer_group}, {self.in_pipeline} in the pipeline)"
                )
                await asyncio.sleep(self.interval)
        finally:
            if held:
                self._waiters -= 1
                if self._waiters == 0:
                    self.waited_s += time.monotonic() - self._wait_start
                    self.status = ""

    def close(self) -> None:
        c, self._consumer = getattr(self, "_consumer", None), None
        if c is not None:
            c.close()

    def __enter__(self) -> "Backpressure":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
