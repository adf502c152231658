"""The ``waitlab`` command's entry point (the ``waitlab`` script and ``python -m waitlab``): :func:`waitlab.cli.main`,
with pydantic's plugin search off unless the environment says otherwise.

Before it builds its first model, pydantic looks for plugins among the entry points of every installed distribution:
8-15 ms of every command's start here (``importlib.metadata.entry_points(group="pydantic")`` over 148
distributions, five fresh processes), before a run's SMPI stage can start.  The command line uses no pydantic
plugin, so it sets pydantic's documented switch ``PYDANTIC_DISABLE_PLUGINS=__all__`` when the variable is unset
(set it to an empty string to keep a plugin, such as an observability one).  ``import waitlab`` in a user's program
leaves the environment alone.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # before waitlab.cli imports pydantic

from waitlab.cli import main  # after the environment above

__all__ = ["main"]
