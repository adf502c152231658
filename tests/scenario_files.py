"""Scenario files of the tests, written once: the sections every small scenario repeats.

>>> print(scenario_toml("t", 2, 'kind = "stencil"\\nsteps = 1', seed=3, more=imbalance_toml("1", 0.5)), end="")
[scenario]
name = "t"
ranks = 2
seed = 3
<BLANKLINE>
[platform]
name = "dawning_5000a"
<BLANKLINE>
[application]
kind = "stencil"
steps = 1
<BLANKLINE>
[[application.imbalance]]
region = "Stencil"
ranks = [1]
magnitude = 0.5
"""

from __future__ import annotations


def scenario_toml(name: str, ranks: int | str, application: str, *, seed: int | None = None,
                  platform: str = "dawning_5000a", more: str = "") -> str:
    """A scenario file: ``[scenario]`` (name, ranks, seed when given), ``[platform]`` name, ``[application]`` with
    the ``application`` lines, then ``more`` (further sections, as written) after a blank line."""
    seed_line = f"seed = {seed}\n" if seed is not None else ""
    text = (f'[scenario]\nname = "{name}"\nranks = {ranks}\n{seed_line}\n[platform]\nname = "{platform}"\n\n'
            f"[application]\n{application.strip()}\n")
    return text + (f"\n{more.strip()}\n" if more.strip() else "")


def imbalance_toml(ranks: str, magnitude: float | str, *, distribution: str | None = None,
                   steps: str | None = None) -> str:
    """An ``[[application.imbalance]]`` section on the stencil's region; ``ranks`` and ``steps`` are the lists'
    contents (``"1"``, ``"1, 2"``)."""
    lines = ["[[application.imbalance]]", 'region = "Stencil"', f"ranks = [{ranks}]"]
    if distribution is not None:
        lines.append(f'distribution = "{distribution}"')
    lines.append(f"magnitude = {magnitude}")
    if steps is not None:
        lines.append(f"steps = [{steps}]")
    return "\n".join(lines) + "\n"


#: The smallest valid scenario (the stencil on 4 ranks of Dawning 5000A): the bad-input and CLI tests edit it.
TINY = scenario_toml("tiny", 4, 'kind = "stencil"\nsteps = 3', seed=7)
