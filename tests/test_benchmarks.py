"""Every benchmark script runs (in smoke mode: tiny sizes, short timings) and prints its ratios
(time_to_accuracy: its last line)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_benchmark_runs(script):
    env = dict(os.environ, VITLIB_SMOKE="1")
    args = ["--size", "32", "--dim", "16"] if script.stem == "patch_embed" else []
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    if script.stem == "time_to_accuracy":
        last = result.stdout.strip().splitlines()[-1]
        assert last.startswith("seconds_to_target=") and "final_test_accuracy=" in last
        assert " device=cpu" in last
    else:
        assert "ratio" in result.stdout
