"""Every benchmark script runs (in smoke mode: tiny sizes, short timings) and prints its ratios
(time_to_accuracy: its last line)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_files import load_module

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [
    # browser_latency opens the built site in Chromium: skips without it (fails under CI=true)
    pytest.param(p, marks=pytest.mark.browser) if p.stem == "browser_latency" else p
    for p in sorted(
        (ROOT / "benchmarks").glob("[!_]*.py")
    )  # _devices.py is shared code
]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_benchmark_runs(script):
    env = dict(os.environ, VITLIB_SMOKE="1")
    args = {
        "patch_embed": ["--size", "32", "--dim", "16"],
        "time_to_accuracy": ["--seeds", "0", "1", "--recipe", "fashion-cpu"]
        + ["fashion-cpu-modern"],
        "browser_latency": ["--updates", "4"],
        "recipe_sweep": ["--variant", "recipe", "--variant", "one epoch: --epochs 1"]
        + ["--solo", "one epoch"],
        "modern_vit": ["--only", "baseline", "2D RoPE", "--seeds", "0", "1", "--test"]
        + ["--combine", "registers", "shifted patches"],
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
        assert (
            " min_final_val_accuracy=" in lines[-1]
        )  # chosen on validation, both kept
        # two recipes: seeds interleaved, one summary line each, their ranges compared
        order = [line.split()[1] for line in lines if line.startswith("recipe fashion")]
        assert order[:4] == ["fashion-cpu", "fashion-cpu-modern"] * 2
        summaries = [line for line in lines if line.startswith("min_final_test")]
        assert [s.split("recipe=")[1] for s in summaries] == [
            "fashion-cpu",
            "fashion-cpu-modern",
        ]
        assert any(line.startswith("validation: fashion-cpu") for line in lines)
    elif (
        script.stem == "modern_vit"
    ):  # a JSON line per run (page 11 reads them), a table
        runs = [json.loads(line[4:]) for line in lines if line.startswith("run {")]
        rows = ("baseline", "2D RoPE", "combined: registers + shifted patches")
        # the rows take turns, seed by seed: a drift in the machine's speed hits each alike
        assert [(r["row"], r["seed"]) for r in runs] == [
            (row, seed) for seed in (0, 1) for row in rows
        ]
        assert all(r["seconds"] >= r["budget"] for r in runs)  # trained to the clock
        tested = {r["row"] for r in runs if "test_accuracy" in r}
        assert tested == {"baseline", "combined: registers + shifted patches"}
        assert lines[-1].startswith("combined: registers + shifted patches")
    elif script.stem == "faithfulness":  # a JSON line per model (page 8d reads them)
        runs = [json.loads(line[4:]) for line in lines if line.startswith("run {")]
        assert [(r["recipe"], r["seed"]) for r in runs] == [("fashion-cpu", 0)]
        areas = runs[0]["occlusion"]
        assert 0 <= areas["deletion"] <= 1 and 0 <= areas["insertion"] <= 1
        assert len(areas["deletion per class"]) == 10
        assert {"random 1", "random 2", "random 3", "gradient x attention"} <= set(
            runs[0]
        )
        assert lines[-1].startswith("fashion-cpu ") and "random 3" in lines[-1]
    elif script.stem == "recipe_sweep":  # each variant's flags reach its run
        summaries = [line.split()[:2] for line in lines if line.startswith("variant=")]
        assert summaries == [
            ["variant=recipe", "epochs=2"],
            ["variant=one_epoch", "epochs=1"],
        ]
        assert any(line.startswith("solo one epoch: first epoch") for line in lines)
    else:
        assert "ratio" in result.stdout


def test_token_cost_counts_the_published_multiply_adds():
    # timm's model cards (deit_tiny/small/base_patch16_224, the same shapes as ViT-Ti/S/B/16 at
    # 224 px): 1.3, 4.6 and 17.6 GMACs; flop_counter counts two operations per multiply-add
    import torch

    token_cost = load_module("benchmarks/token_cost.py")
    for name, published in [("ViT-Ti", 1.3), ("ViT-S", 4.6), ("ViT-B", 17.6)]:
        with torch.device("meta"):
            model = token_cost.PRESETS[name]()
            images = torch.empty(1, 3, 224, 224)
        flops, attention = token_cost.forward_flops(model, images)
        assert round(flops / 2e9, 1) == published, name
        assert 0 < attention < flops


def test_a_timing_ratio_lies_in_its_own_middle_half():
    from vitlib.utils import paired_timing

    # a slow spell in rounds 3 to 5 hits the baseline in round 3 but this version only later:
    # the ratio of the medians (1 / 10) says ten times faster; round by round they are equal
    seconds, baseline = [1, 1, 1, 10, 10], [1, 1, 10, 10, 10]
    timing = paired_timing(seconds, baseline)
    assert timing.seconds == 1 and timing.ratio == 1
    assert timing.spread[0] <= timing.ratio <= timing.spread[1]


def test_a_cifar_log_says_which_copy_it_read(tmp_path):
    tta = load_module(ROOT / "benchmarks" / "time_to_accuracy.py")
    (tmp_path / "cifar10" / "train" / "cat").mkdir(parents=True)
    (tmp_path / "cifar10" / "train" / "cat" / "0000.jpg").write_bytes(b"")
    assert tta.cifar_source(tmp_path).endswith("cifar10 (JPG files)")
    (
        tmp_path / "cifar-10-batches-py"
    ).mkdir()  # the batches come first, as cifar10() reads
    assert tta.cifar_source(tmp_path).startswith("CIFAR-10, the python batches")


def test_a_page_finds_a_log_by_its_name():
    from vitlib.utils import result_log

    log = result_log("modern_vit_cpu.txt")  # in a clone: the repository's folder
    assert log == ROOT / "benchmarks" / "results" / "modern_vit_cpu.txt"
    assert log.read_text().startswith("python benchmarks/modern_vit.py")
    with pytest.raises(
        FileNotFoundError, match="no nothing.txt in .*benchmarks/results"
    ):
        result_log("nothing.txt")
    # every log a page reads ships with the package (pyproject's vitlib.results)
    project = (ROOT / "pyproject.toml").read_text()
    assert '"vitlib.results" = "benchmarks/results"' in project
