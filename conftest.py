"""Test settings shared by the unit tests and the notebooks that nbval runs.

Set before any kernel starts, so the notebooks' kernels inherit them: smoke mode shrinks each
chapter to well under a minute, and strict checks turn a wrong exercise solution into a failure.
"""

import os

os.environ["VITLIB_SMOKE"] = "1"
os.environ["VITLIB_STRICT_CHECKS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
