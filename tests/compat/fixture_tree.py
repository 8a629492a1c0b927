"""Checks that a checked-in fixture tree is what its generator writes, byte for byte."""

import filecmp
import subprocess
import sys
from pathlib import Path


def regenerated_differences(fixture: Path, generator: Path, out: Path) -> list:
    """Runs `generator OUT` and returns the paths under `fixture` that differ from `out`
    (missing on either side, not regular files, or with other bytes): empty when equal."""
    subprocess.run([sys.executable, str(generator), str(out)], check=True)
    stack, differences = [filecmp.dircmp(fixture, out, ignore=[])], []
    while stack:
        c = stack.pop()
        differences += [f"{c.left}/{n}" for n in c.left_only + c.right_only + c.funny_files]
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        differences += [f"{c.left}/{n}" for n in mismatch + errors]
        stack += c.subdirs.values()
    return differences
