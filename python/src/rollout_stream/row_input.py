"""Checking what a rollout worker hands the publisher, and turning it into wire values (SPEC §2, §2.1).

A malformed row must fail in the worker, with a message naming the field,
not as a dead letter minutes later (SPEC §2.2). The rules are the ones the
pipeline applies on the other side (``processors/row-validation.ts``,
``processors/message-validation.ts``; for GymResults the identity rules
plus the shape ingest needs), so a record that passes here is not rejected
there for its shape. Two things are deliberately not
errors: NaN logprobs (the pipeline dead-letters them as ``nan_logprobs``,
which is the reportable outcome) and unknown extra keys (not sent).

The results hold only bytes and little-endian numpy arrays, ready for
:mod:`rollout_stream.row_encoder`.
"""

from __future__ import annotations

import datetime as _dt
import numbers
from collections.abc import Mapping, Sequence  # not typing's: its isinstance costs microseconds
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import gym_columns, json_text, tensor_input
from .errors import InvalidRowError

INT32_MAX = 2**31 - 1
MAX_SAFE_INTEGER = 2**53 - 1  # the TypeScript side reads Avro longs as JS numbers
_NAN = float("nan")


@dataclass(slots=True)
class WireTensor:
    dtype: bytes
    shape: list[int]
    data: np.ndarray


@dataclass(slots=True)
class WireMessage:
    role: bytes
    token_ids: np.ndarray
    generation_logprobs: np.ndarray | None
    routed_experts: WireTensor | None
    has_malformed_thinking: bool | None
    is_invalid_tool_call: bool | None
    content: bytes | None
    media: list[tuple[bytes, WireTensor]] | None


@dataclass(slots=True)
class WireIdentity:
    batch_id: bytes
    group_id: bytes
    group_index: int
    row_index: int
    num_generations: int
    prompt_idx: int
    task_index: int | None
    weight_version: int
    instance_label: bytes | None
    timing: list[tuple[bytes, float]] | None
    produced_at: int | None


@dataclass(slots=True)
class WireRow:
    identity: WireIdentity
    agent_ref: bytes
    request: bytes
    input_message_log: list[WireMessage]
    message_log: list[WireMessage]
    full_result: bytes


@dataclass(slots=True)
class WireGymResult:
    identity: WireIdentity
    gym_row: bytes
    gym_result: bytes  # UTF-8 JSON text (json_text.dumps), without what went into the columns
    columns: list[gym_columns.WireColumns]  # version 2: the output items' numbers (gym_columns.split)


@dataclass(slots=True)
class WireBatchEnd:
    batch_id: bytes
    num_rows: int


# ---------------------------------------------------------------- scalars


def _is_int(v: Any) -> bool:
    return type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)))


def _int(v: Any, field: str, lo: int, hi: int, what: str) -> int:
    if type(v) is int and lo <= v <= hi:
        return v
    if v is None:
        raise InvalidRowError(field, "is missing")
    if not _is_int(v):
        raise InvalidRowError(field, f"must be {what}, got {_describe(v)}")
    i = int(v)
    if not lo <= i <= hi:
        raise InvalidRowError(field, f"must be {what}, got {i}")
    return i


def _long(v: Any, field: str) -> int:
    return _int(v, field, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, "an integer within ±(2**53 - 1)")


