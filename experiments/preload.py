"""Modules imported on a thread while a run's SMPI stage goes on, so the work after the stage does not wait for them.

``waitlab run`` from a shell needs pandas, pyarrow and the analysis models only for the work after its SMPI stage,
and Bokeh and matplotlib only to write ``report.html`` and ``timeline.png``; imported before the stage they added
2-3 s to every run (issue 25, docs/performance.md).  The stage is a ``smpirun`` process that this one waits for
without holding Python's lock, so the imports cost no time there; what can be made from the imports alone (the
report page's skeleton) is made there too, and the thread ends with a full garbage collection.  The thread starts
when the first ``smpirun`` process has started (:func:`waitlab.simulator.progress.on_launch`) and is joined when the
stage's block ends: nothing it imports is used half-initialised, and nothing imports on two threads afterwards.

>>> import sys
>>> with preloading(["colorsys"]):
...     progress.launched()  # what an SMPI run does once its process has started
>>> "colorsys" in sys.modules
True
"""

from __future__ import annotations

import gc
import importlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from waitlab.simulator import progress


def _import_all(modules: Sequence[str], then: Callable[[], object] | None = None) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # the same import on the main thread raises it again, where it is used
            return
    if then is not None:
        try:
            then()
        except Exception:  # what it prepares is made again where it is used, and its error raised there
            return
    # A full collection here, while SMPI runs: the objects the imports made (and ``then``'s garbage) are otherwise
    # scanned by the first full collection after the stage, on the main thread (0.12 s measured after a program run).
    # A collection only sooner than Python would make it: no object is kept or freed differently.
    gc.collect()


@contextmanager
def preloading(modules: Sequence[str], then: Callable[[], object] | None = None) -> Iterator[None]:
    """Import ``modules`` on a thread from the moment the block's first ``smpirun`` process has started, then call
    ``then`` there (work that needs the modules but not the stage's results); join the thread when the block ends
    normally.

    Started earlier, the imports would take Python's lock from the work before the stage (measured: 0.06 s became
    0.35-0.71 s).  Modules already imported are skipped (a second run in one process starts a thread only for
    ``then``); a block that runs no SMPI stage starts none.  When the block raises (an error, Ctrl-C) the thread is
    not waited for: it is a daemon and its imports are harmless.
    """
    missing = [m for m in modules if m not in sys.modules]
    if not missing and then is None:
        yield
        return
    thread = threading.Thread(target=_import_all, args=(missing, then), name="waitlab-preload", daemon=True)

    def start() -> None:
        if thread.ident is None:  # the first SMPI stage of the block
            thread.start()

    with progress.on_launch(start):
        yield
    if thread.ident is not None:
        thread.join()
