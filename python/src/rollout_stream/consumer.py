"""Reading ``rollout.packed`` with confluent-kafka: read_committed, manual commits, positions.

The trainer's loop is :func:`rollout_stream.feed`: decode a group, hand it to
``put_samples``, then mark it done. The consumer keeps, per assigned
partition, the next offset after the groups already done
(:meth:`PackedConsumer.position`), so a trainer can save it in its
checkpoint and resume exactly there (``start_offsets=``) whatever the
consumer group committed (SPEC §6.1). Commit modes:

- ``commit="after_put"`` (default): each group's offset is committed
  synchronously once ``put_samples`` returned. A crash before that commit
  delivers the group again (at-least-once into ``put_samples``); a trainer
  whose in-memory queue dies with it loses what was committed but not yet
  checkpointed.
- ``commit="on_checkpoint"``: nothing is committed until the trainer calls
  :meth:`PackedConsumer.commit` with the position it saved, after its
  checkpoint is durable; the committed offsets then trail the checkpoints.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence, Union

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from .codec import JaggedMode, PackedGroup
from . import kafka_env
from .deserializer import PackedDeserializer
from .errors import BrokerUnavailableError, KafkaOperationError, OffsetLookupError, RolloutStreamError
from .assignment import Assignment
from .chunk_stream import ChunkedPartitions, SkipSet, record_error
from .chunks import DEFAULT_MAX_VALUE_BYTES
from .membership import INSTANCE_ID_KEY, resolve_instance_id
from .offset_lookup import DEFAULT_LOOKUP_TIMEOUT, LookupFailure, LookupResult, OffsetLookup
from .positions import Position, TopicPartitionKey, from_offsets, to_offsets
from .record_meta import Record
from .registry import DEFAULT_REGISTRY_URL, SchemaResolver

log = logging.getLogger(__name__)

DEFAULT_BROKERS = kafka_env.DEFAULT_BROKERS
# The largest record the local broker accepts (scripts/local-kafka.sh
# RS_MAX_MESSAGE_BYTES); the consumer must be able to fetch one whole.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_FIXED = {"isolation.level": "read_committed", "enable.auto.commit": False}
COMMIT_MODES = ("after_put", "on_checkpoint")
UNDECODABLE_MODES = ("raise", "dead-letter")

CommitMode = Literal["after_put", "on_checkpoint"]
StartOffsets = Union[Mapping[str, Mapping[Any, int]], Callable[[list[TopicPartitionKey]], Any], None]
RevokeHook = Callable[["PackedConsumer", list[TopicPartitionKey]], Any]


@dataclass
class Delivery:
    """A decoded group and the Kafka message it came from (for committing)."""

    group: PackedGroup
    message: Message  # a chunked record's first chunk
    epoch: int = 0
    weight_lag: int | None = None  # set by feed when it knows the current weight version
    next_offset: int | None = None  # None: offset + 1
    value: Any = None  # a chunked record's reassembled buffer, which the group's tensors view

    @property
    def next(self) -> int:
        """The offset to commit after this group (past a chunk set's last chunk)."""
        return self.offset + 1 if self.next_offset is None else self.next_offset

    @property
    def topic(self) -> str:
        return self.message.topic()

    @property
    def partition(self) -> int:
        return self.message.partition()

    @property
    def offset(self) -> int:
        return self.message.offset()


def _lookup_timeout(extra: Mapping[str, Any]) -> float:
    # The assignment callback runs inside poll(): spending most of max.poll.interval.ms there gets the member evicted.
    poll_ms = extra.get("max.poll.interval.ms")
    return min(DEFAULT_LOOKUP_TIMEOUT, float(poll_ms) / 2000) if poll_ms else DEFAULT_LOOKUP_TIMEOUT


class PackedConsumer:
    """Consumer of packed groups for one topic and consumer group.

    Args:
        topic: The packed topic (``rollout.packed`` with any prefix).
        group_id: Kafka consumer group; offsets are committed under it.
        brokers: Bootstrap servers (``host:port,...``); ``None``: ``$KAFKA_BROKERS``
            or ``127.0.0.1:9092``.
        registry_url: Confluent-API schema registry URL; ``None``:
            ``$SCHEMA_REGISTRY_URL`` or the local default.
        jagged: ``"auto"`` (torch when importable), ``"torch"`` or ``"numpy"``.
        config: Extra librdkafka settings (SASL/TLS, ``client.id``, ...);
            ``isolation.level`` and ``enable.auto.commit`` are fixed.
        check: Fail fast when broker or registry cannot be reached.
        connect_timeout: Seconds the start-up check waits for the broker.
        auto_offset_reset: Where a partition starts that has neither a start
            offset nor a committed one (``"earliest"`` or ``"latest"``).
        deserializer: A ready :class:`PackedDeserializer` (then ``registry_url``,
            ``jagged`` and ``device`` are ignored).
        device: ``None``/``"cpu"`` (default) or a CUDA device: decode into
            pinned host memory and copy asynchronously to it (see
            :class:`PackedDeserializer`).
        start_offsets: Where to resume. A position (``{topic: {partition:
            offset}}``, what :meth:`position` returned and the trainer saved):
            each listed partition starts there on its first assignment to this
            consumer, whatever the group committed. Or a callable
            ``(assigned [(topic, partition)]) -> position`` asked at **every**
            assignment (several trainer ranks: return the merge of every
            rank's latest checkpoint, :func:`rollout_stream.merge_positions`).
            A partition it does not name starts at the larger of the group's
            committed offset and this consumer's own last position for it,
            else at ``auto_offset_reset``.
        commit: ``"after_put"`` (default) or ``"on_checkpoint"`` (see the module doc).
        on_revoke: ``hook(consumer, [(topic, partition)])`` called when
            partitions are about to be taken away by a rebalance (and on
            ``close``), while :meth:`position` still includes them: the place
            to write a checkpoint and :meth:`commit` it, so the next owner
            resumes after the groups this trainer has trained on.
        on_undecodable: ``"raise"`` (default): a record that cannot be decoded
            raises and stays unconsumed. ``"dead-letter"``: it is written to
            ``dead_letter_topic`` (reason ``undecodable``) and skipped.
            A registry outage is never dead-lettered (it is retriable).
            A chunk set that cannot be handed on whole (``incomplete_record``:
            retention took its head, a chunk does not continue the set, its CRC
            or length is wrong) follows the same rule: raised as
            :class:`~rollout_stream.chunks.IncompleteRecordError` or written as
            an ``incomplete_record`` dead letter with its coordinates.
        dead_letter_topic: Required with ``on_undecodable="dead-letter"``.
        verify_chunk_crc: Check each reassembled chunk set's whole-value CRC-32
            (about 75 ms per 100 MB, in the polling thread). Off by default:
            librdkafka already checks every fetched batch's CRC-32C
            (``check.crcs``), and the set's structure (ids, indices, offsets,
            total size) is always checked.
        max_value_bytes: The largest chunked value accepted (default 4 GiB); a
            set declaring more is undecodable before anything is allocated.
        instance_id: The ``group.instance.id`` (static membership: a rank
            restarted with the same id gets its partitions back at once, see
            :mod:`rollout_stream.membership`). ``None`` (default): from
            ``config``, else ``$RS_TRAINER_INSTANCE_ID``, else
            ``"rank-$RANK"``, else none. ``False``: dynamic membership.
        offset_lookup_timeout: Seconds the assignment callback may spend
            looking up where new partitions start (committed offsets,
            watermarks), retries with backoff included. Default: 30, or
            half of ``max.poll.interval.ms`` when that is smaller. Partitions
            still unknown then are not read, and every later :meth:`poll`
            raises :class:`~rollout_stream.errors.OffsetLookupError`.

    Raises:
        BrokerUnavailableError: No broker answered within ``connect_timeout``.
        RegistryUnavailableError: The registry did not answer.
        ValueError: ``config`` tries to change read_committed or auto-commit;
            a bad ``device``, ``commit``, ``on_undecodable``, ``start_offsets``
            or ``instance_id`` (or one ``config`` contradicts).
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available.
    """

    _client_class: Any = Consumer  # the seam for tests: a Consumer subclass whose lookups fail

    def __init__(
        self,
        topic: str,
        group_id: str,
        brokers: str | None = None,
        registry_url: str | None = None,
        *,
        jagged: JaggedMode = "auto",
        config: Mapping[str, Any] | None = None,
        check: bool = True,
        connect_timeout: float = 10.0,
        auto_offset_reset: str = "earliest",
        deserializer: PackedDeserializer | None = None,
        device: Any = None,
        start_offsets: StartOffsets = None,
        commit: CommitMode = "after_put",
        on_revoke: RevokeHook | None = None,
        on_undecodable: Literal["raise", "dead-letter"] = "raise",
        dead_letter_topic: str | None = None,
        instance_id: str | bool | None = None,
        offset_lookup_timeout: float | None = None,
        verify_chunk_crc: bool = False,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        extra = dict(config or {})
        brokers, registry_url = kafka_env.brokers(brokers), kafka_env.registry_url(registry_url)
        for key, want in _FIXED.items():
            if key in extra and str(extra[key]).lower() != str(want).lower():
                raise ValueError(f"{key} must stay {want!r} for the packed consumer (got {extra[key]!r})")
        if commit not in COMMIT_MODES:
            raise ValueError(f"commit must be one of {COMMIT_MODES}, not {commit!r}")
        if on_undecodable not in UNDECODABLE_MODES:
            raise ValueError(f"on_undecodable must be one of {UNDECODABLE_MODES}, not {on_undecodable!r}")
        if on_undecodable == "dead-letter" and not dead_letter_topic:
            raise ValueError('on_undecodable="dead-letter" needs dead_letter_topic')
        if auto_offset_reset not in ("earliest", "latest", "smallest", "largest", "beginning", "end"):
            raise ValueError(f"auto_offset_reset must be 'earliest' or 'latest', not {auto_offset_reset!r}")
        self._assignment = Assignment(start_offsets)
        self.instance_id, instance_id_from = resolve_instance_id(instance_id, extra)
        self._lookup = OffsetLookup(_lookup_timeout(extra) if offset_lookup_timeout is None else offset_lookup_timeout)
        self._unstarted: dict[TopicPartitionKey, LookupFailure] = {}  # assigned, start unknown: not read
        self._lookup_note = ""
        conf: dict[str, Any] = {
            **kafka_env.client_config(brokers),  # bootstrap.servers and the environment's SASL/TLS
            "group.id": group_id,
            "auto.offset.reset": auto_offset_reset,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": MAX_MESSAGE_BYTES,
            "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
            "receive.message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
            # Chunk sets are checked for structure, not by default for their whole-value CRC: the batch CRC is.
            "check.crcs": True,
            "error_cb": self._on_error,
            **extra,
            **_FIXED,
        }
        self.topic = topic
        self.brokers = brokers
        self.group_id = group_id
        self.commit_mode: CommitMode = commit
        self.on_undecodable = on_undecodable
        self._reset_latest = auto_offset_reset in ("latest", "largest", "end")
        self._cooperative = "cooperative" in str(extra.get("partition.assignment.strategy", ""))
        self._on_revoke_hook = on_revoke
        self.deserializer = deserializer or PackedDeserializer(SchemaResolver(registry_url), jagged=jagged, device=device)
        self._last_error: KafkaError | None = None
        self._dead_letters: Any = None
        self.dead_letter_topic = dead_letter_topic
        self._producer_config = {k: v for k, v in extra.items() if k.startswith(("security.", "sasl.", "ssl."))}
        self.verify_chunk_crc = verify_chunk_crc
        self._chunks = ChunkedPartitions(self._log_start, verify_crc=verify_chunk_crc, max_value_bytes=max_value_bytes)
        self._ready: deque[Record] = deque()  # reassembled, not yet returned by poll_record
        self.skip_set: SkipSet | None = None
        """``feed`` sets it: ``skip_set(record of a chunk set's first chunk)`` true drops the set unbuffered."""
        if self.instance_id is not None:
            conf[INSTANCE_ID_KEY] = self.instance_id
            log.info("joining %s as static member %s (from %s)", group_id, self.instance_id, instance_id_from)
        self._consumer = self._client_class(conf)
        self._closed = False
        try:
            if check:
                self.check(connect_timeout)
            self._consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        except BaseException:
            self.close()
            raise

    # -- connectivity -----------------------------------------------------
    def _on_error(self, err: KafkaError) -> None:
        self._last_error = err
        log.warning("kafka: %s", err)

    def check(self, timeout: float = 10.0) -> None:
        """Fails unless a broker answers a metadata request and the registry answers.

        Raises:
            BrokerUnavailableError: No metadata within ``timeout`` seconds.
            RegistryUnavailableError: The registry cannot be reached.
        """
        try:
            self._consumer.list_topics(timeout=timeout)
        except KafkaException as e:
            last = f"; last client error: {self._last_error}" if self._last_error else ""
            raise BrokerUnavailableError(
                f"no Kafka broker answered at {self.brokers} within {timeout:g}s ({e.args[0]}){last}; "
                "check KAFKA_BROKERS",
                brokers=self.brokers,
                cause=e,
            ) from e
        self.deserializer.resolver.check()

    # -- assignment ---------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        try:
            found = self._lookup.start_offsets(consumer, keys, self._assignment, self._reset_latest)
        except BaseException as e:  # a callable start_offsets raised, or an interrupt
            found = LookupResult(failed={k: LookupFailure("start_offsets" if isinstance(e, Exception) else "lookup", e) for k in keys})
            if not isinstance(e, Exception):
                self._start(consumer, partitions, keys, found)
                raise
        self._start(consumer, partitions, keys, found)

    def _start(self, consumer: Consumer, partitions: list[TopicPartition], keys: list[TopicPartitionKey], found: LookupResult) -> None:
        # Assign here also when lookups failed: if the callback assigns nothing, confluent-kafka assigns every
        # partition itself at librdkafka's defaults, and records of partitions we do not track would be dropped.
        started = []
        for tp, key in zip(partitions, keys):
            if key in found.offsets:
                tp.offset = found.offsets[key]
                self._assignment.assign(key, tp.offset)
                # A committed, saved or last-known offset is a resume offset: chunks of sets begun before it
                # were handed on. So is the end (latest); the log start (earliest) is not: retention may have
                # cut a set there.
                trusted = key not in self._assignment.reset_starts or self._reset_latest
                self._chunks.start(key, tp.offset, trusted)
                started.append(tp)
        if found.failed:
            self._unstarted.update(found.failed)
            self._lookup_note = f"{found.tries} tries in {found.elapsed:.1f}s"
            log.error("%s", self._lookup_error())
        log.info("assigned %s", {f"{tp.topic}[{tp.partition}]": tp.offset for tp in started})
        if self._cooperative:
            consumer.incremental_assign(started)
        else:
            consumer.assign(started)

    def _lookup_error(self) -> OffsetLookupError:
        parts = sorted(self._unstarted)
        reasons: dict[str, list[str]] = {}
        for key in parts:
            f = self._unstarted[key]
            reasons.setdefault(f"{f.what}: {f.cause}", []).append(f"{key[0]}[{key[1]}]")
        why = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in reasons.items())
        return OffsetLookupError(
            f"could not find where to start {', '.join(f'{t}[{p}]' for t, p in parts)} for consumer group "
            f"{self.group_id!r} within {self._lookup.timeout:g}s ({self._lookup_note}; {why}). This consumer holds "
            "them but does not read them: close it and create a new one (restart the trainer) to look them up again",
            partitions=parts,
            group_id=self.group_id,
            cause=self._unstarted[parts[0]].cause,
        )

    def _forget(self, keys: Sequence[TopicPartitionKey]) -> None:
        for key in keys:
            self._chunks.drop(key)
        gone = set(keys)
        self._ready = deque(r for r in self._ready if (r.topic, r.partition) not in gone)

    def _hand_back(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget([(tp.topic, tp.partition) for tp in partitions])
        given = [tp for tp in partitions if self._unstarted.pop((tp.topic, tp.partition), None) is None]
        if self._cooperative:
            consumer.incremental_unassign(given)  # librdkafka refuses partitions it was never given
        else:
            consumer.unassign()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions if self._assignment.held((tp.topic, tp.partition))]
        try:
            if self.commit_mode == "after_put":
                self._flush_uncommitted()
            if self._on_revoke_hook is not None and keys:
                self._on_revoke_hook(self, keys)
        finally:
            self._assignment.drop(keys)
            self._hand_back(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Another member may own them already: committing or checkpointing them now could go backwards.
        keys = [(tp.topic, tp.partition) for tp in partitions]
        log.warning("partitions lost without a revoke (session timeout?): %s; uncheckpointed groups of them may be "
                    "delivered to their next owner as well", keys)
        self._assignment.drop(keys, lost=True)
        self._hand_back(consumer, partitions)

    def assigned(self) -> list[TopicPartitionKey]:
        """The partitions this consumer holds now, sorted."""
        return sorted(self._assignment.positions)

    def is_current(self, item: Record | Delivery) -> bool:
        """Whether ``item`` was fetched under the partition's current assignment.

        ``False`` after its partition was revoked (even if assigned again
        since): whoever owns it now reads that record again.
        """
        return self._assignment.is_current(item)

    def position(self) -> Position:
        """Per assigned partition, the next offset after the groups already done.

        "Done" means handed to ``put_samples`` (and returned), skipped as stale,
        or dead-lettered. JSON-serializable; save it in the checkpoint and pass
        it back as ``start_offsets``.
        """
        return self._assignment.position()

    # -- reading ----------------------------------------------------------
    def poll_record(self, timeout: float = 1.0) -> Record | None:
        """The next fetched record, not decoded; ``None`` when none arrived within ``timeout``.

        Rebalance hooks (``on_revoke``, ``start_offsets``) run inside this call.

        Raises:
            KafkaOperationError: A fatal consumer error.
            OffsetLookupError: Partitions assigned to this consumer have no
                known start (see ``offset_lookup_timeout``); raised by every
                call from then on, a record fetched in the same call is not
                returned (nor done).
        """
        if self._unstarted:
            raise self._lookup_error()
        deadline = time.monotonic() + timeout
        while True:
            while self._ready:
                rec = self._ready.popleft()
                if self._assignment.is_current(rec):
                    return rec
            msg = self._consumer.poll(max(0.0, deadline - time.monotonic()))
            if self._unstarted:
                raise self._lookup_error()
            if msg is None:
                return None
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return None
                if err.fatal() or err.code() == KafkaError._FATAL:  # _FATAL: e.g. fenced by a static member with our id
                    raise KafkaOperationError(f"fatal consumer error: {err}", cause=KafkaException(err))
                log.warning("kafka consumer: %s", err)
                return None
            epoch = self._assignment.epoch((msg.topic(), msg.partition()))
            if epoch is None:  # fetched before its partition was revoked
                return None
            # A chunk set comes out as one record once its last chunk is here: keep fetching while chunks
            # keep coming (past the timeout too); None only when nothing more came within it.
            self._ready.extend(self._chunks.push(msg, epoch, self.skip_set))

    def _log_start(self, topic: str, partition: int) -> int:
        try:
            return int(self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10.0, cached=False)[0])
        except KafkaException as e:
            raise KafkaOperationError(f"could not read the log start of {topic}[{partition}]: {e.args[0]}", cause=e) from e

    def decode(self, record: Record, *, defer_done: bool = False) -> Delivery | None:
        """Decodes a record; ``None`` when it was undecodable and dead-lettered.

        A dead-lettered record is marked :meth:`done` here, unless ``defer_done``
        (``feed`` marks it once the groups before it are done).

        Raises:
            FramingError, DecodeError, UnknownSchemaError: The record cannot be
                decoded and ``on_undecodable="raise"``; the consumer is rewound to it.
            RegistryUnavailableError: Always raised (retriable); rewound likewise.
            KafkaOperationError: The dead letter could not be written; rewound likewise.
        """
        msg = record.message
        try:
            bad = record_error(record)
            if bad is not None:
                raise bad
            if record.stale_skipped:
                raise ValueError("PackedConsumer.decode: a record skipped from its headers has no value to decode")
            value = record.value
            group = self.deserializer.decode(value)
        except RolloutStreamError as e:
            e.details.update(topic=msg.topic(), partition=msg.partition(), offset=msg.offset())
            e.args = (f"{e.args[0]} (at {msg.topic()}[{msg.partition()}]@{msg.offset()})",)
            if self.on_undecodable == "dead-letter" and not e.retriable:
                try:
                    self._dead_letter_writer().write(record, e)
                except BaseException:
                    self._seek(msg.topic(), msg.partition(), msg.offset())
                    raise
                log.warning("dead-lettered undecodable record to %s: %s", self.dead_letter_topic, e)
                if not defer_done:
                    self.done([record])
                return None
            # Read again from an untrusted start, an incomplete set is reported again instead of skipped.
            self._seek(msg.topic(), msg.partition(), msg.offset(), trusted=record.incomplete is None)
            raise
        return Delivery(group, msg, record.epoch, next_offset=record.next_offset, value=record.whole)

    def poll(self, timeout: float = 1.0) -> Delivery | None:
        """The next decoded group, or ``None`` when none arrived within ``timeout``.

        The caller marks it :meth:`done` after handing it on (``feed`` does).

        Raises:
            KafkaOperationError: A fatal consumer error.
            OffsetLookupError: Assigned partitions have no known start (see :meth:`poll_record`).
            FramingError, DecodeError, UnknownSchemaError, RegistryUnavailableError:
                The record at the current position cannot be decoded; its offset
                is not committed and the consumer is rewound to it.
        """
        rec = self.poll_record(timeout)
        return None if rec is None else self.decode(rec)

    def __iter__(self) -> Iterator[Delivery]:
        while True:
            d = self.poll(1.0)
            if d is not None:
                yield d

    def _dead_letter_writer(self) -> Any:
        if self._dead_letters is None:
            from .dead_letters import DeadLetterWriter
            from .registry import make_registry_client

            client = self.deserializer.resolver.client or make_registry_client(self.deserializer.resolver.url)
            self._dead_letters = DeadLetterWriter(self.dead_letter_topic or "", self.brokers, client, self._producer_config)
        return self._dead_letters

    # -- offsets ------------------------------------------------------------
    def done(self, items: Sequence[Record | Delivery], *, commit_now: bool = True) -> None:
        """Marks records done: :meth:`position` moves past them; with ``after_put`` they are committed.

        ``commit_now=False`` (stale skips) leaves the commit for the next one
        or :meth:`flush_commits`. Items of a partition revoked meanwhile are
        ignored (its next owner reads them again).

        Raises:
            KafkaOperationError: The ``after_put`` commit failed.
        """
        for it in items:
            self._assignment.advance(it, track_commit=self.commit_mode == "after_put")
        if commit_now and self.commit_mode == "after_put":
            self._flush_uncommitted()

    def flush_commits(self) -> None:
        """Commits what :meth:`done` left uncommitted (``after_put`` only; a no-op otherwise)."""
        if self.commit_mode == "after_put":
            self._flush_uncommitted()

    def _flush_uncommitted(self) -> None:
        self._commit_offsets(self._assignment.take_uncommitted())

    def commit(self, what: Delivery | Sequence[Delivery] | Mapping[str, Mapping[Any, int]]) -> None:
        """Synchronously commits a saved position, or past the given deliveries (which are then done).

        ``consumer.commit(position)`` is how ``commit="on_checkpoint"`` commits:
        call it with the position stored in a checkpoint once that checkpoint
        is durable. Only partitions this consumer holds now are committed (a
        revoked one may have moved on under its next owner).

        Raises:
            KafkaOperationError: The commit failed (e.g. the group rebalanced).
            ValueError: ``what`` is not a position or deliveries.
        """
        if isinstance(what, Mapping):
            offsets = {k: o for k, o in to_offsets(what).items() if self._assignment.held(k)}
        else:
            items = [what] if isinstance(what, Delivery) else list(what)
            offsets = {}
            for d in items:
                key = (d.topic, d.partition)
                offsets[key] = max(offsets.get(key, -1), d.next)
                self._assignment.advance(d, track_commit=False)  # committed past it: done
        self._commit_offsets(offsets)

    def _commit_offsets(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        if not offsets:
            return
        try:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
        except KafkaException as e:
            raise KafkaOperationError(f"offset commit failed: {e.args[0]}", cause=e) from e

    def committed(self, timeout: float = 10.0) -> Position:
        """The group's committed offsets of the assigned partitions (as a position; none: left out)."""
        tps = [TopicPartition(*k) for k in self._assignment.positions]
        out = {(tp.topic, tp.partition): tp.offset for tp in self._consumer.committed(tps, timeout=timeout) if tp.offset >= 0} if tps else {}
        return from_offsets(out)

    def rewind(self, deliveries: Sequence[Record | Delivery]) -> None:
        """Seeks back so the given (not done) deliveries are read again."""
        first: dict[tuple[str, int], int] = {}
        for d in deliveries:
            if not self.is_current(d):
                continue
            key = (d.topic, d.partition)
            first[key] = min(first.get(key, d.offset), d.offset)
        for (t, p), o in first.items():
            self._seek(t, p, o)

    def _seek(self, topic: str, partition: int, offset: int, trusted: bool = True) -> None:
        key = (topic, partition)
        self._forget([key])
        if self._assignment.held(key):
            self._chunks.start(key, offset, trusted)  # a record's own (first) offset: trusted
        try:
            self._consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as e:  # partition revoked meanwhile: the next owner re-reads it anyway
            log.warning("seek back to %s[%d]@%d failed: %s", topic, partition, offset, e)

    def close(self) -> None:
        """Leaves the group (``on_revoke`` runs first; ``after_put`` commits what is done).

        A static member (``instance_id``) does not leave: librdkafka sends no
        LeaveGroup for it, so its partitions wait for the same id to rejoin,
        or for ``session.timeout.ms`` to pass before they move to other members.
        """
        if not self._closed:
            self._closed = True
            try:
                self._consumer.close()
            finally:
                if self._dead_letters is not None:
                    self._dead_letters.close()

    def __enter__(self) -> "PackedConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

