"""The version of waitlab (one place), and a digest of its code."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

__version__ = "0.2.0"

#: The packages whose files make waitlab's code, and the kinds of file that change what it computes.
CODE_PACKAGES = ("waitlab", "waitlab.experiments", "waitlab.models", "waitlab.platforms", "waitlab.simulator")
CODE_SUFFIXES = frozenset({".py", ".c", ".cpp", ".h", ".f90", ".toml", ".json", ".xml"})


@functools.cache
def code_digest() -> str:
    """SHA-256 (first 16 hex digits) of every source and data file of waitlab's packages, by path and content.

    Results kept on disk between runs (counterfactual re-runs, evaluate's scored rows) are keyed by it as well as by
    their inputs: a changed waitlab (a new wait-state rule, a fixed noise model) never reuses what an older one
    computed, even at the same version number.  About 10 ms, once per process.
    """
    h = hashlib.sha256(__version__.encode())
    for pkg in CODE_PACKAGES:
        spec = importlib.util.find_spec(pkg)
        for loc in (spec.submodule_search_locations or []) if spec is not None else []:
            root = Path(loc)
            files = root.glob("*") if pkg == "waitlab" else root.rglob("*")
            for f in sorted(p for p in files if p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts
                            and p.is_file()):
                h.update(f"{pkg}/{f.relative_to(root).as_posix()}\0".encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]
