"""The schemas shipped in the package are the repository's schemas/, byte for byte.

The root ``schemas/`` folder is the source of truth (the TypeScript stages
read it); ``python/src/rollout_stream/schemas/`` holds copies of the ones
the Python side reads, which an installed wheel uses. A schema changed on
one side only fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO_ROOT
from rollout_stream import dead_letters, encode, row_completed_schema, schema_files

ROOT_SCHEMAS = REPO_ROOT / "schemas"
PACKAGE_SCHEMAS = REPO_ROOT / "python" / "src" / "rollout_stream" / "schemas"
REFRESH = "refresh the copy with: cp schemas/{name} python/src/rollout_stream/schemas/"


def test_the_package_folder_holds_exactly_the_shipped_schemas():
    assert sorted(p.name for p in PACKAGE_SCHEMAS.iterdir() if p.name != "__pycache__") == sorted(schema_files.SHIPPED)


@pytest.mark.parametrize("name", schema_files.SHIPPED)
def test_each_shipped_schema_is_byte_identical_to_the_root_one(name):
    assert (ROOT_SCHEMAS / name).is_file(), f"schemas/{name} is gone from the repository root"
    assert (PACKAGE_SCHEMAS / name).read_bytes() == (ROOT_SCHEMAS / name).read_bytes(), (
        f"{name} differs from schemas/{name}; " + REFRESH.format(name=name)
    )


def test_the_loaders_read_the_shipped_copies():
    import rollout_stream

    package_dir = Path(rollout_stream.__file__).resolve().parent
    for path in (row_completed_schema.schema_path(), encode.packed_schema_path(), schema_files.schema_file("dead-letter.avsc")):
        assert Path(str(path)).resolve().parent == package_dir / "schemas"
    assert row_completed_schema.load() == schema_files.schema_json("row-completed.avsc")
    assert dead_letters.DEAD_LETTER_SCHEMA == schema_files.schema_json("dead-letter.avsc")


def test_an_unknown_schema_name_says_which_ones_ship():
    with pytest.raises(FileNotFoundError, match=r"ships no schema 'nope.avsc' .*packed.avsc"):
        schema_files.schema_file("nope.avsc")


def test_a_schema_file_given_by_path_is_read_instead(tmp_path):
    own = tmp_path / "packed.avsc"
    own.write_text((ROOT_SCHEMAS / "packed.avsc").read_text())
    assert encode.load_packed_schema(own) == encode.load_packed_schema()
    row = tmp_path / "row-completed.avsc"
    row.write_text((ROOT_SCHEMAS / "row-completed.avsc").read_text())
    assert row_completed_schema.load(row) == row_completed_schema.load()
