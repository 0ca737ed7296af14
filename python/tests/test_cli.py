"""The command line: bench output contract (inspect is covered by the integration tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_bench_prints_rates_and_ends_with_the_ratio_line():
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "bench", "--groups", "2", "--rows", "4",
         "--min-tokens", "64", "--max-tokens", "128", "--repeat", "2", "--routed-experts", "2x2"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert any(re.search(r"decode jagged=numpy .* MB/s .* groups/s", l) for l in lines)
    assert any(re.search(r"decode jagged=torch .* MB/s .* groups/s", l) for l in lines)
    assert re.fullmatch(r"ratio decode/copy: \d+\.\d+", lines[-1])


def test_bench_breakdown_times_each_step_and_still_ends_with_the_ratio_line():
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "bench", "--groups", "2", "--rows", "4",
         "--min-tokens", "64", "--max-tokens", "128", "--repeat", "2", "--breakdown"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    for step in ("copy", "parse", "passes", "astype aligned", "fields numpy", "fields torch", "nested direct", "nested public"):
        assert any(re.fullmatch(rf"  {step} +\d+\.\d us/group +copy/step +\d+\.\d+", l) for l in lines), step
    assert any(re.fullmatch(r"ceiling \(copy / passes\): \d+\.\d+", l) for l in lines)
    assert sum("decode-only loop jagged=" in l and "page faults/group" in l for l in lines) == 2
    assert re.fullmatch(r"ratio decode/copy: \d+\.\d+", lines[-1])


def test_bench_skip_stale_times_the_header_skip_against_decoding_and_ends_with_the_ratio_line():
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "bench", "--skip-stale", "--groups", "4", "--rows", "4",
         "--min-tokens", "64", "--max-tokens", "128", "--repeat", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "half stale" in lines[0]
    for name in ("stream decode", "stream skip", "stale decode", "stale skip"):
        assert any(re.match(rf"{name} +\d+\.\d groups/s +\d+\.\d us/group", l) for l in lines), name
    assert re.fullmatch(r"stream ratio skip/decode: \d+\.\d\d  \(.*\)", lines[-2])
    assert re.fullmatch(r"ratio skip/decode: \d+\.\d", lines[-1])


def test_without_the_bench_folder_bench_says_where_the_benches_are():
    code = (
        "import sys; from pathlib import Path; sys.path = [p for p in sys.path if not p.endswith('python/bench')]; "
        "import rollout_stream.cli as c; c.BENCH_DIR = Path('/nonexistent'); sys.exit(c.main(['bench']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "python/bench/rollout_stream_bench" in out.stderr


def test_the_library_package_ships_no_bench_module():
    import rollout_stream

    src = Path(rollout_stream.__file__).parent
    assert not [p.name for p in src.glob("*bench*")]


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "rollout_stream", "nope"], capture_output=True, text=True)
    assert out.returncode == 2 and "invalid choice" in out.stderr


def test_version_names_the_package_version():
    # (a regex, not tomllib: the suite runs on Python 3.10 too)
    want = re.search(r'^version = "([^"]+)"', (Path(__file__).parents[1] / "pyproject.toml").read_text(), re.M).group(1)
    out = subprocess.run([sys.executable, "-m", "rollout_stream", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"rollout-stream {want} (Python package)"


def test_bench_chunk_decodes_reassembled_sets_against_whole_values_and_ends_with_the_ratio_line():
    out = subprocess.run(
        [sys.executable, "-m", "rollout_stream", "bench", "--groups", "2", "--rows", "4", "--min-tokens", "4096",
         "--max-tokens", "8192", "--repeat", "2", "--chunk", "64KiB"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert any(re.search(r"2 records .* as chunk sets for a 65536-byte topic limit: payload \d+ bytes, \d+ chunks", l) for l in lines)
    assert sum(bool(re.fullmatch(r"assembly copy(\+crc)? +\d+\.\d ms/GB  \(.*\)", l)) for l in lines) == 2
    assert any(re.search(r"decode jagged=torch +whole .* MB/s +chunked .* MB/s +ratio \d+\.\d+", l) for l in lines)
    assert re.fullmatch(r"ratio chunked/whole: \d+\.\d+", lines[-1])
    bad = subprocess.run([sys.executable, "-m", "rollout_stream", "bench", "--chunk", "lots"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "'lots' is not a size" in bad.stderr
