"""The bad-input corpus, part 4 (issue 23): real MPI programs that compile and then fail while they run.

Two ranks each, a few lines of C: a segmentation fault, a deadlock (both ranks call ``MPI_Recv`` first), an
``MPI_Abort`` with error code 3, a rank that exits with status 2 before ``MPI_Finalize``, a ``main`` that returns 1
after it, a program that prints without end (stopped at waitlab's output limit, never held in memory beyond it),
one that prints bytes that are not UTF-8 before it crashes, and region markers that do not nest.  Each must give
exit status 2 and one line naming the program's file and what happened (``tests/test_bad_inputs.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bad_inputs_corpus import CASES, Built, Case, run_argv, write
from bad_inputs_files import PROGRAM_SCENARIO

HEAD = "#include <mpi.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
MAIN = "int main(int c, char **v) {\n  int r;\n  MPI_Init(&c, &v);\n  MPI_Comm_rank(MPI_COMM_WORLD, &r);\n"
END = "  MPI_Finalize();\n  return 0;\n}\n"


def _program(body: str, end: str = END) -> str:
    return HEAD + MAIN + body + end


#: id -> (source, words the one-line error must contain besides the file name)
PROGRAMS: dict[str, tuple[str, str]] = {
    "segfault": (_program('  printf("rank %d here\\n", r);\n  if (r == 1) { volatile int *p = NULL; *p = 1; }\n'
                          "  MPI_Barrier(MPI_COMM_WORLD);\n"), "segmentation fault"),
    "deadlock": (_program("  int x = 0;\n  MPI_Recv(&x, 1, MPI_INT, 1 - r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n"
                          "  MPI_Send(&x, 1, MPI_INT, 1 - r, 0, MPI_COMM_WORLD);\n"),
                 # line 9 of m.c is the MPI_Recv (HEAD: 3 lines, MAIN: 4, then "int x = 0;")
                 "rank 0 in MPI_Recv from rank 1 (m.c:9), rank 1 in MPI_Recv from rank 0 (m.c:9)"),
    "mpi-abort": (_program('  if (r == 1) { printf("input is bad\\n"); fflush(stdout); '
                           "MPI_Abort(MPI_COMM_WORLD, 3); }\n  MPI_Barrier(MPI_COMM_WORLD);\n"),
                  "rank 1 called MPI_Abort(MPI_COMM_WORLD, 3)"),
    "exit-before-finalize": (_program("  if (r == 0) exit(2);\n  MPI_Barrier(MPI_COMM_WORLD);\n"),
                             "rank 0 ended with exit status 2"),
    "return-nonzero": (_program("", "  MPI_Finalize();\n  return 1;\n}\n"), "exit status 1"),
    "prints-gigabytes": (_program('  char line[1024];\n  for (int i = 0; i < 1023; i++) line[i] = \'x\';\n'
                                  "  line[1023] = 0;\n  for (;;) puts(line);\n"), "printed more than 64 MiB"),
    "region-never-left": ('#include "waitlab.h"\n' + _program('  if (r == 1) WAITLAB_REGION_BEGIN("solve");\n'
                                                                "  MPI_Barrier(MPI_COMM_WORLD);\n"),
                          'region "solve" is entered and never left'),
    "regions-crossed": ('#include "waitlab.h"\n' + _program('  WAITLAB_REGION_BEGIN("a");\n'
                                                              '  WAITLAB_REGION_BEGIN("b");\n'
                                                              '  WAITLAB_REGION_END("a");\n'
                                                              '  WAITLAB_REGION_END("b");\n'),
                        'WAITLAB_REGION_END("a") closes region "b": regions must nest'),
    "region-end-without-begin": ('#include "waitlab.h"\n' + _program('  WAITLAB_REGION_END("solve");\n'),
                                 'WAITLAB_REGION_END("solve") without a WAITLAB_REGION_BEGIN("solve") before it'),
    "not-utf8-then-crash": (_program('  if (r == 0) { fwrite("\\xff\\xfe\\xc3(\\n", 1, 5, stdout); fflush(stdout); }\n'
                                     "  if (r == 0) { volatile int *p = NULL; *p = 1; }\n"
                                     "  MPI_Barrier(MPI_COMM_WORLD);\n"), "segmentation fault"),
}


def _case(source: str, words: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        write(d / "m.c", source)
        return run_argv(d, write(d / "s.toml", PROGRAM_SCENARIO)), "m.c", words
    return build


for _id, (_source, _words) in PROGRAMS.items():
    CASES.append(Case("program", f"program-runs-{_id}", _case(_source, _words)))
