"""Headless Chromium (Debian's ``chromium``, installed by scripts/bootstrap.sh) driven over the DevTools
protocol (``websocket-client``) for the report tests and benchmarks.

:func:`load` opens ``file://PATH`` with the network off, waits until the page says its timeline is ready
(``<body data-timeline="ready">``), and returns the console messages and uncaught exceptions, the time the
page took (``performance.now()`` at ready: parse, scripts, first drawing), a value of the page and
optionally a full-page screenshot.  The flags are those the machine notes ask for (no sandbox as root, no
GPU, no background networking); ``--host-resolver-rules`` and a proxy on a closed port make every network
request fail, and failed requests are reported too.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]


@dataclass
class Page:
    console: list[str] = field(default_factory=list)  # console calls, uncaught exceptions, log errors
    failed_requests: list[str] = field(default_factory=list)
    ready_ms: float = float("nan")  # performance.now() when the timeline was ready
    wall_seconds: float = float("nan")  # navigation to ready, measured outside the page
    values: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # Performance.getMetrics: TaskDuration, ScriptDuration


class _Cdp:
    def __init__(self, url: str) -> None:
        self.ws = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.n = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self.events.append(msg)

    def evaluate(self, expr: str) -> Any:
        return self.call("Runtime.evaluate", expression=expr, returnByValue=True).get("result", {}).get("value")


def load(path: Path, *, screenshot: Path | None = None, width: int = 1280, timeout: float = 60.0,
         values: dict[str, str] | None = None) -> Page:
    """Open ``path`` in headless Chromium; see the module docstring.  ``values``: name -> JS expression."""
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (scripts/bootstrap.sh installs Debian's chromium)")
    page = Page()
    # Chromium's helper processes may still write into the profile as it exits: clean up without failing
    with tempfile.TemporaryDirectory(prefix="waitlab-chromium-", ignore_cleanup_errors=True) as prof:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={prof}", f"--window-size={width},1000",
                                 "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            browser_ws = ""
            assert proc.stderr is not None
            deadline = time.monotonic() + timeout
            while not browser_ws and time.monotonic() < deadline:
                line = proc.stderr.readline()
                m = re.search(r"DevTools listening on (ws://\S+)", line)
                browser_ws = m.group(1) if m else browser_ws
                if not line and proc.poll() is not None:
                    raise RuntimeError("chromium exited before its DevTools endpoint was up")
            cdp = _Cdp(browser_ws)
            target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
            session = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            tab = _Session(cdp, session)
            for domain in ("Runtime", "Page", "Log", "Network", "Performance"):
                tab.call(f"{domain}.enable")
            t0 = time.perf_counter()
            tab.call("Page.navigate", url=Path(path).resolve().as_uri())
            while time.perf_counter() - t0 < timeout:
                if tab.evaluate("document.body && document.body.dataset.timeline") == "ready":
                    break
                time.sleep(0.05)
            page.wall_seconds = time.perf_counter() - t0
            page.ready_ms = float(tab.evaluate("Number(document.body.dataset.readyMs)") or float("nan"))
            page.values = {k: tab.evaluate(v) for k, v in (values or {}).items()}
            page.metrics = {m["name"]: float(m["value"]) for m in tab.call("Performance.getMetrics")["metrics"]}
            if screenshot is not None:
                h = int(tab.evaluate("document.documentElement.scrollHeight") or 1000)
                tab.call("Emulation.setDeviceMetricsOverride", width=width, height=h, deviceScaleFactor=1,
                         mobile=False)
                time.sleep(0.5)  # Plotly's responsive resize
                shot = tab.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            tab.evaluate("0")  # flush pending events
            for ev in cdp.events:
                m, p = ev.get("method", ""), ev.get("params", {})
                if m == "Runtime.consoleAPICalled":
                    page.console.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get(
                        "description", ""))) for a in p.get("args", [])))
                elif m == "Runtime.exceptionThrown":
                    d = p["exceptionDetails"]
                    page.console.append(f"exception: {d.get('exception', {}).get('description', d.get('text'))}")
                elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                    page.console.append(f"log {p['entry']['level']}: {p['entry']['text']}")
                elif m == "Network.loadingFailed":
                    page.failed_requests.append(str(p.get("errorText")))
                elif m == "Network.requestWillBeSent" and not p["request"]["url"].startswith(("file:", "data:",
                                                                                               "blob:", "about:")):
                    page.failed_requests.append(p["request"]["url"])
            cdp.ws.close()
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            time.sleep(0.3)
            shutil.rmtree(prof, ignore_errors=True)
    return page


class _Session:
    """Calls into one attached target (flat session mode)."""

    def __init__(self, cdp: _Cdp, session: str) -> None:
        self.cdp, self.session = cdp, session

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        c = self.cdp
        c.n += 1
        c.ws.send(json.dumps({"id": c.n, "method": method, "params": params, "sessionId": self.session}))
        while True:
            msg = json.loads(c.ws.recv())
            if msg.get("id") == c.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            c.events.append(msg)

    def evaluate(self, expr: str) -> Any:
        return self.call("Runtime.evaluate", expression=expr, returnByValue=True).get("result", {}).get("value")
