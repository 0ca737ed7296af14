"""A stand-in for confluent-kafka's ``Producer`` in unit tests (no broker).

It records every produced record, answers ``list_topics`` with a fixed
partition count, and delivers on ``poll``/``flush`` like librdkafka: the
delivery callback runs there, with an error for the records ``fail`` picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable


@dataclass
class Produced:
    topic: str
    key: bytes
    value: bytes
    partition: int


class FakeKafkaError:
    def __init__(self, message: str, code: int = -192) -> None:
        self._message, self._code = message, code

    def code(self) -> int:
        return self._code

    def __str__(self) -> str:
        return self._message


class FakeMessage:
    def __init__(self, p: Produced) -> None:
        self._p = p

    def topic(self) -> str:
        return self._p.topic

    def partition(self) -> int:
        return self._p.partition

    def key(self) -> bytes:
        return self._p.key


@dataclass
class FakeProducer:
    partitions: int = 4
    topics: set[str] | None = None  # None: every topic exists
    fail: Callable[[Produced], str | None] = lambda p: None
    deliver_on_poll: bool = True  # False: only flush delivers (to see what was in flight when)
    produced: list[Produced] = field(default_factory=list)
    events: list[tuple[str, int]] = field(default_factory=list)  # ("produce", in flight before it) / ("flush", 0)
    flushes: int = 0
    _pending: list[tuple[Produced, Any]] = field(default_factory=list)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if self.topics is not None and topic not in self.topics:
            return SimpleNamespace(topics={topic: SimpleNamespace(error="UNKNOWN_TOPIC_OR_PART", partitions={})})
        parts = {i: SimpleNamespace(id=i) for i in range(self.partitions)}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=parts)})

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, on_delivery: Any) -> None:
        assert isinstance(value, bytes) and isinstance(key, bytes) and 0 <= partition < self.partitions
        p = Produced(topic, key, value, partition)
        self.events.append(("produce", len(self._pending)))
        self.produced.append(p)
        self._pending.append((p, on_delivery))

    def poll(self, timeout: float = 0) -> int:
        return self._deliver() if self.deliver_on_poll else 0

    def _deliver(self) -> int:
        pending, self._pending = self._pending, []
        for p, cb in pending:
            error = self.fail(p)
            cb(FakeKafkaError(error) if error else None, FakeMessage(p))
        return len(pending)

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        self.events.append(("flush", 0))
        self._deliver()
        return 0
