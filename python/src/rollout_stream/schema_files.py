"""The Avro schemas shipped inside the package (``rollout_stream/schemas/*.avsc``).

``schemas/`` at the repository root stays the source of truth: the
TypeScript stages read it, and the package holds byte-identical copies of
the ones it reads itself (:data:`SHIPPED`), so that an installed wheel reads
its schemas from itself, with no checkout around it.
``tests/test_schema_files.py`` fails as soon as a copy differs from the
root's; refresh them with ``cp schemas/{dead-letter,packed,row-completed}.avsc
python/src/rollout_stream/schemas/``.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; 3.10 has it in importlib.abc
    from importlib.abc import Traversable

PACKAGE_DIR = "schemas"
# The schemas the Python side encodes or decodes with; a new one is copied in and named here.
SHIPPED = ("dead-letter.avsc", "packed.avsc", "row-completed.avsc")


def schema_file(name: str) -> Traversable:
    """The shipped file ``name`` (e.g. ``"packed.avsc"``); a plain path in a normal install.

    Raises:
        FileNotFoundError: The package ships no such schema.
    """
    folder = resources.files(__package__) / PACKAGE_DIR
    path = folder / name
    if not path.is_file():
        if not folder.is_dir():
            raise FileNotFoundError(f"this rollout_stream install has no schemas/ folder ({folder}): built without its package data?")
        shipped = sorted(p.name for p in folder.iterdir() if p.name.endswith(".avsc"))
        raise FileNotFoundError(f"rollout_stream ships no schema {name!r} (it has {shipped})")
    return path


def schema_text(name: str) -> str:
    """The text of the shipped schema ``name``."""
    return schema_file(name).read_text(encoding="utf-8")


def schema_json(name: str) -> dict[str, Any]:
    """The shipped schema ``name`` as parsed JSON (key order as in the file)."""
    return json.loads(schema_text(name))
