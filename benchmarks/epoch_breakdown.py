"""Where one training epoch of a recipe spends its time, part by part, on one device.

    python benchmarks/epoch_breakdown.py --device cuda --recipe fashion-gpu-modern

Measured in one run, each the median of several timed repetitions (the device synchronised
around each): the first compiled step (torch.compile's compilation, from the cache the process
finds: point TORCHINDUCTOR_CACHE_DIR at an empty folder for a cold one); one training step
eager and compiled, and the compiled step's parts (forward and backward; gradient clipping;
AdamW); one epoch of the data loader alone (gather, crop, flip, normalise); one real epoch
(loader and compiled steps, as vitlib.train runs it); the evaluation of the validation and test
splits that follows each epoch. Then the step's work: its floating-point operations (torch's
flop counter) over its time, beside the device's measured matrix-product rate; and, on a GPU,
the kernels' time per step by kind (matrix products, attention, fused element-wise, optimizer)
and the share of the step in which the GPU ran no kernel. The last lines are the ratios.
"""

import argparse
import statistics
import time
from collections import defaultdict

import torch
from _devices import add_device_flag, devices
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from vitlib.data import VAL_SIZE, load_dataset
from vitlib.loop import RECIPES, batches, classify, evaluate, make_optimizer, train_step
from vitlib.model import build_model
from vitlib.trainer import compiled
from vitlib.utils import autocast, grad_scaler, hardware, is_smoke, log_header, pick


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(fn, device, repeats: int) -> float:
    """Median wall seconds of `fn()` over `repeats` runs, after one untimed run."""
    fn()
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_rate(device) -> float:
    """Floating-point operations per second of a large product at the training precision."""
    n = pick(full=8192 if device.type == "cuda" else 1024, smoke=256)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    return 2 * n**3 / seconds(lambda: a @ b, device, 10)


KINDS = [  # kernel name fragments, first match wins
    ("attention", ("flash", "fmha", "attention", "sdpa", "cudnn")),
    ("matrix products", ("gemm", "nvjet", "cutlass", "sm90", "xmma", "matmul")),
    ("optimizer", ("adam", "foreach", "multi_tensor")),
    ("fused element-wise (triton)", ("triton",)),
]


def kernel_kinds(step, steps: int) -> tuple:
    """({kind: GPU milliseconds per step}, [(kernel, ms per step)] busiest first)."""
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per_kernel = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.name] += event.time_range.elapsed_us() / 1e3 / steps
    kinds = defaultdict(float)
    for name, ms in per_kernel.items():
        low = name.lower()
        kind = next((k for k, parts in KINDS if any(p in low for p in parts)), "other")
        kinds[kind] += ms
    return dict(kinds), sorted(per_kernel.items(), key=lambda kv: -kv[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_flag(parser)
    parser.add_argument("--recipe", default="fashion-gpu-modern")
    parser.add_argument(
        "--data", help="dataset folder (default: VITLIB_DATA or ./data)"
    )
    parser.add_argument("--mode", help="torch.compile's mode (default: vitlib.train's)")
    parser.add_argument("--repeats", type=int, default=pick(full=20, smoke=2))
    args = parser.parse_args()
    device = torch.device(devices(args.device)[-1])
    recipe = RECIPES[args.recipe]
    config = recipe.train
    print(log_header())
    print(f"recipe {args.recipe} on {hardware(device)}")
    data = load_dataset(recipe.dataset, args.data, device)
    data = data.hold_out(min(VAL_SIZE, len(data.train_images) // 10))  # as the CLI does
    if is_smoke():
        data = data.subset(512, 256, 256)
        config = type(config)(**{**vars(config), "batch_size": 64})
    c, h, _ = data.image_shape
    changes = dict(
        recipe.model, in_channels=c, img_size=h, num_classes=data.num_classes
    )
    if is_smoke():
        changes |= dict(dim=32, depth=1, heads=2, mlp_dim=64)
    torch.manual_seed(0)
    model = build_model(recipe.architecture, recipe.preset, **changes).to(device)
    loader = batches(data, "train", config.batch_size, config)
    steps = len(loader)
    optimizer, _ = make_optimizer(model, config, steps)
    scaler = grad_scaler(device)
    images, labels = next(iter(loader))
    print(f"{steps} steps of {config.batch_size} images an epoch; {images.shape[1:]}")

    def step_with(runner):
        return lambda: train_step(runner, images, labels, optimizer, config, scaler)

    parts = {}
    parts["eager step"] = seconds(step_with(model), device, args.repeats)
    runner = compiled(model, config, device)
    if args.mode:
        runner = torch.compile(model, mode=args.mode)
    sync(device)
    start = time.perf_counter()
    step_with(runner)()
    sync(device)
    parts["first compiled step"] = time.perf_counter() - start
    parts["compiled step"] = seconds(step_with(runner), device, args.repeats)

    def forward_backward(module=runner):
        with autocast(device):
            loss, _ = classify(module, images, labels, config)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()

    parts["  forward and backward"] = seconds(forward_backward, device, args.repeats)
    clip = lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad)  # noqa: E731
    parts["  gradient clipping"] = seconds(clip, device, args.repeats)
    parts["  AdamW"] = seconds(optimizer.step, device, args.repeats)
    parts["loader epoch (no model)"] = seconds(lambda: [b for b in loader], device, 3)

    def epoch():
        for x, y in loader:
            train_step(runner, x, y, optimizer, config, scaler)

    parts["real epoch"] = seconds(epoch, device, pick(full=3, smoke=1))
    both = lambda: [evaluate(model, data, split) for split in ("val", "test")]  # noqa: E731
    parts["evaluation (val + test)"] = seconds(both, device, 3)
    for name, value in parts.items():
        print(f"{name:32s} {value * 1e3:10.1f} ms")

    with FlopCounterMode(display=False) as counter:
        forward_backward(model)  # counted on the eager model: the same operations
    flops, peak = counter.get_total_flops(), matmul_rate(device)
    achieved = flops / parts["compiled step"]
    print(f"\n{flops / 1e12:.2f} TFLOP a step; {achieved / 1e12:.1f} TFLOP/s achieved")
    print(f"a large matrix product here: {peak / 1e12:.1f} TFLOP/s")
    if device.type == "cuda":
        kinds, kernels = kernel_kinds(step_with(runner), pick(full=10, smoke=2))
        busy = sum(kinds.values())
        print(f"\nGPU time per compiled step by kind ({busy:.2f} ms busy):")
        for kind, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
            print(f"  {kind:30s} {ms:8.3f} ms {ms / busy:6.1%}")
        print("busiest kernels:")
        for name, ms in kernels[:12]:
            print(f"  {ms:8.3f} ms  {name[:100]}")
        idle = 1 - busy / 1e3 / parts["compiled step"]
        print(f"share of the compiled step with no kernel running: {idle:.1%}")
    measured, summed = parts["real epoch"], steps * parts["compiled step"]
    print(
        f"\nratio of the real epoch to {steps} compiled steps: {measured / summed:.3f}"
    )
    print(
        f"ratio of the loader epoch to the real epoch: {parts['loader epoch (no model)'] / measured:.3f}"
    )
    print(
        f"ratio of the evaluation to the real epoch: {parts['evaluation (val + test)'] / measured:.3f}"
    )
    print(f"ratio of achieved to matrix-product rate: {achieved / peak:.3f}")
    print(
        f"ratio of eager to compiled step: {parts['eager step'] / parts['compiled step']:.3f}"
    )


if __name__ == "__main__":
    main()
