"""The devices a timing script of this folder runs on, and its --device flag."""

import sys

import torch


def add_device_flag(parser) -> None:
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        help="time on this device only (default: the CPU, then a CUDA GPU if there is one)",
    )


def devices(only: str = None) -> list:
    """The CPU, then a CUDA GPU where there is one; `only` keeps one of them (an exit
    with a message when it is a GPU this machine lacks)."""
    found = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if only is None:
        return found
    if only not in found:
        sys.exit(f"--device {only}: no GPU here")
    return [only]
