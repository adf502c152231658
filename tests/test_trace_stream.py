"""The shared trace streamed into SMPI through a FIFO (simulator/trace_stream.py): every byte arrives in order,
and a reader that ends, breaks the pipe or stalls past the time limit never leaves waitlab waiting."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SPEED, star_platform

from waitlab.errors import InputError, SimulationError
from waitlab.models.ops import OpBuilder
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.trace import stream_trace, write_trace
from waitlab.simulator.trace_stream import TraceStream, feed


def _stream(tmp_path: Path, chunks: Iterator[str]) -> TraceStream:
    fifo = tmp_path / "trace.txt"
    os.mkfifo(fifo)
    return TraceStream(tmp_path / "index.txt", fifo, chunks)


def _reader(script: str, fifo: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sh", "-c", script, "sh", str(fifo)])


def test_every_chunk_arrives_in_order_through_a_slow_reader(tmp_path: Path):
    chunks = [f"{i} " + "x" * (300_000 + i) + "\n" for i in range(12)]  # 3.6 MB: more than a pipe holds
    s = _stream(tmp_path, iter(chunks))
    out = tmp_path / "out"
    proc = _reader(f'sleep 0.3; cat "$1" > {out}', s.fifo)
    calls = []
    feed(s, lambda: proc.poll() is None, time.perf_counter() + 60, lambda: calls.append(1), tick=0.05)
    assert proc.wait(timeout=60) == 0
    assert out.read_text() == "".join(chunks)
    assert len(calls) >= 2  # called while the reader had not opened the pipe yet (0.3 s, ticks of 0.05 s)
    assert s.seconds >= 0


def test_a_reader_that_never_opens_the_pipe_ends_the_feed(tmp_path: Path):
    s = _stream(tmp_path, iter(["a\n"] * 10))
    proc = _reader("exit 3", s.fifo)
    t = time.perf_counter()
    feed(s, lambda: proc.poll() is None, None)
    assert time.perf_counter() - t < 10 and proc.wait() == 3


def test_a_reader_that_stops_reading_breaks_the_pipe_without_an_error(tmp_path: Path):
    s = _stream(tmp_path, iter(["y" * 1_000_000 + "\n"] * 8))
    proc = _reader('head -c 1000 "$1" > /dev/null', s.fifo)
    feed(s, lambda: proc.poll() is None, time.perf_counter() + 60)
    assert proc.wait(timeout=60) == 0


def test_a_stalled_reader_is_left_at_the_time_limit(tmp_path: Path):
    s = _stream(tmp_path, iter(["z" * 1_000_000 + "\n"] * 8))
    proc = _reader('exec 3< "$1"; sleep 60', s.fifo)  # opens the pipe, never reads it
    try:
        t = time.perf_counter()
        feed(s, lambda: proc.poll() is None, t + 0.5, tick=0.05)
        assert 0.4 < time.perf_counter() - t < 10
    finally:
        proc.kill()
        proc.wait()


def test_an_error_formatting_the_trace_is_raised(tmp_path: Path):
    def chunks() -> Iterator[str]:
        yield "0 init\n"
        raise InputError("scenario", "operation x", "cannot be written", "fix it")

    s = _stream(tmp_path, chunks())
    proc = _reader('cat "$1" > /dev/null', s.fifo)
    with pytest.raises(InputError, match="cannot be written"):
        feed(s, lambda: proc.poll() is None, time.perf_counter() + 60)
    assert proc.wait(timeout=60) == 0  # the pipe was closed: the reader saw its end


def test_the_streamed_text_is_the_shared_file(tmp_path: Path):
    b = OpBuilder(3)
    b.add("compute", [0, 1, 2], value=[0.5, 0.25, 1e-7], region="a")
    b.add("send", 0, peer=1, value=8, tag=3)
    b.add("recv", 1, peer=0, value=8, tag=3)
    b.add("allreduce", [0, 1, 2], value=16, value2=4.0)
    b.add("barrier", [0, 1, 2])
    ops = b.build()
    index = write_trace(ops, SPEED, tmp_path / "file", shared=True)
    s = stream_trace(ops, SPEED, tmp_path / "fifo")
    assert s.fifo.is_fifo() and s.index.read_text() == f"{s.fifo.resolve()}\n"
    assert "".join(s.chunks) == (tmp_path / "file" / "trace.txt").read_text()
    assert index.read_text() == f"{(tmp_path / 'file' / 'trace.txt').resolve()}\n"


@pytest.mark.simgrid
def test_a_refused_setting_is_simgrids_message_not_a_wait_on_the_pipe(tmp_path: Path):
    xml, hostfile = star_platform(tmp_path, 2)
    b = OpBuilder(2)
    b.add("compute", [0, 1], value=0.001)
    t = time.perf_counter()
    with pytest.raises(SimulationError, match="smpi/nonsense"):
        replay_ops(b.build(), xml, hostfile, SPEED, config={"smpi/nonsense": "1"}, timeout=120, work=tmp_path / "w")
    assert time.perf_counter() - t < 60


@pytest.mark.simgrid
def test_an_operation_the_trace_cannot_hold_stops_smpi(tmp_path: Path):
    xml, hostfile = star_platform(tmp_path, 2)
    b = OpBuilder(2)
    b.add("compute", [0, 1], value=0.001)
    b.add("bcast", [0, 1], value=8, peer=-1)  # a rooted collective without its root
    with pytest.raises(InputError, match="without a root"):
        replay_ops(b.build(), xml, hostfile, SPEED, timeout=120, work=tmp_path / "w")
    assert not (tmp_path / "w" / "trace").exists()  # the FIFO lived in the replay's own temporary folder
