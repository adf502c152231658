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


class FlagValue(str):
    """A text given on the command line, which knows its flag: an error about it names the flag (``--model``), and
    the same text passed from Python names the Python argument (``models``).

    >>> v = FlagValue("mymodels:f", "--model")
    >>> v == "mymodels:f", argument_label(v, "models"), argument_label("mymodels:f", "models")
    (True, ('(command line)', '--model'), ('(python call)', 'models'))
    """

    flag: str

    def __new__(cls, text: str, flag: str) -> FlagValue:
        out = super().__new__(cls, text)
        out.flag = flag
        return out

    def __reduce__(self) -> tuple[type[str], tuple[str]]:  # pickled (to a model's process) as the plain text
        return str, (str(self),)


def argument_label(value: object, python_name: str) -> tuple[str, str]:
    """``(where, field)`` of an error about ``value``: ``("(command line)", flag)`` for a :class:`FlagValue`, else
    ``("(python call)", python_name)`` (the argument of the API function it was passed to)."""
    if isinstance(value, FlagValue):
        return "(command line)", value.flag
    return "(python call)", python_name
