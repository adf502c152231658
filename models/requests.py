"""Which completion completes which non-blocking request: the rule shared by the matcher
(:func:`waitlab.simulator.matching.request_pairs`) and the trace check
(:func:`waitlab.models.analysis.trace_check.wait_problem`), as SimGrid 3.32's replay keeps a rank's requests
(``RequestStorage``: per source, destination and tag, oldest first)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def completing_tests(typ: npt.NDArray[np.int8], new_key: npt.NDArray[np.bool_], epoch: npt.NDArray[np.int64]
                     ) -> npt.NDArray[np.bool_]:
    """Which ``test`` rows (``typ`` 2; requests 0, waits 1; sorted by key, then row; ``new_key`` where a key's rows
    start) complete a request: the last test of a run of tests of one key that
    directly follows a request of the key (no waitall between: ``epoch``) and that no wait of the key follows (a wait
    after tests completes the request itself: the tests failed).

    >>> completing_tests(np.array([0, 2, 2, 0, 2, 1], np.int8), np.array([1, 0, 0, 0, 0, 0], bool),
    ...                  np.zeros(6, np.int64)).tolist()
    [False, False, True, False, False, False]
    """
    m = typ.size
    same_next = np.append(~new_key[1:], False)
    is_test = typ == 2
    prev_test = np.concatenate(([False], is_test[:-1])) & ~new_key
    last = is_test & ~(np.append(is_test[1:], False) & same_next)
    followed_by_wait = np.append(typ[1:] == 1, False) & same_next
    start = np.maximum.accumulate(np.where(is_test & ~prev_test, np.arange(m), 0))
    before = np.maximum(start - 1, 0)
    return last & ~followed_by_wait & ~new_key[start] & (typ[before] == 0) & (epoch[before] == epoch)
