"""The callable deserializer: Confluent-framed value bytes → :class:`PackedGroup`.

Shaped like confluent-kafka's ``AvroDeserializer``: construct once with a
registry, call with ``(value, ctx)``; a ``to_result`` hook turns the decoded
group into the caller's own type.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from confluent_kafka.schema_registry import SchemaRegistryClient

from .avro_body import read_parts
from .codec import JaggedMode, PackedGroup, build_group, resolve_placement
from .framing import HEADER_SIZE, parse_header
from .registry import SchemaResolver, resolver_for

T = TypeVar("T")


class PackedDeserializer(Generic[T]):
    """Decodes ``rollout.packed`` values using writer schemas from the registry.

    Args:
        registry: Registry URL, a ``SchemaRegistryClient``, or a :class:`SchemaResolver`.
            Schemas are fetched by the frame's id once and cached parsed.
        jagged: ``"auto"`` (torch when importable), ``"torch"`` or ``"numpy"``.
        to_result: Optional hook ``(group, ctx) -> T`` applied to every decoded
            group (e.g. build a trainer batch object); default returns the group.
        device: ``None``/``"cpu"`` (default): host tensors as before. A CUDA
            device (``"cuda"``, ``"cuda:1"``): fields are decoded into pinned
            host memory and copied there asynchronously; jagged fields are
            nested tensors on the device (see :mod:`rollout_stream.devices`).

    Raises (from the constructor):
        DeviceUnavailableError: ``device`` is CUDA but CUDA is not available.
        ValueError: Bad ``jagged``/``device``, or a device with ``jagged="numpy"``.

    Calling it:
        ``deserializer(value, ctx=None)`` returns ``None`` for a ``None`` value
        (a tombstone), else ``to_result(group, ctx)``.

    Raises (from ``__call__``):
        FramingError: Not Confluent wire format (magic byte, too short).
        UnknownSchemaError: The frame's schema id is not in the registry.
        RegistryUnavailableError: The registry cannot be reached.
        DecodeError: The body does not decode as a consistent PackedGroup.
    """

    def __init__(
        self,
        registry: SchemaResolver | SchemaRegistryClient | str,
        *,
        jagged: JaggedMode = "auto",
        to_result: Callable[[PackedGroup, Any], T] | None = None,
        device: Any = None,
    ) -> None:
        self.resolver = resolver_for(registry)
        self.jagged, self.placement = resolve_placement(jagged, device)
        self.device = None if self.placement is None else self.placement.device
        self.to_result = to_result

    def __call__(self, value: bytes | None, ctx: Any = None) -> T | PackedGroup | None:
        if value is None:
            return None
        group = self.decode(value)
        return self.to_result(group, ctx) if self.to_result is not None else group

    def decode(self, value: bytes | bytearray | memoryview) -> PackedGroup:
        """Decodes one framed value into a :class:`PackedGroup` (no hook)."""
        schema_id = parse_header(value)
        writer = self.resolver.parsed(schema_id)
        return build_group(read_parts(value, HEADER_SIZE, writer), self.jagged, self.placement, schema_id)


def decode_packed(
    value_bytes: bytes | bytearray | memoryview,
    registry: SchemaResolver | SchemaRegistryClient | str,
    *,
    jagged: JaggedMode = "auto",
    device: Any = None,
) -> PackedGroup:
    """Decodes one Confluent-framed ``rollout.packed`` value.

    Args:
        value_bytes: The Kafka record value (magic byte, schema id, Avro body).
        registry: Registry URL, ``SchemaRegistryClient`` or :class:`SchemaResolver`;
            parsed schemas are cached per registry.
        jagged: ``"auto"``, ``"torch"`` or ``"numpy"`` (see :class:`PackedDeserializer`).
        device: ``None``/``"cpu"`` or a CUDA device (see :class:`PackedDeserializer`).

    Returns:
        The decoded group; unpack it as ``sample_ids, fields, tags = group``.

    Raises:
        FramingError, UnknownSchemaError, RegistryUnavailableError, DecodeError:
            As for :class:`PackedDeserializer`.
        DeviceUnavailableError, ValueError: As for :class:`PackedDeserializer`'s constructor.
    """
    mode, pl = resolve_placement(jagged, device)
    schema_id = parse_header(value_bytes)
    writer = resolver_for(registry).parsed(schema_id)
    return build_group(read_parts(value_bytes, HEADER_SIZE, writer), mode, pl, schema_id)
