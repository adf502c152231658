"""A program run's outputs and failure messages (round 21): the stock re-run ships the program's input files, the
files it wrote are kept by size and not by name, a compile error names the user's file, a program without
``MPI_Finalize`` is told so in one sentence, and ``output.txt`` is cut at line ends."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from waitlab import api
from waitlab.errors import InputError
from waitlab.experiments import programs
from waitlab.experiments.results import bounded_output
from waitlab.simulator.program_run import RERUN_CWD, explain_failure, rerun_files
from waitlab.simulator.programs import _failing_file, build_program

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None

#: Reads the file named by its first argument (a number per rank) and writes what it read into ``out.txt``; aborts
#: with status 4 when the file is missing.
READER = r"""#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  FILE* f = argc > 1 ? fopen(argv[1], "r") : NULL;
  if (!f) { fprintf(stderr, "cannot open the input\n"); MPI_Abort(MPI_COMM_WORLD, 4); }
  double d[4] = {0}; int n = 0; while (n < 4 && fscanf(f, "%lf", &d[n]) == 1) n++;
  fclose(f);
  smpi_execute_benched(d[rank % 4]);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) { FILE* o = fopen("out.txt", "w"); fprintf(o, "n=%d\n", n); fclose(o); }
  MPI_Finalize();
  return 0;
}
"""


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
@pytest.mark.parametrize("name", ["data.txt", "hostfile"])  # "hostfile" is also a file of the re-run folder
def test_the_stock_rerun_of_a_program_that_reads_an_input_file_finds_it(tmp_path: Path, name: str) -> None:
    (tmp_path / "prog.c").write_text(READER)
    (tmp_path / name).write_text("0.1 0.2 0.3 0.4\n")
    (tmp_path / "s.toml").write_text(f'[scenario]\nname = "input"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                     f'[application]\nkind = "program"\nsources = ["prog.c"]\ninputs = ["{name}"]\n'
                                     f'args = ["{name}"]\n')
    api.run(tmp_path / "s.toml", tmp_path / "out")
    moved = shutil.copytree(tmp_path / "out" / "program" / "rerun", tmp_path / "elsewhere")
    cwd = moved / RERUN_CWD if name == "hostfile" else moved
    assert (cwd / name).read_text() == "0.1 0.2 0.3 0.4\n"
    out = subprocess.run(["sh", str(moved / "smpirun.sh")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (cwd / "out.txt").read_text() == "n=4\n"  # the program ran in its working folder and read its input


def test_rerun_files_put_inputs_in_the_working_folder_and_the_subfolder_on_a_name_clash(tmp_path: Path) -> None:
    for f in ("platform.xml", "hostfile", "program", "data.txt"):
        (tmp_path / f).write_text(f)
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "data.txt").write_text("input")
    (inp / "program").write_text("an input named program")
    cmd = ["/usr/bin/smpirun", "-np", "2", "-platform", str(tmp_path / "platform.xml"), "-hostfile",
           str(tmp_path / "hostfile"), str(tmp_path / "program"), "data.txt"]
    plain = rerun_files(cmd, tmp_path / "program", tmp_path / "platform.xml", tmp_path / "hostfile", {}, None,
                        [inp / "data.txt"])
    assert plain["data.txt"] == b"input" and plain["program"] == b"program"
    script = plain["smpirun.sh"].decode()
    assert 'cd "$(dirname "$0")" || exit 1' in script
    assert "-platform platform.xml -hostfile hostfile ./program data.txt" in script
    clash = rerun_files(cmd, tmp_path / "program", tmp_path / "platform.xml", tmp_path / "hostfile",
                        {"WAITLAB_SCHEDULE": "x"}, None, [inp / "data.txt", inp / "program"])
    assert clash["program"] == b"program" and clash[f"{RERUN_CWD}/program"] == b"an input named program"
    assert clash[f"{RERUN_CWD}/data.txt"] == b"input" and "data.txt" not in clash
    script = clash["smpirun.sh"].decode()
    assert f'cd "$(dirname "$0")/{RERUN_CWD}" || exit 1' in script
    assert "-platform ../platform.xml -hostfile ../hostfile ../program data.txt" in script
    assert 'export WAITLAB_SCHEDULE="$(pwd)/../schedule"' in script


def test_a_file_not_kept_uses_none_of_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(programs, "MAX_KEPT_BYTES", 100)
    (tmp_path / "a.txt").write_bytes(b"a" * 60)
    (tmp_path / "big.bin").write_bytes(b"\0" * 500)
    (tmp_path / "c.bin").write_bytes(b"c" * 50)  # 60 + 50 > 100: not kept
    (tmp_path / "small.txt").write_bytes(b"hi\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "z.txt").write_bytes(b"z" * 37)  # 60 + 3 + 37 = 100: kept
    kept = programs.written_files(tmp_path, [])
    assert list(kept) == ["a.txt", "big.bin", "c.bin", "small.txt", "sub/z.txt"]  # name order
    assert kept["small.txt"] == b"hi\n" and kept["sub/z.txt"] == b"z" * 37 and kept["a.txt"] == b"a" * 60
    assert kept["big.bin"].startswith(b"not kept: 500 bytes") and kept["c.bin"].startswith(b"not kept: 50 bytes")
    assert programs.written_files(tmp_path, []) == kept  # deterministic


#: GCC 13's output for a user header that ends in an unfinished declaration (``int broken(``), included on line 1
#: of m.c before <mpi.h> on line 2: every error is in SimGrid's headers.
SYSTEM_HEADER_ERRORS = """In file included from /usr/include/smpi/smpi.h:9,
                 from /usr/include/smpi/mpi.h:12,
                 from {d}/m.c:2:
