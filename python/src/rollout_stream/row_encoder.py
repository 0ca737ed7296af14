"""Avro bodies of ``rollout.row-completed`` values, written by hand, byte-identical to fastavro and avsc.

Byte grammar (Avro binary; ``long`` = zig-zag varint, ``string``/``bytes`` =
long length + bytes, ``[null, T]`` = long branch index 0 | 1 then T,
arrays and maps = one block ``count items... 0`` or just ``0`` when empty)::

    value       := magic(0x00) schema_id(uint32 BE) RowCompleted
    RowCompleted:= event_branch(long 0|1|2) (RolloutRow | BatchEnd | GymResult)
    RolloutRow  := batch_id:string group_id:string group_index:int row_index:int
                   num_generations:int prompt_idx:long task_index:[null,long]
                   agent_ref:string(JSON) weight_version:long instance_label:[null,string]
                   request:string(JSON) input_message_log:array<Message>
                   message_log:array<Message> full_result:string(JSON)
                   timing:[null,map<double>] produced_at:[null,long]
    Message     := role:string token_ids:bytes(int32 LE) generation_logprobs:[null,bytes(float32 LE)]
                   routed_experts:[null,Tensor] has_malformed_thinking:[null,boolean]
                   is_invalid_tool_call:[null,boolean] content:[null,string] media:[null,map<Tensor>]
    Tensor      := dtype:string shape:array<long> data:bytes(LE, row-major)
    BatchEnd    := batch_id:string num_rows:int
    GymResult   := batch_id group_id group_index row_index num_generations prompt_idx
                   task_index weight_version instance_label gym_row:string(JSON)
                   gym_result:string(JSON) columns:[null,array<GymItemColumns>] timing produced_at
    GymItemColumns := item:int prompt_token_ids:[null,bytes(int32 LE)] generation_token_ids:[null,bytes(int32 LE)]
                   generation_log_probs:[null,bytes(float64 LE)] routed_experts:[null,GymRoutedExperts]
    GymRoutedExperts := form:enum(envelope=0,lists=1) dtype:string shape:array<int> data:bytes

Each array and map is written as one block (as avsc does), map entries in
the dict's order; a double is its 8 little-endian IEEE bytes. Tensor
payloads are handed to ``bytes.join`` as numpy buffers: the only copy of a
tensor is the one into the record.
"""

from __future__ import annotations

import struct
from typing import Any

from .gym_columns import WireColumns
from .row_input import WireBatchEnd, WireGymResult, WireIdentity, WireMessage, WireRow, WireTensor

_HEADER = struct.Struct(">bI")
_DOUBLE = struct.Struct("<d")
_NULL = b"\x00"
_SOME = b"\x02"  # branch 1 of [null, T]
_FALSE, _TRUE = b"\x00", b"\x01"
_BRANCH_ROW, _BRANCH_BATCH_END, _BRANCH_GYM_RESULT = b"\x00", b"\x02", b"\x04"
_SMALL = [bytes([(n << 1) if n >= 0 else ((-n << 1) - 1)]) for n in range(-64, 64)]


def zigzag(n: int) -> bytes:
    """An Avro ``int``/``long``: zig-zag, then base-128 varint, low group first."""
    if -64 <= n < 64:
        return _SMALL[n + 64]
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def header(schema_id: int) -> bytes:
    """The Confluent frame header: magic byte 0 and the big-endian schema id."""
    return _HEADER.pack(0, schema_id)


def _string(parts: list[Any], b: bytes) -> None:
    parts.append(zigzag(len(b)))
    parts.append(b)


def _array_bytes(parts: list[Any], data: Any) -> None:
    parts.append(zigzag(data.nbytes))
    parts.append(data)


def _optional_long(parts: list[Any], v: int | None) -> None:
    if v is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        parts.append(zigzag(v))


def _optional_string(parts: list[Any], b: bytes | None) -> None:
    if b is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        _string(parts, b)


def _optional_bool(parts: list[Any], v: bool | None) -> None:
    if v is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        parts.append(_TRUE if v else _FALSE)


def _tensor(parts: list[Any], t: WireTensor) -> None:
    _string(parts, t.dtype)
    if t.shape:
        parts.append(zigzag(len(t.shape)))
        parts.extend(zigzag(d) for d in t.shape)
    parts.append(_NULL)
    _array_bytes(parts, t.data)


