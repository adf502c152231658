"""Reaching an existing Dask scheduler: its address checked, a short connect timeout, one line for every mistake.

The address (``--scheduler``, ``[sweep] scheduler``) is checked before anything connects
(:func:`check_address`): ``tcp://`` or ``tls://`` or no scheme, a host and a port 1..65535; a web address
(``http://host:8787/status``, the dashboard's) is refused with the hint that the scheduler listens on 8786 by default
and its dashboard on 8787.  Then :func:`open_client` asks the address who it is, within :data:`CONNECT_TIMEOUT`
seconds, before Dask's client connects (:func:`probe`): nothing answering and a service that is no Dask scheduler
(a web server, the dashboard's port, a proxy answering ``HTTP/1.1 400``) are each one
:class:`SchedulerProblem`, exit status 2, instead of a traceback after 30 s, a silent hang or Dask reading an HTTP
reply as a frame length ("out of memory").

While the client is open, a scheduler without workers is said once on stderr after :data:`NO_WORKERS_AFTER`
seconds (the points wait for a worker to join: that is not an error), and Dask's own client-side log (its
reconnect tracebacks when the scheduler goes away) stays out of the terminal: the sweep says what happened in one
line.  Closing the client never waits longer than :data:`CLOSE_TIMEOUT` seconds.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from waitlab.errors import InputError

__all__ = ["CLOSE_TIMEOUT", "CONNECT_TIMEOUT", "NO_WORKERS_AFTER", "Address", "AddressError", "SchedulerProblem",
           "Verdict", "address_problem", "check_address", "close_client", "open_client", "parse_address", "probe",
           "worker_count"]

#: Seconds to reach a scheduler and hear it say it is one (Dask's own default is 30 s, retried).
CONNECT_TIMEOUT = 10.0
#: Seconds without a worker after which the sweep says that the scheduler has none (and goes on waiting).
NO_WORKERS_AFTER = 15.0
#: Seconds that closing the client may take (a scheduler that went away, a frozen worker: never waited for).
CLOSE_TIMEOUT = 5.0

#: The ports every address hint names: Dask's defaults.
PORTS = "the scheduler listens on 8786 by default, the dashboard on 8787"
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?")


class SchedulerProblem(InputError):
    """The scheduler address is malformed, nothing answers there, or what answers is no Dask scheduler (exit 2).

    ``address`` is the address as given, so the command line can name the option it came from
    (:meth:`named`).
    """

    def __init__(self, file: str, field: str, problem: str, fix: str = "", address: str = "") -> None:
        super().__init__(file, field, problem, fix)
        self.address = address

    def named(self, file: str, field: str) -> SchedulerProblem:
        """The same problem, said of another source and option (``(command line)``, ``--scheduler``)."""
        return SchedulerProblem(file, field, self.problem, self.fix, self.address)


class Address(NamedTuple):
    """A checked scheduler address: ``scheme://host:port`` (``host`` without IPv6 brackets)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


