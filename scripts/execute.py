"""Run notebooks top to bottom in a fresh kernel and store their outputs (`make execute`).

    python scripts/execute.py notebooks/02_positions.ipynb [...]

What `jupyter nbconvert --execute --inplace` does, with the widget state stored, and with one
fix: nbclient sometimes waits forever for the reply to a cell that shows ipywidgets (the
kernel is idle, the reply has arrived, nobody wakes up: jupyter/nbclient#312,
jupyter/nbconvert#2029). Here the wait for a reply is a loop of one-second polls, and each
poll looks at the socket again, so a reply that has arrived is always found.

The notebook's metadata keeps how long the run took and on what (`vitlib.run`), and the
latest run on each kind of machine (`vitlib.runs`): set-up's table of running times and the
instructors' guide quote them.
"""

import argparse
import sys
import time
from pathlib import Path
from queue import Empty

import nbformat
from nbclient import NotebookClient

from vitlib.utils import hardware

sys.path.insert(0, str(Path(__file__).parent))
from run_times import machine, records  # noqa: E402

POLL_SECONDS = 1.0


def poll_in_steps(channel):
    """Wrap channel.get_msg(timeout) into repeated short polls with the same deadline."""
    get_msg = channel.get_msg

    async def patient_get_msg(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            try:
                return await get_msg(
                    timeout=POLL_SECONDS
                    if left is None
                    else max(0, min(left, POLL_SECONDS))
                )
            except Empty:
                if left is not None and left <= POLL_SECONDS:
                    raise

    channel.get_msg = patient_get_msg


class Client(NotebookClient):
    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        poll_in_steps(kc.shell_channel)
        return kc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    args = parser.parse_args()
    for path in args.notebooks:
        start = time.perf_counter()
        print(f"executing {path} ...", flush=True)
        nb = nbformat.read(path, as_version=4)
        Client(
            nb,
            timeout=args.timeout,
            kernel_name="python3",
            store_widget_state=True,
            record_timing=False,
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
        seconds = time.perf_counter() - start
        record = {"seconds": round(seconds), "on": hardware()}
        runs = records(nb.metadata.get("vitlib", {}))  # the latest on each kind so far
        runs[machine(record["on"])] = record
        nb.metadata["vitlib"] = {"run": record, "runs": runs}
        nbformat.write(nb, path)
        print(f"  done in {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
