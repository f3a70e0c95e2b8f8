"""Every benchmark script runs (in smoke mode: tiny sizes, short timings) and prints its ratios
(time_to_accuracy: its last line)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [
    # browser_latency opens the built site in Chromium: skips without it (fails under CI=true)
    pytest.param(p, marks=pytest.mark.browser) if p.stem == "browser_latency" else p
    for p in sorted((ROOT / "benchmarks").glob("*.py"))
]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_benchmark_runs(script):
    env = dict(os.environ, VITLIB_SMOKE="1")
    args = {
        "patch_embed": ["--size", "32", "--dim", "16"],
        "time_to_accuracy": ["--seeds", "0", "1"],
        "browser_latency": ["--updates", "4"],
    }.get(script.stem, [])
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith(f"python benchmarks/{script.name}"), (
        "a log's first line is the command that wrote it (vitlib.utils.log_header)"
    )
    if script.stem == "time_to_accuracy":
        assert lines[-1].startswith("min_final_test_accuracy=")
        assert "mean_final_test_accuracy=" in lines[-1] and " device=cpu" in lines[-1]
    else:
        assert "ratio" in result.stdout