def _message(parts: list[Any], m: WireMessage) -> None:
    _string(parts, m.role)
    _array_bytes(parts, m.token_ids)
    if m.generation_logprobs is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        _array_bytes(parts, m.generation_logprobs)
    if m.routed_experts is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        _tensor(parts, m.routed_experts)
    _optional_bool(parts, m.has_malformed_thinking)
    _optional_bool(parts, m.is_invalid_tool_call)
    _optional_string(parts, m.content)
    if m.media is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        if m.media:
            parts.append(zigzag(len(m.media)))
            for name, t in m.media:
                _string(parts, name)
                _tensor(parts, t)
        parts.append(_NULL)


def _messages(parts: list[Any], ms: list[WireMessage]) -> None:
    if ms:
        parts.append(zigzag(len(ms)))
        for m in ms:
            _message(parts, m)
    parts.append(_NULL)


def _head(parts: list[Any], i: WireIdentity) -> None:
    _string(parts, i.batch_id)
    _string(parts, i.group_id)
    parts.append(zigzag(i.group_index))
    parts.append(zigzag(i.row_index))
    parts.append(zigzag(i.num_generations))
    parts.append(zigzag(i.prompt_idx))
    _optional_long(parts, i.task_index)


def _tail(parts: list[Any], i: WireIdentity) -> None:
    if i.timing is None:
        parts.append(_NULL)
    else:
        parts.append(_SOME)
        if i.timing:
            parts.append(zigzag(len(i.timing)))
            for name, seconds in i.timing:
                _string(parts, name)
                parts.append(_DOUBLE.pack(seconds))
        parts.append(_NULL)
    _optional_long(parts, i.produced_at)


def row_parts(r: WireRow) -> list[Any]:
    """The body of a ``RolloutRow`` event as a list of bytes-like pieces (join them)."""
    i = r.identity
    parts: list[Any] = [_BRANCH_ROW]
    _head(parts, i)
    _string(parts, r.agent_ref)
    parts.append(zigzag(i.weight_version))
    _optional_string(parts, i.instance_label)
    _string(parts, r.request)
    _messages(parts, r.input_message_log)
    _messages(parts, r.message_log)
    _string(parts, r.full_result)
    _tail(parts, i)
    return parts


def _columns(parts: list[Any], columns: list[WireColumns]) -> None:
    """Version 2's ``columns``: always the array branch (an empty array when nothing moved)."""
    parts.append(_SOME)
    if columns:
        parts.append(zigzag(len(columns)))
        for c in columns:
            parts.append(zigzag(c.item))
            _optional_string(parts, c.prompt_token_ids)  # Avro bytes are written as strings are
            _optional_string(parts, c.generation_token_ids)
            _optional_string(parts, c.generation_log_probs)
            r = c.routed_experts
            if r is None:
                parts.append(_NULL)
            else:
                parts.append(_SOME)
                parts.append(zigzag(r.form))
                _string(parts, r.dtype)
                parts.append(zigzag(len(r.shape)))
                parts.extend(zigzag(d) for d in r.shape)
                parts.append(_NULL)
                _string(parts, r.data)
    parts.append(_NULL)


def gym_result_parts(g: WireGymResult) -> list[Any]:
    """The body of a ``GymResult`` event (version 2) as a list of bytes-like pieces."""
    i = g.identity
    parts: list[Any] = [_BRANCH_GYM_RESULT]
    _head(parts, i)
    parts.append(zigzag(i.weight_version))
    _optional_string(parts, i.instance_label)
    _string(parts, g.gym_row)
    _string(parts, g.gym_result)
    _columns(parts, g.columns)
    _tail(parts, i)
    return parts


def batch_end_parts(e: WireBatchEnd) -> list[Any]:
    """The body of a ``BatchEnd`` event as a list of bytes-like pieces."""
    parts: list[Any] = [_BRANCH_BATCH_END]
    _string(parts, e.batch_id)
    parts.append(zigzag(e.num_rows))
    return parts


def encode(event: WireRow | WireGymResult | WireBatchEnd, schema_id: int | None = None) -> bytes:
    """The Avro body of one event, Confluent-framed when ``schema_id`` is given."""
    if isinstance(event, WireRow):
        parts = row_parts(event)
    elif isinstance(event, WireGymResult):
        parts = gym_result_parts(event)
    elif isinstance(event, WireBatchEnd):
        parts = batch_end_parts(event)
    else:
        raise TypeError(f"not a row-completed wire value: {type(event).__name__}")
    if schema_id is not None:
        parts.insert(0, header(schema_id))
    return b"".join(parts)