/usr/include/simgrid/forward.h:244:26: error: storage class specified for parameter 's4u_Actor'
  244 | typedef struct s4u_Actor s4u_Actor;
      |                          ^~~~~~~~~
/usr/include/simgrid/forward.h:245:28: error: storage class specified for parameter 's4u_Barrier'
"""


def test_a_compile_error_in_a_system_header_names_the_users_file_that_included_it(tmp_path: Path) -> None:
    src = tmp_path / "m.c"
    where, hint = _failing_file(SYSTEM_HEADER_ERRORS.format(d=tmp_path), src)
    assert where == str(src)
    assert "/usr/include/simgrid/forward.h" in hint and "line 2 of m.c" in hint
    # an error in one of the user's headers names that header, even after errors in system headers
    (tmp_path / "inc").mkdir()
    later = (SYSTEM_HEADER_ERRORS + "In file included from {d}/m.c:3:\n{d}/inc/w.h:4:1: error: expected ';'\n"
             ).format(d=tmp_path)
    assert _failing_file(later, src, [f"-I{tmp_path / 'inc'}"]) == (f"{tmp_path}/inc/w.h", "")


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_a_syntax_error_in_a_user_header_is_reported_at_the_users_file(tmp_path: Path) -> None:
    (tmp_path / "bad.h").write_text("int broken(\n")
    (tmp_path / "m.c").write_text('#include "bad.h"\n#include <mpi.h>\n'
                                  "int main(int c, char** v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n")
    with pytest.raises(InputError) as err:
        build_program([tmp_path / "m.c"])
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'm.c'}: (compile): smpicc could not compile m.c: "), text
    assert "line 2 of m.c" in text


def test_a_program_without_mpi_finalize_is_told_in_one_sentence() -> None:
    err = explain_failure("", 0, " (ranks 0, 1, 2, 3 did not reach MPI_Finalize)", "m.c")
    assert str(err) == ("m.c: (run): ranks 0, 1, 2, 3 ended without calling MPI_Finalize (fix: call MPI_Finalize on "
                        "every rank before main returns or the program exits)")
    one = explain_failure("hello\n", 0, " (rank 1 did not reach MPI_Finalize)", "m.c")
    assert str(one).startswith("m.c: (run): rank 1 ended without calling MPI_Finalize; "
                               "the program's last output line: 'hello'")


def test_the_kept_output_is_cut_at_line_ends() -> None:
    lines = [f"line {i:05d} " + "x" * (i % 37) for i in range(5000)]
    text = "\n".join(lines) + "\n"
    out = bounded_output(text, 10_000)
    kept = out.splitlines()
    marker = [ln for ln in kept if ln.startswith("[waitlab: ")]
    assert len(marker) == 1
    assert all(ln in lines for ln in kept if ln not in marker)  # every other line is whole
    i = kept.index(marker[0])
    assert kept[:i] == lines[:i] and kept[i + 1:] == lines[len(lines) - (len(kept) - i - 1):]
    head, tail = "\n".join(kept[:i]) + "\n", "\n".join(kept[i + 1:]) + "\n"
    assert marker[0] == (f"[waitlab: {len(text) - len(head) - len(tail)} characters of the program's output left out "
                         f"here (output.txt keeps {len(head) + len(tail)})]")
    assert len(head) <= 5000 and len(tail) <= 5000
    assert bounded_output(text, 10_000) == out


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_a_flag_the_compiler_refuses_is_named_as_a_flag_not_as_the_program(tmp_path: Path) -> None:
    (tmp_path / "m.c").write_text("#include <mpi.h>\n"
                                  "int main(int c, char** v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n")
    with pytest.raises(InputError) as err:
        build_program([tmp_path / "m.c"], compile_flags=["-fno-such-flag-xyz"], origin="s.toml")
    text = str(err.value)
    assert text.startswith("s.toml: application.compile_flags: smpicc refused a flag: "), text
    assert "-fno-such-flag-xyz" in text
    assert f"(all messages: smpicc -fno-such-flag-xyz -c {tmp_path / 'm.c'})" in text  # the command that shows it


@pytest.mark.simgrid
@pytest.mark.skipif(shutil.which("smpif90") is None, reason="SimGrid's smpif90 is not installed")
def test_a_fortran_error_names_the_source_not_the_copy_smpif90_compiled(tmp_path: Path) -> None:
    src = tmp_path / "f.f90"
    src.write_text("program f\n  use mpi\n  integer :: x, ierr\n  call MPI_Init(ierr)\n  x = = 3\n"
                   "  call MPI_Finalize(ierr)\nend program f\n")
    with pytest.raises(InputError) as err:
        build_program([src])
    text = str(err.value)
    assert text.startswith(f"{src}: (compile): smpif90 could not compile f.f90: {src}:5:"), text
    assert f"{src}_" not in text