def _utf8(s: str, field: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidRowError(field, f"is not valid Unicode text (lone surrogate at index {e.start})") from None


def _text(v: Any, field: str, *, non_empty: bool = False) -> bytes:
    if type(v) is str and (v or not non_empty):
        return _utf8(v, field)
    if v is None:
        raise InvalidRowError(field, "is missing")
    if not isinstance(v, str) or (non_empty and not v):
        raise InvalidRowError(field, f"must be a {'non-empty ' if non_empty else ''}string, got {_describe(v)}")
    return _utf8(v, field)


def _optional_text(v: Any, field: str) -> bytes | None:
    return None if v is None else _text(v, field)


def _optional_bool(v: Any, field: str) -> bool | None:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise InvalidRowError(field, f"must be a boolean when present, got {_describe(v)}")


def _describe(v: Any) -> str:
    if isinstance(v, str):
        return f"the string {v!r}" if len(v) < 40 else "a string"
    if isinstance(v, (bool, np.bool_, numbers.Number)):
        return f"{type(v).__name__} {v!r}"
    return f"a {type(v).__name__}"


def _object(v: Any, field: str) -> Mapping[str, Any]:
    if v is None:
        raise InvalidRowError(field, "is missing")
    if not isinstance(v, Mapping):
        raise InvalidRowError(field, f"must be a JSON object (a dict), got {_describe(v)}")
    return v


def _json(v: Any, field: str) -> bytes:
    return json_text.dumps(_object(v, field), field)


def _map_items(v: Mapping[Any, Any], field: str) -> list[tuple[str, Any]]:
    """An Avro map's entries in the dict's order; integer keys become their digits (as JSON would write them)."""
    out = []
    for k, x in v.items():
        if type(k) is not str:
            if not _is_int(k):
                raise InvalidRowError(field, f"has a key of type {type(k).__name__}; keys must be strings")
            k = str(int(k))
        out.append((k, x))
    return out


def produced_at_ms(v: Any, field: str = "produced_at") -> int | None:
    """Epoch milliseconds from an int or a ``datetime`` (None stays absent)."""
    if v is None:
        return None
    if isinstance(v, _dt.datetime):
        return int(v.timestamp() * 1000)
    return _long(v, field)


def _timing(v: Any, field: str = "timing") -> list[tuple[bytes, float]] | None:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise InvalidRowError(field, f"must be a map of name → seconds when present, got {_describe(v)}")
    out = []
    for name, seconds in _map_items(v, field):
        if not isinstance(seconds, numbers.Real) or isinstance(seconds, (bool, np.bool_)):
            raise InvalidRowError(f"{field}.{name}", f"must be a number, got {_describe(seconds)}")
        x = float(seconds)
        out.append((_utf8(name, f"{field}.{name}"), x if x == x else _NAN))  # one NaN bit pattern, as JavaScript writes it
    return out


# ---------------------------------------------------------------- identity


def identity(
    *,
    batch_id: Any,
    group_id: Any,
    group_index: Any,
    row_index: Any,
    num_generations: Any,
    prompt_idx: Any,
    weight_version: Any,
    task_index: Any = None,
    instance_label: Any = None,
    timing: Any = None,
    produced_at: Any = None,
    prefix: str = "",
) -> WireIdentity:
    """The stream identity of SPEC §2, checked in the pipeline's order.

    ``row_index`` must lie in ``[group_index*N, group_index*N + N)``.

    Raises:
        InvalidRowError: The first field that breaks a rule.
    """
    row = _int(row_index, f"{prefix}row_index", -INT32_MAX - 1, INT32_MAX, "an integer")
    n = _int(num_generations, f"{prefix}num_generations", 1, INT32_MAX, "an integer >= 1")
    g = _int(group_index, f"{prefix}group_index", 0, INT32_MAX, "a non-negative integer")
    start = g * n
    if not start <= row < start + n:
        raise InvalidRowError(
            f"{prefix}row_index",
            f"{row} is outside [{start}, {start + n}) for group_index {g} with {n} generations",
        )
    return WireIdentity(
        batch_id=_text(batch_id, f"{prefix}batch_id", non_empty=True),
        group_id=_text(group_id, f"{prefix}group_id", non_empty=True),
        group_index=g,
        row_index=row,
        num_generations=n,
        prompt_idx=_long(prompt_idx, f"{prefix}prompt_idx"),
        task_index=None if task_index is None else _long(task_index, f"{prefix}task_index"),
        weight_version=_long(weight_version, f"{prefix}weight_version"),
        instance_label=_optional_text(instance_label, f"{prefix}instance_label"),
        timing=_timing(timing, f"{prefix}timing"),
        produced_at=produced_at_ms(produced_at, f"{prefix}produced_at"),
    )


# ---------------------------------------------------------------- messages


def message(m: Any, field: str) -> WireMessage:
    """One message of ``message_log`` / ``input_message_log`` as wire values.

    Raises:
        InvalidRowError: ``role`` not a string; ``token_ids`` missing, not
            1-D integers or outside int32; ``generation_logprobs`` of another
            length; ``routed_experts`` not a rank-3 integer tensor over the
            message's tokens; flags not booleans; ``content`` not a string;
            ``media`` not a map of tensors.
    """
    if type(m) is not dict and not isinstance(m, Mapping):
        raise InvalidRowError(field, f"must be a message object (a dict), got {_describe(m)}")
    get = m.get
    role = get("role")
    if type(role) is not str:
        raise InvalidRowError(f"{field}.role", f"is missing or not a string ({_describe(role)})")
    tokens = tensor_input.token_ids(get("token_ids"), f"{field}.token_ids")
    lp = get("generation_logprobs")
    if lp is not None:
        lp = tensor_input.logprobs(lp, f"{field}.generation_logprobs", tokens.shape[0])
    routes = get("routed_experts")
    if routes is not None:
        routes = _wire_tensor(tensor_input.routed_experts(routes, f"{field}.routed_experts", tokens.shape[0]))
    thinking, tool_call = get("has_malformed_thinking"), get("is_invalid_tool_call")
    if thinking is not None:
        thinking = _optional_bool(thinking, f"{field}.has_malformed_thinking")
    if tool_call is not None:
        tool_call = _optional_bool(tool_call, f"{field}.is_invalid_tool_call")
    content = get("content")
    if content is not None:
        if type(content) is not str:
            raise InvalidRowError(f"{field}.content", f"must be a string when present, got {_describe(content)}")
        content = _utf8(content, f"{field}.content")
    media = get("media")
    if media is not None:
        media = _media(media, f"{field}.media")
    return WireMessage(_utf8(role, f"{field}.role"), tokens, lp, routes, thinking, tool_call, content, media)


def _wire_tensor(t: tuple[str, list[int], np.ndarray]) -> WireTensor:
    return WireTensor(t[0].encode("ascii"), t[1], t[2])


def _media(v: Any, field: str) -> list[tuple[bytes, WireTensor]]:
    if not isinstance(v, Mapping):
        raise InvalidRowError(field, f"must be a map of name → tensor, got {_describe(v)}")
    return [
        (_utf8(name, f"{field}.{name}"), _wire_tensor(tensor_input.media_tensor(t, f"{field}.{name}")))
        for name, t in _map_items(v, field)
    ]


def messages(v: Any, field: str) -> list[WireMessage]:
    if v is None:
        raise InvalidRowError(field, "is missing")
    if not isinstance(v, Sequence) or isinstance(v, (str, bytes)):
        raise InvalidRowError(field, f"must be a list of messages, got {_describe(v)}")
    return [message(m, f"{field}[{i}]") for i, m in enumerate(v)]


# ---------------------------------------------------------------- records


def _agent_ref(v: Any, field: str) -> Mapping[str, Any]:
    ref = _object(v, field)
    if not isinstance(ref.get("name"), str):
        raise InvalidRowError(f"{field}.name", f"must be a string, got {_describe(ref.get('name'))}")
    return ref


def row(r: Any) -> WireRow:
    """A NeMo-RL row dict as a ``RolloutRow`` (SPEC §2).

    ``request`` may be given as NeMo-Gym's ``responses_create_params`` (the
    same object, SPEC §2.1 step 7) and ``task_index`` as ``_ng_task_index``;
    the SPEC names win when both are there.

    Raises:
        InvalidRowError: The first field that breaks SPEC §2.
    """
    if not isinstance(r, Mapping):
        raise InvalidRowError("row", f"must be a dict, got {_describe(r)}")
    ident = identity(
        batch_id=r.get("batch_id"),
        group_id=r.get("group_id"),
        group_index=r.get("group_index"),
        row_index=r.get("row_index"),
        num_generations=r.get("num_generations"),
        prompt_idx=r.get("prompt_idx"),
        weight_version=r.get("weight_version"),
        task_index=r["task_index"] if r.get("task_index") is not None else r.get("_ng_task_index"),
        instance_label=r.get("instance_label"),
        timing=r.get("timing"),
        produced_at=r.get("produced_at"),
    )
    agent_ref = _agent_ref(r.get("agent_ref"), "agent_ref")
    request = r["request"] if r.get("request") is not None else r.get("responses_create_params")
    request_json = _json(request, "request")
    return WireRow(
        identity=ident,
        agent_ref=json_text.dumps(agent_ref, "agent_ref"),
        request=request_json,
        input_message_log=messages(r.get("input_message_log"), "input_message_log"),
        message_log=messages(r.get("message_log"), "message_log"),
        full_result=_json(r.get("full_result"), "full_result"),
    )


def gym_result(gym_row: Any, result: Any, ident: WireIdentity) -> WireGymResult:
    """A ``GymResult`` (SPEC §2.1): the identity plus the task row and NeMo-Gym's result.

    Beyond the identity, checks what ingest needs before it can build a row,
    as the TypeScript ``gymResultProblem`` does (``processors/gym-result-fields.ts``):
    ``gym_row`` and ``gym_result`` objects, ``gym_row.agent_ref.name`` a
    string, ``gym_row.responses_create_params`` an object (it becomes the
    row's ``request``), ``gym_row._ng_task_index`` an integer when present and
    the identity has no ``task_index``, ``gym_result.response.output`` a list.
    Output items are left to ingest (``non_contiguous_tokens``, ``no_generation_data``, …);
    their token ids, logprobs and routed experts travel as binary columns
    where they pass :mod:`rollout_stream.gym_columns`' rules (version 2).

    Raises:
        InvalidRowError: The first field that breaks a rule.
    """
    task_row = _object(gym_row, "gym_row")
    _agent_ref(task_row.get("agent_ref"), "gym_row.agent_ref")
    _object(task_row.get("responses_create_params"), "gym_row.responses_create_params")
    # Ingest reads the task row's copy only when the identity has no task_index.
    ng_task = task_row.get("_ng_task_index")
    if ident.task_index is None and ng_task is not None and not _is_int(ng_task):
        raise InvalidRowError("gym_row._ng_task_index", f"must be an integer when present, got {_describe(ng_task)}")
    res = _object(result, "gym_result")
    response = res.get("response")
    if not isinstance(response, Mapping):
        raise InvalidRowError("gym_result.response", f"must be an object, got {_describe(response)}")
    output = response.get("output")
    if not isinstance(output, (list, tuple)):
        raise InvalidRowError("gym_result.response.output", f"must be a list of output items, got {_describe(output)}")
    new_output, columns = gym_columns.split(output)
    if new_output is not None:  # copies down to the items that lost keys; the caller's objects are untouched
        res = {**res, "response": {**response, "output": new_output}}
    return WireGymResult(
        identity=ident,
        gym_row=json_text.dumps(task_row, "gym_row"),
        gym_result=json_text.dumps(res, "gym_result"),
        columns=columns,
    )


def batch_end(batch_id: Any, num_rows: Any) -> WireBatchEnd:
    """A ``BatchEnd`` (SPEC §2).

    Raises:
        InvalidRowError: ``batch_id`` not a non-empty string, ``num_rows`` not an int32 >= 0.
    """
    return WireBatchEnd(
        batch_id=_text(batch_id, "batch_id", non_empty=True),
        num_rows=_int(num_rows, "num_rows", 0, INT32_MAX, "a non-negative integer"),
    )
