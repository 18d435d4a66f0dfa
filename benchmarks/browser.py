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


def listening_sockets(port: int) -> set[str]:
    """The kernel's names (`socket:[inode]`) of the TCP sockets listening on `port`, IPv4 and IPv6 (Linux /proc)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()  # sl local_address rem_address st ... inode
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.add(f"socket:[{cols[9]}]")
    return found


def holds_port(pid: int, port: int) -> bool:
    """Whether process `pid` itself listens on `port`: a server started on a port that another process took
    between free_port() and the bind exits, and the other process answers its health checks (on a machine
    running tests in parallel, another test's server)."""
    if not Path("/proc/net/tcp").exists():  # not Linux: nothing to check with
        return True
    mine = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            mine.add(os.readlink(fd))
        except OSError:
            continue
    return bool(mine & listening_sockets(port))


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
        self.log_path = log_path
        self.env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", STREAMLIT_SERVER_HEADLESS="true",
                        **(env or {}))
        self.script = script or ROOT / "app" / "main.py"
        self.as_readme, self.net_log = as_readme, net_log
        if as_readme:  # what a user's shell would not have set
            for name in ("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "STREAMLIT_SERVER_HEADLESS"):
                self.env.pop(name)
        self.proc: subprocess.Popen | None = None
        self.use_port(free_port())

    def use_port(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        if self.as_readme:
            self.env["STREAMLIT_SERVER_PORT"] = str(port)

    def launch_env(self) -> dict[str, str]:
        return self.env

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

    def name(self) -> str:
        return "streamlit"

    def start(self, timeout_s: float = 90, tries: int = 3) -> AppServer:
        """Start the server and wait until it answers its health check from its own process. A port another
        process took meanwhile (our server then exits, or the other one answers for it) is given up for a new one,
        at most `tries` times in all."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, tries + 1):
            self._log = open(self.log_path, "w" if attempt == 1 else "a")  # an earlier try's log kept
            self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=self.launch_env(), stdout=self._log,
                                         stderr=subprocess.STDOUT)
            try:
                wait_healthy(self.proc, self.url, timeout_s, self.name(), self.log_path)
            except TimeoutError:
                self.stop()
                raise RuntimeError(f"{self.name()} did not become healthy within {timeout_s:.0f} s") from None
            except RuntimeError:  # it exited: a port taken by another process is retried, anything else is not
                taken = bool(listening_sockets(self.port))
                self.stop()
                if not taken or attempt == tries:
                    raise
                self.use_port(free_port())
                continue
            if holds_port(self.proc.pid, self.port):
                return self
            self.stop()
            if attempt < tries:
                self.use_port(free_port())
        raise RuntimeError(f"{self.name()}: another process took its port {tries} times in a row")

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
