"""The ``rollout.row-completed`` value schema as the publisher registers and writes it.

``schemas/row-completed.avsc`` is the source of truth for both languages;
the package reads its shipped copy (:mod:`rollout_stream.schema_files`).
The TypeScript side registers ``JSON.stringify(parsed .avsc)`` (compact,
key order as in the file) under ``<topic>-value``; :func:`registered_text`
produces that exact text (for this ASCII schema without floats, Python's
compact dump is the same), so both publishers get one schema id. The Python
encoder (:mod:`rollout_stream.row_encoder`) writes the body by hand for
speed, so :func:`check_layout` refuses a schema whose Parsing Canonical Form
(the part that decides the bytes: names, types, field order) differs from
the one the encoder was written for.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
from fastavro.schema import to_parsing_canonical_form

from . import schema_files
from .errors import SchemaLayoutError

if TYPE_CHECKING:
    from importlib.abc import Traversable

SCHEMA_FILE = "row-completed.avsc"
NAMESPACE = "dev.rolloutstream.v1"
ROW_BRANCH = f"{NAMESPACE}.RolloutRow"
BATCH_END_BRANCH = f"{NAMESPACE}.BatchEnd"
GYM_RESULT_BRANCH = f"{NAMESPACE}.GymResult"
# sha256 of the Parsing Canonical Form the hand-written encoder follows:
# event = union [RolloutRow, BatchEnd, GymResult], fields in schema order,
# GymResult with version 2's columns.
ENCODER_LAYOUT_SHA256 = "68b9fdc059f5666a28a0df85a14964cc7033c23460e5626cb349c3fa06ede1b9"


def schema_path() -> Traversable:
    """``row-completed.avsc`` as shipped in the package (a copy of the repository's ``schemas/``)."""
    return schema_files.schema_file(SCHEMA_FILE)


def load(path: str | Path | None = None) -> dict[str, Any]:
    """The schema as parsed JSON (key order as in the file): the shipped one, or the file at ``path``."""
    if path is None:
        return schema_files.schema_json(SCHEMA_FILE)
    return json.loads(Path(path).read_text(encoding="utf-8"))


def registered_text(schema: dict[str, Any]) -> str:
    """The text the TypeScript registry client sends for ``schema``: ``JSON.stringify(schema)``."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def layout_sha256(schema: dict[str, Any]) -> str:
    """sha256 (hex) of the schema's Parsing Canonical Form."""
    return hashlib.sha256(to_parsing_canonical_form(schema).encode("utf-8")).hexdigest()


def check_layout(schema: dict[str, Any]) -> None:
    """Raises :class:`SchemaLayoutError` unless ``schema`` encodes like the hand-written encoder.

    Docs, defaults and logical types do not count (they change no byte).
    """
    got = layout_sha256(schema)
    if got != ENCODER_LAYOUT_SHA256:
        raise SchemaLayoutError(
            f"{SCHEMA_FILE} has layout {got[:12]}…, but rollout_stream/row_encoder.py writes layout "
            f"{ENCODER_LAYOUT_SHA256[:12]}…: the schema changed (new field, new union branch, reordering); "
            "update the encoder and ENCODER_LAYOUT_SHA256 together",
            layout=got,
        )


@lru_cache(maxsize=4)
def _parsed_for(text: str) -> dict[str, Any]:
    return fastavro.parse_schema(json.loads(text))


def parsed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema parsed by fastavro (cached per schema text), for decoding."""
    return _parsed_for(json.dumps(schema))
