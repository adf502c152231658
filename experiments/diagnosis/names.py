"""The built-in diagnosis models by key and display name, without their code.

The command line lists them in its help and :func:`waitlab.api.diagnosis_models` returns them without importing
the models themselves (networkx alone takes 0.3 s to import); :data:`waitlab.experiments.diagnosis.registry.BUILTIN`
attaches each key's functions.

>>> list(BUILTIN_NAMES)[:3] == list(DEFAULT_DIAGNOSE)
True
"""

from __future__ import annotations

#: Key -> display name of every built-in model, in report order.
BUILTIN_NAMES: dict[str, str] = {
    "cwpdm": "CWP-DM",
    "hcwpdm": "H-CWP-DM (earliest)",
    "hcwpdm_each": "H-CWP-DM (each)",
    "critical_path": "Critical-path imbalance",
    "blame_shifting": "Blame shifting",
    "profile": "Profile (waiter's region)",
    "graph": "Graph backtracking",
}

#: What ``waitlab diagnose`` runs without ``--model`` (the models of Wu et al.).
DEFAULT_DIAGNOSE = ("cwpdm", "hcwpdm", "hcwpdm_each")