class AddressError(ValueError):
    """A scheduler address that is not one: ``problem`` (it starts with the address as given) and ``fix``."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem, fix)  # both in args: the error survives pickling (a Dask worker, a sandbox)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return self.problem


def address_problem(text: str) -> tuple[str, str] | None:
    """What is wrong with a scheduler address, and the fix; None when it is one.

    >>> address_problem("tcp://127.0.0.1:8786") is None, address_problem("host:8786") is None
    (True, True)
    >>> address_problem("notanaddress")[0]
    "'notanaddress' has no port"
    >>> address_problem("tcp://127.0.0.1:18787x")[0]
    "'tcp://127.0.0.1:18787x': the port '18787x' is not a number"
    """
    try:
        parse_address(text)
    except AddressError as exc:
        return exc.problem, exc.fix
    return None


def parse_address(text: str) -> Address:
    """The parts of a scheduler address: ``tcp://`` or ``tls://`` or no scheme (``tcp``), a host (an IPv6 one in
    brackets) and a port 1..65535 (:class:`AddressError` otherwise)."""
    def bad(problem: str, fix: str = "") -> AddressError:
        return AddressError(f"{text!r}{problem}", fix or f"give the Dask scheduler address, e.g. tcp://HOST:8786; "
                            f"{PORTS}")

    raw = text.strip()
    if not raw:
        raise bad(" is empty", "give the Dask scheduler address, e.g. tcp://HOST:8786, or leave the option out to "
                  "run on this machine")
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "tcp", raw
    scheme = scheme.lower()
    if scheme in ("http", "https", "ws", "wss"):
        host = rest.split("/", 1)[0].rsplit(":", 1)[0] or "HOST"
        raise bad(f" is a web address ({scheme}://): the Dask scheduler speaks its own protocol, not HTTP (an "
                  "address with :8787 or /status is the dashboard's)",
                  f"give the scheduler's address, e.g. tcp://{host}:8786; {PORTS}")
    if scheme not in ("tcp", "tls"):
        raise bad(f": unknown scheme {scheme + '://'!r}", f"write tcp://HOST:PORT or tls://HOST:PORT; {PORTS}")
    if "/" in rest or "?" in rest or "#" in rest:
        raise bad(" has a path after the port", f"write only {scheme}://HOST:PORT; {PORTS}")
    if rest.startswith("["):  # [IPv6]:port
        host, bracket, port_text = rest[1:].partition("]")
        if not bracket or not port_text.startswith(":"):
            raise bad(" has no port" if bracket else ": an IPv6 host needs its closing ]",
                      f"write {scheme}://[IPV6]:8786; {PORTS}")
        port_text = port_text[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f": {host!r} is not an IPv6 address") from None
    else:
        host, colon, port_text = rest.rpartition(":")
        if not colon:
            raise bad(" has no port", f"write {scheme}://{rest or 'HOST'}:8786; {PORTS}")
        if not host:
            raise bad(" has no host", f"write {scheme}://HOST:{port_text or 8786}; {PORTS}")
        if ":" in host:
            raise bad(": an IPv6 host must be in brackets", f"write {scheme}://[{host}]:{port_text}")
        if not _HOST.fullmatch(host):
            raise bad(f": {host!r} is not a host name or IP address")
    if not port_text.isdigit() or not port_text.isascii():
        raise bad(f": the port {port_text!r} is not a number" if port_text else " has no port",
                  f"write {scheme}://{host}:8786; {PORTS}")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise bad(f": the port {port} is not in 1..65535")
    return Address(scheme, host, port)


def check_address(text: str, source: str, field: str) -> Address:
    """The checked address, or a :class:`SchedulerProblem` naming ``source`` and ``field``."""
    try:
        return parse_address(text)
    except AddressError as exc:
        raise SchedulerProblem(source, field, exc.problem, exc.fix, text) from None


# -- asking the address who it is ---------------------------------------------------------------------------------

class Verdict(NamedTuple):
    """What :func:`probe` found at an address: ``kind`` is ``scheduler``, ``silent`` (nothing answered),
    ``unknown-host``, ``tls-config`` (``tls://`` without TLS settings) or ``other`` (a service that is no Dask
    scheduler); ``detail`` says more; ``workers`` is the scheduler's worker count."""

    kind: str
    detail: str = ""
    workers: int = 0


def probe(address: str, timeout: float = CONNECT_TIMEOUT) -> Verdict:
    """Connect to ``address`` and ask it who it is (Dask's handshake, then ``identity``), all within ``timeout``
    seconds.  Runs in a thread of its own with its own event loop, so it works from a notebook as well."""
    import asyncio  # here: 24 ms on the start of every command (this module is on the CLI's path)

    result: list[Verdict] = []

    def run() -> None:
        try:
            result.append(asyncio.run(_probe(address, timeout)))
        except BaseException as exc:  # anything here is "not a scheduler", said in one line
            result.append(Verdict("other", _said(exc)))

    t = threading.Thread(target=run, name="waitlab-dask-probe", daemon=True)
    t.start()
    t.join(timeout + 2.0)
    return result[0] if result else Verdict("other", f"it did not answer Dask's handshake within {timeout:g} s")


