"""``rollout.row-completed`` values in the SPEC §9 JSON form, both ways.

- :func:`from_json` reads one JSON-form line object (a plain row, a
  GymResult object with ``gym_row``/``gym_result`` and no ``message_log``,
  or ``{"batch_end": {...}}``) into what :class:`RolloutPublisher` takes;
- :func:`decode` reads a framed value back with fastavro, and
  :func:`to_json` turns that into the JSON form exactly as the TypeScript
  ``rowToJson`` / ``gymResultToJson`` write it (token ids as lists, float32
  logprobs with the fewest digits that read back to the same float32,
  int32 routed experts and float32 media as nested lists, other dtypes as
  ``{"dtype", "shape", "values"}``, NaN and infinities as strings); a
  version-2 GymResult's columns are put back into its output items
  (:func:`gym_result_object`).

Used by the shared test vectors and handy for debugging a topic.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
import warnings
from collections.abc import Mapping
from typing import Any

import fastavro
import numpy as np

from . import gym_columns, row_completed_schema
from .errors import DecodeError, InvalidRowError
from .framing import HEADER_SIZE, parse_header

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_KIND = {
    row_completed_schema.ROW_BRANCH: "row",
    row_completed_schema.GYM_RESULT_BRANCH: "gym_result",
    row_completed_schema.BATCH_END_BRANCH: "batch_end",
}
IDENTITY_KEYS = (
    "batch_id",
    "group_id",
    "group_index",
    "row_index",
    "num_generations",
    "prompt_idx",
    "task_index",
    "weight_version",
    "instance_label",
    "timing",
    "produced_at",
)
ROUTED_DEFAULT, MEDIA_DEFAULT = "int32", "float32"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


# ---------------------------------------------------------------- JSON form → publisher input


def _number(v: Any) -> Any:
    return _SPECIAL.get(v, v) if isinstance(v, str) else v


def _numbers(values: Any) -> Any:
    if isinstance(values, list):
        return [_numbers(v) for v in values]
    return _number(values)


def _tensor_from_json(v: Any, default: str, field: str) -> Any:
    """A ``{"dtype", "shape", "values"}`` tensor as numpy; nested lists stay lists (read as ``default``)."""
    if isinstance(v, Mapping) and {"dtype", "shape", "values"} <= v.keys():
        try:
            dtype = np.dtype(v["dtype"])
            values = _numbers(v["values"]) if dtype.kind == "f" else v["values"]
            with warnings.catch_warnings():
                # numpy < 2 wraps an out-of-range integer around (with this warning) where numpy 2 raises OverflowError
                warnings.simplefilter("error", DeprecationWarning)
                arr = np.asarray(values, dtype=dtype)
            return arr.reshape([int(d) for d in v["shape"]])
        except DeprecationWarning:
            raise InvalidRowError(field, f"is not a valid {v.get('dtype')!r} tensor: a value is out of bounds for {dtype}") from None
        except (TypeError, ValueError, OverflowError) as e:
            raise InvalidRowError(field, f"is not a valid {v.get('dtype')!r} tensor: {e}") from None
    if isinstance(v, list) and np.dtype(default).kind == "f":
        return _numbers(v)
    return v


def _message_from_json(m: Any, field: str) -> Any:
    """Tensor fields of one JSON-form message in the forms ``publish_row`` takes (lists stay lists)."""
    if not isinstance(m, Mapping):
        return m
    out = dict(m)
    if isinstance(out.get("generation_logprobs"), list):
        out["generation_logprobs"] = _numbers(out["generation_logprobs"])
    if out.get("routed_experts") is not None:
        out["routed_experts"] = _tensor_from_json(out["routed_experts"], ROUTED_DEFAULT, f"{field}.routed_experts")
    if isinstance(out.get("media"), Mapping):
        out["media"] = {k: _tensor_from_json(t, MEDIA_DEFAULT, f"{field}.media.{k}") for k, t in out["media"].items()}
    return out


def _identity_from_json(o: dict[str, Any]) -> dict[str, Any]:
    if isinstance(o.get("produced_at"), str):
        o["produced_at"] = iso_to_ms(o["produced_at"])
    if isinstance(o.get("timing"), Mapping):
        o["timing"] = {k: _number(v) for k, v in o["timing"].items()}
    return o


def iso_to_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 time (``Z`` or an offset; none means UTC).

    Raises:
        InvalidRowError: Not an ISO-8601 time.
    """
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRowError("produced_at", f"is neither epoch milliseconds nor an ISO-8601 time: {text!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return (t - _EPOCH) // _dt.timedelta(milliseconds=1)


def is_gym_result_object(o: Mapping[str, Any]) -> bool:
    """A GymResult line (SPEC §9): ``gym_row`` or ``gym_result``, and no ``message_log``."""
    return ("gym_row" in o or "gym_result" in o) and "message_log" not in o


def from_json(o: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """One JSON-form line object as ``(kind, arguments)`` for the publisher.

    ``kind`` is ``"row"`` (arguments: the row dict for ``publish_row``, tensors
    as numpy), ``"gym_result"`` (keyword arguments of ``publish_result``) or
    ``"batch_end"`` (``batch_id``, ``num_rows``). Nothing is validated here.
    """
    if "batch_end" in o and isinstance(o["batch_end"], Mapping):
        return "batch_end", {"batch_id": o["batch_end"].get("batch_id"), "num_rows": o["batch_end"].get("num_rows")}
    if is_gym_result_object(o):
        return "gym_result", _identity_from_json(dict(o))
    r = _identity_from_json(dict(o))
    for key in ("input_message_log", "message_log"):
        if isinstance(r.get(key), list):
            r[key] = [_message_from_json(m, f"{key}[{i}]") for i, m in enumerate(r[key])]
    return "row", r


# ---------------------------------------------------------------- wire → JSON form


def decode(value: bytes, schema: dict[str, Any] | None = None) -> tuple[str, int, dict[str, Any]]:
    """A framed row-completed value as ``(kind, schema_id, record)`` with fastavro.

    Bytes fields stay bytes, JSON fields stay text: this is the record as
    Avro holds it, not a reinterpretation.

    Raises:
        FramingError: Not a Confluent frame.
        DecodeError: Not a valid body for the schema, or trailing bytes.
    """
    schema_id = parse_header(value)
    parsed = row_completed_schema.parsed(schema or row_completed_schema.load())
    buf = io.BytesIO(value)
    buf.seek(HEADER_SIZE)
    try:
        record = fastavro.schemaless_reader(buf, parsed, None, return_record_name=True, return_record_name_override=True)
    except Exception as e:  # fastavro raises several unrelated types
        raise DecodeError(f"not a valid row-completed body: {e}", cause=e) from e
    if buf.tell() != len(value):
        raise DecodeError(f"row-completed value has {len(value) - buf.tell()} trailing bytes")
    name, body = record["event"]
    return _KIND[name], schema_id, body


def float32_to_json(x: float) -> float | str:
    """The number TypeScript's ``float32ToJson`` writes: fewest digits that read back to the same float32."""
    if not math.isfinite(x):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    f = np.float32(x)
    with np.errstate(over="ignore"):  # a candidate above float32's max reads as inf: not a match
        for digits in range(1, 9):
            candidate = float(f"{x:.{digits - 1}e}")
            if np.float32(candidate) == f:
                return candidate
    return float(f"{x:.8e}")


def _float_json(x: float) -> float | str:
    return x if math.isfinite(x) else ("NaN" if x != x else ("Infinity" if x > 0 else "-Infinity"))


def _nested(flat: list[Any], shape: list[int]) -> list[Any]:
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nested(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def _flat_json(dtype: str, data: bytes) -> list[Any]:
    arr = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"))
    if dtype == "float32":
        return [float32_to_json(float(v)) for v in arr]
    if dtype == "float64":
        return [_float_json(float(v)) for v in arr]
    return arr.tolist()  # bool → booleans, ints → ints


def _tensor_json(t: Mapping[str, Any], default: str) -> Any:
    shape = [int(d) for d in t["shape"]]
    flat = _flat_json(t["dtype"], t["data"])
    if t["dtype"] == default and shape and all(shape):
        return _nested(flat, shape)
    return {"dtype": t["dtype"], "shape": shape, "values": flat}


def _message_json(m: Mapping[str, Any]) -> dict[str, Any]:
    o: dict[str, Any] = {"role": m["role"], "token_ids": np.frombuffer(m["token_ids"], "<i4").tolist()}
    if m["generation_logprobs"] is not None:
        o["generation_logprobs"] = _flat_json("float32", m["generation_logprobs"])
    if m["routed_experts"] is not None:
        o["routed_experts"] = _tensor_json(m["routed_experts"], ROUTED_DEFAULT)
    for key in ("has_malformed_thinking", "is_invalid_tool_call", "content"):
        if m[key] is not None:
            o[key] = m[key]
    if m["media"] is not None:
        o["media"] = {k: _tensor_json(t, MEDIA_DEFAULT) for k, t in m["media"].items()}
    return o


def _identity_json(r: Mapping[str, Any], before_weight: dict[str, Any], after_label: dict[str, Any]) -> dict[str, Any]:
    o: dict[str, Any] = {k: r[k] for k in ("batch_id", "group_id", "group_index", "row_index", "num_generations", "prompt_idx")}
    if r["task_index"] is not None:
        o["task_index"] = r["task_index"]
    o.update(before_weight)
    o["weight_version"] = r["weight_version"]
    if r["instance_label"] is not None:
        o["instance_label"] = r["instance_label"]
    o.update(after_label)
    if r["timing"] is not None:
        o["timing"] = {k: _float_json(v) for k, v in r["timing"].items()}
    if r["produced_at"] is not None:
        pa = r["produced_at"]  # fastavro reads timestamp-millis as an aware datetime
        o["produced_at"] = (pa - _EPOCH) // _dt.timedelta(milliseconds=1) if isinstance(pa, _dt.datetime) else pa
    return o


def gym_result_object(record: Mapping[str, Any], *, json_form: bool = False) -> Any:
    """The ``gym_result`` of a decoded GymResult record as NeMo-Gym returned it (version 2's columns put back).

    ``json_form``: non-finite logprobs as the JSON form's strings (see :func:`gym_columns.assemble`).

    Raises:
        DecodeError: The columns do not fit the JSON (the message names the item and key).
    """
    return gym_columns.assemble(json.loads(record["gym_result"]), record.get("columns"), json_form=json_form)


def to_json(kind: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A decoded record (:func:`decode`) in the JSON form (the keys and order of the TypeScript writers)."""
    if kind == "batch_end":
        return {"batch_end": {"batch_id": record["batch_id"], "num_rows": record["num_rows"]}}
    if kind == "gym_result":
        return _identity_json(
            record, {}, {"gym_row": json.loads(record["gym_row"]), "gym_result": gym_result_object(record, json_form=True)}
        )
    return _identity_json(
        record,
        {"agent_ref": json.loads(record["agent_ref"])},
        {
            "request": json.loads(record["request"]),
            "input_message_log": [_message_json(m) for m in record["input_message_log"]],
            "message_log": [_message_json(m) for m in record["message_log"]],
            "full_result": json.loads(record["full_result"]),
        },
    )


def wire_from_json(o: Mapping[str, Any]) -> Any:
    """One JSON-form line object validated into the wire value the publisher would send.

    Raises:
        InvalidRowError: As the matching publisher call.
    """
    from . import row_input

    kind, args = from_json(o)
    if kind == "batch_end":
        return row_input.batch_end(args["batch_id"], args["num_rows"])
    if kind == "row":
        return row_input.row(args)
    ident = row_input.identity(**{k: args.get(k) for k in IDENTITY_KEYS})
    return row_input.gym_result(args.get("gym_row"), args.get("gym_result"), ident)
