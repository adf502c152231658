"""Errors that reach the user as one clear message, never as a traceback.

Every error names *where* (file and field), *what* was wrong, and *the fix*.
The CLI prints ``str(error)`` and exits with status 2 (bad input) or 3
(simulation failure).
"""

from __future__ import annotations


def problem_text(where: str, problem: str, fix: str = "") -> str:
    """The one spelling of every input problem: ``WHERE: PROBLEM (fix: FIX)``.

    >>> problem_text("steps", "must be >= 1, got 0", "set steps = 1")
    'steps: must be >= 1, got 0 (fix: set steps = 1)'
    """
    return f"{where}: {problem}" + (f" (fix: {fix})" if fix else "")


class WaitlabError(Exception):
    """Base class of every error waitlab reports to the user."""

    exit_code = 2


class InputError(WaitlabError):
    """A scenario, platform, trace or noise file is malformed.

    Parameters
    ----------
    file : str
        Path (or name) of the offending file.
    field : str
        Dotted key or ``line N`` inside the file.
    problem : str
        What is wrong.
    fix : str
        What the user should write instead.

    Examples
    --------
    >>> str(InputError("a.toml", "platform.nodes", "must be > 0, got -1", "set nodes = 4"))
    'a.toml: platform.nodes: must be > 0, got -1 (fix: set nodes = 4)'
    """

    def __init__(self, file: str, field: str, problem: str, fix: str = "") -> None:
        self.file = str(file)
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(problem_text(f"{self.file}: {field}", problem, fix))


class SimulationError(WaitlabError):
    """SimGrid (smpirun, smpicxx, a replay) failed; carries SimGrid's own words."""

    exit_code = 3


class EnvironmentProblem(WaitlabError):
    """A required tool (smpirun, smpicxx, python3-simgrid) is missing."""

    exit_code = 4