async def _probe(address: str, timeout: float) -> Verdict:
    import asyncio

    from distributed.comm.addressing import parse_address as dask_parse
    from distributed.comm.registry import get_backend
    from distributed.security import Security

    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    scheme, loc = dask_parse(address)
    connector = get_backend(scheme).get_connector()
    args = Security().get_connection_args("client")
    comm: Any = None
    last: BaseException | None = None
    pause = 0.05
    while comm is None:  # the connection itself: retried until the deadline (a scheduler may be starting)
        if left() <= 0:
            return Verdict("silent", _why_silent(last))
        try:
            comm = await asyncio.wait_for(connector.connect(loc, deserialize=True, **args), left())
        except (TypeError, ValueError) as exc:  # tls:// without Dask's TLS settings (no ssl_context), say
            return Verdict("tls-config", _said(exc))
        except (TimeoutError, OSError) as exc:
            if _unknown_host(exc):
                return Verdict("unknown-host", _said(exc))
            if type(exc).__name__ == "FatalCommClosedError":  # a TLS handshake that failed: not retried
                return Verdict("other", _said(exc.__cause__ or exc))
            last = exc
            await asyncio.sleep(min(pause, left()))
            pause = min(pause * 2, 1.0)
    try:  # something accepted the connection: is it a Dask scheduler?
        mine = comm.handshake_info()
        await asyncio.wait_for(comm.write(mine), left())
        theirs = await asyncio.wait_for(comm.read(), left())
        if not isinstance(theirs, dict) or "pickle-protocol" not in theirs:
            return Verdict("other", "its answer is not Dask's handshake")
        comm.local_info = {**mine, "address": comm.local_address}
        comm.remote_info = {**theirs, "address": comm.peer_address}
        comm.handshake_options = comm.handshake_configuration(comm.local_info, comm.remote_info)
        await asyncio.wait_for(comm.write({"op": "identity", "reply": True, "n_workers": 0}), left())
        identity = await asyncio.wait_for(comm.read(), left())
    except TimeoutError:
        return Verdict("other", f"it accepted the connection but did not answer Dask's handshake within "
                       f"{timeout:g} s: a web server, or the scheduler's dashboard?")
    except MemoryError:  # an HTTP reply's first bytes read as the length of a Dask message
        return Verdict("other", "it answered, but not in Dask's protocol: a web server or a proxy?")
    except Exception as exc:
        return Verdict("other", f"it answered, but not in Dask's protocol ({_said(exc)})")
    finally:
        comm.abort()
    kind = identity.get("type") if isinstance(identity, dict) else None
    if kind != "Scheduler":
        return Verdict("other", f"it is a Dask {kind.lower()}, not the scheduler" if isinstance(kind, str) else
                       "it did not say what it is")
    workers = identity.get("n_workers", len(identity.get("workers") or ()))
    return Verdict("scheduler", workers=workers if isinstance(workers, int) else 0)


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (a few)."""
    for _ in range(6):
        if exc is None:
            return
        yield exc
        exc = exc.__cause__ or exc.__context__


def _unknown_host(exc: BaseException) -> bool:
    return any(isinstance(e, socket.gaierror) for e in _chain(exc))


def _why_silent(exc: BaseException | None) -> str:
    """Why a connection could not be made, in a few words."""
    if any(isinstance(e, ConnectionRefusedError) for e in _chain(exc)):
        return "the connection was refused: nothing listens on that port"
    if exc is None or any(isinstance(e, TimeoutError) for e in _chain(exc)):
        return "no reply: the host is down or a firewall drops the connection"
    return _said(exc)


def _said(exc: BaseException) -> str:
    """An exception's type and first line, short."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 160 else text[:160] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def refusal(verdict: Verdict, address: str, timeout: float, source: str, field: str) -> SchedulerProblem:
    """The one-line error for an address where no Dask scheduler answered."""
    start = f"start `dask scheduler` there, or check the host and port: {PORTS}"
    if verdict.kind == "silent":
        return SchedulerProblem(source, field, f"no Dask scheduler answered at {address} within {timeout:g} s"
                                + (f": {verdict.detail}" if verdict.detail else ""), start, address)
    if verdict.kind == "tls-config":
        return SchedulerProblem(source, field, f"{address} needs Dask's TLS settings, and there are none "
                                f"({verdict.detail})", "set distributed.comm.tls.ca-file, .client.cert and "
                                ".client.key in the Dask configuration (as the scheduler's), or use tcp://", address)
    if verdict.kind == "unknown-host":
        return SchedulerProblem(source, field, f"the host of {address} is not known ({verdict.detail})",
                                f"check the host name; {PORTS}", address)
    return SchedulerProblem(source, field, f"the service at {address} is not a Dask scheduler ({verdict.detail})",
                            f"give the scheduler's address: {PORTS}", address)


