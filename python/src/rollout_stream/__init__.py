"""Trainer-side client for the ``rollout.packed`` Kafka topic.

Quick use::

    from rollout_stream import PackedConsumer, feed, materialize

    with PackedConsumer("rollout.packed", "trainer") as consumer:
        feed(consumer, put_samples)          # put_samples(sample_ids, fields, tags)

See ``python/README.md``.
"""

from typing import TYPE_CHECKING, Any

# Names resolve on first use (PEP 562), so `python -m rollout_stream bench
# --device cuda` and `rollout_stream.devices`/`materialize` work where
# confluent-kafka or fastavro are not installed (a bare PyTorch GPU box).
_EXPORTS = {
    "BatchPublisher": "batch_stamping",
    "RowIdentity": "batch_stamping",
    "stamp_batch": "batch_stamping",
    "JaggedArray": "codec",
    "PackedGroup": "codec",
    "decode_packed_body": "codec",
    "DEFAULT_BROKERS": "consumer",
    "Delivery": "consumer",
    "FeedStats": "feed_loop",
    "PackedConsumer": "consumer",
    "feed": "feed_loop",
    "StaleGroup": "staleness",
    "Position": "positions",
    "get_position": "positions",
    "merge_positions": "positions",
    "put_position": "positions",
    "ReplayStats": "replay_reader",
    "replay": "replay_reader",
    "replay_records": "replay_reader",
    "PackedDeserializer": "deserializer",
    "decode_packed": "deserializer",
    "fields_to": "devices",
    "BrokerUnavailableError": "errors",
    "ConfigError": "errors",
    "DecodeError": "errors",
    "DeliveryError": "errors",
    "InvalidRowError": "errors",
    "PublisherClosedError": "errors",
    "SchemaLayoutError": "errors",
    "SchemaRegistrationError": "errors",
    "DeviceUnavailableError": "errors",
    "FramingError": "errors",
    "KafkaOperationError": "errors",
    "OffsetLookupError": "errors",
    "RegistryUnavailableError": "errors",
    "RolloutStreamError": "errors",
    "UnknownSchemaError": "errors",
    "frame": "framing",
    "parse_header": "framing",
    "materialize": "materialize",
    "media_segments": "media",
    "merge_groups": "merge",
    "murmur2": "partitioner",
    "partition_for_key": "partitioner",
    "FailedDelivery": "publisher",
    "PublisherStats": "publisher",
    "RolloutPublisher": "publisher",
    "DEFAULT_REGISTRY_URL": "registry",
    "SchemaResolver": "registry",
    "StaticResolver": "registry",
    "make_registry_client": "registry",
}

if TYPE_CHECKING:  # pragma: no cover
    from .batch_stamping import BatchPublisher, RowIdentity, stamp_batch
    from .codec import JaggedArray, PackedGroup, decode_packed_body
    from .consumer import DEFAULT_BROKERS, Delivery, PackedConsumer
    from .feed_loop import FeedStats, feed
    from .positions import Position, get_position, merge_positions, put_position
    from .replay_reader import ReplayStats, replay, replay_records
    from .staleness import StaleGroup
    from .deserializer import PackedDeserializer, decode_packed
    from .devices import fields_to
    from .errors import (
        BrokerUnavailableError,
        ConfigError,
        DecodeError,
        DeliveryError,
        DeviceUnavailableError,
        FramingError,
        InvalidRowError,
        KafkaOperationError,
        OffsetLookupError,
        PublisherClosedError,
        RegistryUnavailableError,
        RolloutStreamError,
        SchemaLayoutError,
        SchemaRegistrationError,
        UnknownSchemaError,
    )
    from .framing import frame, parse_header
    from .materialize import materialize
    from .media import media_segments
    from .merge import merge_groups
    from .partitioner import murmur2, partition_for_key
    from .publisher import FailedDelivery, PublisherStats, RolloutPublisher
    from .registry import DEFAULT_REGISTRY_URL, SchemaResolver, StaticResolver, make_registry_client


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'rollout_stream' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "BatchPublisher",
    "BrokerUnavailableError",
    "ConfigError",
    "DEFAULT_BROKERS",
    "DEFAULT_REGISTRY_URL",
    "DecodeError",
    "Delivery",
    "DeliveryError",
    "DeviceUnavailableError",
    "FailedDelivery",
    "FeedStats",
    "FramingError",
    "InvalidRowError",
    "JaggedArray",
    "KafkaOperationError",
    "OffsetLookupError",
    "PackedConsumer",
    "PackedDeserializer",
    "PackedGroup",
    "Position",
    "PublisherClosedError",
    "PublisherStats",
    "RegistryUnavailableError",
    "ReplayStats",
    "RolloutPublisher",
    "RolloutStreamError",
    "RowIdentity",
    "SchemaLayoutError",
    "SchemaRegistrationError",
    "SchemaResolver",
    "StaleGroup",
    "StaticResolver",
    "UnknownSchemaError",
    "decode_packed",
    "decode_packed_body",
    "feed",
    "fields_to",
    "frame",
    "get_position",
    "make_registry_client",
    "materialize",
    "media_segments",
    "merge_groups",
    "merge_positions",
    "murmur2",
    "parse_header",
    "partition_for_key",
    "put_position",
    "replay",
    "replay_records",
    "stamp_batch",
]
