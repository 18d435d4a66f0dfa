"""The lab served on 127.0.0.1 and Debian's Chromium: shared by the browser tests and the browser
benchmarks (never `playwright install`: the browser is the system's)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("KVLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
# Streamlit marks the app root with the state of the script run: the view is complete when it is
# not running any more.
DONE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# a table or chart on view: one in a folded expander or an unopened tab is in the page but not on view
VISUAL = ('[data-testid="stTable"], [data-testid="stDataFrame"], .js-plotly-plot, [data-testid="stPlotlyChart"]'
          ' >> visible=true')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float, what: str, log_path: Path) -> None:
    """Until `url`/_stcore/health answers 200; RuntimeError when the process exits first, TimeoutError when the
    time runs out (the caller stops the process)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                return
        except OSError:
            time.sleep(0.3)
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}; see {log_path}")
    raise TimeoutError(what)


class AppServer:
    """`streamlit run app/main.py` on a free loopback port, stopped on exit."""

    def __init__(self, log_path: Path, env: dict[str, str] | None = None, script: Path | None = None, *,
                 as_readme: bool = False, net_log: Path | None = None) -> None:
        """`as_readme`: started as the README's command starts it, with no flags but the port (given in the
        environment), so the repository's .streamlit/config.toml alone decides the rest. `net_log`: every
        outside lookup or connection the server's process attempts is written there (benchmarks/netaudit.py)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", STREAMLIT_SERVER_HEADLESS="true",
                        **(env or {}))
        self.script = script or ROOT / "app" / "main.py"
        self.as_readme, self.net_log = as_readme, net_log
        if as_readme:  # what a user's shell would not have set
            for name in ("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "STREAMLIT_SERVER_HEADLESS"):
                self.env.pop(name)
            self.env["STREAMLIT_SERVER_PORT"] = str(self.port)
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        flags = [] if self.as_readme else [
            "--server.address", "127.0.0.1", "--server.port", str(self.port), "--server.headless", "true",
            "--browser.gatherUsageStats", "false"]
        run = ["streamlit", "run", str(self.script), *flags]
        if self.net_log is None:
            return [sys.executable, "-m", *run]
        self.net_log.parent.mkdir(parents=True, exist_ok=True)
        self.net_log.write_text("")
        return [sys.executable, "-m", "benchmarks.netaudit", str(self.net_log), "--", *run]

    def start(self, timeout_s: float = 90) -> AppServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        try:
            wait_healthy(self.proc, self.url, timeout_s, "streamlit", self.log_path)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"streamlit did not become healthy within {timeout_s:.0f} s") from None
        return self

    def peak_rss_mb(self) -> float:
        """The server's peak resident memory so far (VmHWM), in MiB."""
        if self.proc is None:
            return 0.0
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self) -> float:
        """CPU seconds the server has used so far (user + system)."""
        if self.proc is None:
            return 0.0
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