# -- the client -----------------------------------------------------------------------------------------------------

@contextmanager
def quiet_distributed() -> Iterator[None]:
    """Dask's client-side loggers off while the block runs (their reconnect tracebacks: the sweep says it in one
    line); their levels are restored afterwards."""
    names = ["distributed", *(n for n in list(logging.root.manager.loggerDict) if n.startswith("distributed."))]
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


def _say_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def open_client(address: str, source: str, field: str = "scheduler", *, timeout: float | None = None,
                warn: Callable[[str], None] = _say_stderr) -> Iterator[Any]:
    """A ``distributed.Client`` of the scheduler at ``address``, checked and reached within ``timeout`` seconds
    (default :data:`CONNECT_TIMEOUT`), closed within :data:`CLOSE_TIMEOUT` seconds afterwards.

    Errors are :class:`SchedulerProblem` naming ``source`` and ``field``.  ``warn`` receives the one line said
    when the scheduler has had no workers for :data:`NO_WORKERS_AFTER` seconds.
    """
    wait = CONNECT_TIMEOUT if timeout is None else timeout
    check_address(address, source, field)
    verdict = probe(address, wait)
    if verdict.kind != "scheduler":
        raise refusal(verdict, address, wait, source, field)
    from dask.distributed import Client

    with quiet_distributed():
        try:
            client = Client(address, timeout=wait, set_as_default=False)
        except (OSError, TimeoutError) as exc:  # it answered the probe a moment ago: gone since
            raise refusal(Verdict("silent", _said(exc)), address, wait, source, field) from None
        stop = threading.Event()
        watcher = threading.Thread(target=_watch_workers, args=(client, address, stop, warn),
                                   name="waitlab-dask-workers", daemon=True)
        watcher.start()
        try:
            yield client
        finally:
            stop.set()
            watcher.join(1.0)  # it wakes on the event: gone with the command
            close_client(client)


def close_client(client: Any, timeout: float | None = None) -> None:
    """Close ``client`` without waiting longer than ``timeout`` seconds (default :data:`CLOSE_TIMEOUT`) for a
    scheduler that went away or does not answer; nothing is raised."""
    try:
        client.close(timeout=CLOSE_TIMEOUT if timeout is None else timeout)
    except Exception:  # the scheduler ends the client's work when its connection drops
        pass


def worker_count(client: Any) -> int | None:
    """How many workers the client's scheduler has (None: it cannot be asked now)."""
    try:
        info = client.scheduler_info(n_workers=0)
    except Exception:  # closed, lost: nothing to say
        return None
    n = info.get("n_workers") if isinstance(info, dict) else None
    if isinstance(n, int):
        return n
    workers = info.get("workers") if isinstance(info, dict) else None
    return len(workers) if isinstance(workers, dict) else None


def _watch_workers(client: Any, address: str, stop: threading.Event, warn: Callable[[str], None]) -> None:
    """Say once, per stretch of :data:`NO_WORKERS_AFTER` seconds without workers, that the scheduler has none."""
    since: float | None = time.monotonic()  # no worker seen since
    warned = False
    ever = False
    while not stop.wait(min(1.0, NO_WORKERS_AFTER / 4)):
        n = worker_count(client)
        if stop.is_set() or n is None:
            continue
        if n > 0:
            since, warned, ever = None, False, True
            continue
        since = since if since is not None else time.monotonic()
        if not warned and time.monotonic() - since >= NO_WORKERS_AFTER:
            warned = True
            none = (f"has had no workers for {NO_WORKERS_AFTER:g} s" if ever else
                    f"has no workers yet, {NO_WORKERS_AFTER:g} s after connecting")
            warn(f"waitlab: warning: the Dask scheduler {address} {none}: nothing runs until one joins; waiting "
                 f"(fix: start one with `dask worker {address}` on a machine with waitlab installed and the output "
                 "folder shared; Ctrl-C stops)")
