"""Trainer-side client for the ``rollout.packed`` Kafka topic.

Quick use::

    from rollout_stream import PackedConsumer, feed, materialize

    with PackedConsumer("rollout.packed", "trainer") as consumer:
        feed(consumer, put_samples)          # put_samples(sample_ids, fields, tags)

See ``python/README.md``.
"""

from .codec import JaggedArray, PackedGroup, decode_packed_body
from .consumer import DEFAULT_BROKERS, Delivery, FeedStats, PackedConsumer, feed
from .deserializer import PackedDeserializer, decode_packed
from .errors import (
    BrokerUnavailableError,
    DecodeError,
    FramingError,
    KafkaOperationError,
    RegistryUnavailableError,
    RolloutStreamError,
    UnknownSchemaError,
)
from .framing import frame, parse_header
from .materialize import materialize
from .media import media_segments
from .merge import merge_groups
from .registry import DEFAULT_REGISTRY_URL, SchemaResolver, StaticResolver, make_registry_client

__version__ = "0.1.0"

__all__ = [
    "BrokerUnavailableError",
    "DEFAULT_BROKERS",
    "DEFAULT_REGISTRY_URL",
    "DecodeError",
    "Delivery",
    "FeedStats",
    "FramingError",
    "JaggedArray",
    "KafkaOperationError",
    "PackedConsumer",
    "PackedDeserializer",
    "PackedGroup",
    "RegistryUnavailableError",
    "RolloutStreamError",
    "SchemaResolver",
    "StaticResolver",
    "UnknownSchemaError",
    "decode_packed",
    "decode_packed_body",
    "feed",
    "frame",
    "make_registry_client",
    "materialize",
    "media_segments",
    "merge_groups",
    "parse_header",
]
