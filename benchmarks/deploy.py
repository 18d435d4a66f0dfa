"""Replicas of the lab behind HAProxy, driven by Chromium: sessions spread over replicas, one replica killed.

    python -m benchmarks.deploy [--replicas 3] [--sessions 10]

Starts `--replicas` replicas with deploy/start.sh (what the image runs) and the load balancer with
deploy/lb-start.sh on the shipped deploy/haproxy.cfg, all on loopback ports chosen free, then opens `--sessions`
Chromium sessions through the load balancer on KV memory, each with its own batch, so each must show its own total
(computed here from sim/). Then it kills the replica holding the most sessions (SIGKILL: a crash, not a shutdown)
and times how long its sessions take to show the same view again, served by a survivor; every other session must
see nothing (its one websocket never closed, its page never left the connected state).

Prints one row per session, each replica's CPU seconds and peak memory, then as its LAST line exactly:
    replicas=<r> sessions=<n> completed=<n> errors=<e> failover_s=<s>
(completed: sessions that showed their own numbers before the kill and the same view after it; failover_s: from the
kill to the moment the last of the killed replica's sessions showed its view again from a survivor).

tests/test_deploy.py runs the same harness (Deployment, open_session, kill_and_recover) with two replicas.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS, DONE, ROOT, AppServer, free_port

DEPLOY = ROOT / "deploy"
HAPROXY = os.environ.get("KVLAB_HAPROXY") or shutil.which("haproxy") or "/usr/sbin/haproxy"
REPLICA_HEADER = "x-kvlab-replica"  # deploy/haproxy.cfg names the serving replica in every response
REPLICA_COOKIE = "KVLAB_REPLICA"
CHECK_TIMEOUT = next(line.split("=", 1)[1].strip('}"') for line in (DEPLOY / "lb-start.sh").read_text().splitlines()
                     if line.startswith(': "${KVLAB_LB_CHECK_TIMEOUT:='))  # the shipped default, as written there
BOUND_S = 180.0  # the longest any one wait may take (a page load, a failover): nothing here can hang


def outside_request_trap_env(trap_url: str) -> dict[str, str]:
    """Environment that sends any HTTP(S) request a replica makes to anything but loopback to `trap_url`."""
    return {"HTTP_PROXY": trap_url, "HTTPS_PROXY": trap_url, "http_proxy": trap_url, "https_proxy": trap_url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


class Replica(AppServer):
    """One replica started by deploy/start.sh, as the image starts it, on a free port of `address`."""

    def __init__(self, name: str, log_path: Path, *, public_port: int, address: str = "127.0.0.1",
                 public_host: str = "127.0.0.1", env: dict[str, str] | None = None) -> None:
        self.replica_name = name
        self.settings = {"KVLAB_ADDRESS": address, "KVLAB_PUBLIC_HOST": public_host,
                         "KVLAB_PUBLIC_PORT": str(public_port), "KVLAB_PYTHON": sys.executable}
        super().__init__(log_path, env=env)

    def use_port(self, port: int) -> None:
        super().use_port(port)
        self.settings["KVLAB_PORT"] = str(port)

    def name(self) -> str:
        return f"replica {self.replica_name}"

    def command(self) -> list[str]:
        return ["sh", str(DEPLOY / "start.sh")]

    def launch_env(self) -> dict[str, str]:
        return dict(self.env, **self.settings)

    def start(self, timeout_s: float = BOUND_S, tries: int = 3) -> Replica:
        return super().start(timeout_s, tries)

    def kill(self) -> None:
        """A crash: SIGKILL, no shutdown (start.sh exec's Streamlit, so this is the server's own process)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


class LoadBalancer:
    """deploy/lb-start.sh (the shipped deploy/haproxy.cfg) on free loopback ports in front of `replicas`."""

    def __init__(self, replicas: list[str], run_dir: Path, *, port: int | None = None,
                 check_interval: str = "1s") -> None:
        self.port, self.stats_port = port or free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.run_dir = run_dir
        self.env = dict(os.environ, KVLAB_REPLICAS=",".join(replicas), KVLAB_LB_ADDRESS="127.0.0.1",
                        KVLAB_LB_PORT=str(self.port), KVLAB_LB_STATS_PORT=str(self.stats_port),
                        KVLAB_LB_RUNDIR=str(run_dir), KVLAB_HAPROXY=HAPROXY, KVLAB_LB_CHECK_INTERVAL=check_interval)
        self.proc: subprocess.Popen | None = None

    def start(self, num_up: int, timeout_s: float = 60) -> LoadBalancer:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.run_dir / "haproxy.log", "w")
        self.proc = subprocess.Popen(["sh", str(DEPLOY / "lb-start.sh")], cwd=ROOT, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # until every replica has passed its health checks
            if self.proc.poll() is not None:
                raise RuntimeError(f"the load balancer exited with {self.proc.returncode}; see {self._log.name}")
            try:
                if sum(s == "UP" for s in self.status().values()) == num_up:
                    return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the load balancer did not see {num_up} replicas up within {timeout_s:.0f} s")

    def stats(self) -> dict[str, dict[str, str]]:
        """Each replica's row of HAProxy's statistics (its columns: status, chkfail, check_status, ...)."""
        raw = urllib.request.urlopen(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5).read().decode()
        rows = csv.DictReader(io.StringIO(raw.lstrip("# ")))
        return {r["svname"]: r for r in rows if r["pxname"] == "replicas" and r["svname"] not in ("FRONTEND", "BACKEND")}

    def status(self) -> dict[str, str]:
        """Each replica's state as HAProxy's health checks see it: {'r1': 'UP', 'r2': 'DOWN', ...}."""
        return {name: row["status"].split()[0] for name, row in self.stats().items()}

    def state_changes(self) -> list[str]:
        """Every replica HAProxy marked DOWN or UP since it started, in order, with its reason, from its log (where
        each is written twice: as a warning and as a log line)."""
        out = []
        for line in (self.run_dir / "haproxy.log").read_text(errors="replace").splitlines():
            if line.startswith("Server replicas/") and (" is DOWN" in line or " is UP" in line):
                out.append(line.removeprefix("Server replicas/").split(". ", 1)[0])
        return out

    def wait_status(self, name: str, want: str, timeout_s: float = 60) -> float:
        """Seconds until `name` reaches state `want` (TimeoutError past `timeout_s`)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.status().get(name) == want:
                return time.monotonic() - t0
            time.sleep(0.2)
        raise TimeoutError(f"replica {name} is {self.status().get(name)}, not {want}, after {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if getattr(self, "_log", None):
            self._log.close()


class Deployment:
    """`num_replicas` replicas and the load balancer in front of them, stopped on exit. Replicas are named as
    HAProxy names them (r1, r2, ...), so a response's replica header is a key of `replicas`."""

    def __init__(self, num_replicas: int, out_dir: Path, env: dict[str, str] | None = None) -> None:
        self.out_dir = out_dir
        self.lb_port = free_port()
        self.replicas = {f"r{i + 1}": Replica(f"r{i + 1}", out_dir / f"replica-r{i + 1}.log",
                                              public_port=self.lb_port, env=env) for i in range(num_replicas)}
        self.lb: LoadBalancer | None = None

    @property
    def url(self) -> str:
        return self.lb.url

    def __enter__(self) -> Deployment:
        try:
            for r in self.replicas.values():
                r.start()
            # the replicas' ports are known once each holds its own (a start may have moved to a new port)
            self.lb = LoadBalancer([f"127.0.0.1:{r.port}" for r in self.replicas.values()], self.out_dir,
                                   port=self.lb_port)
            self.lb.start(num_up=len(self.replicas))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.lb is not None:
            self.lb.stop()
        for r in self.replicas.values():
            r.stop()


class HealthProbe:
    """Asks each replica's /_stcore/health directly (not through HAProxy) every 0.2 s in a thread of its own and
    keeps how long each answer took: what HAProxy's health checks see while students load pages. Used as a context
    manager around the work to watch."""

    def __init__(self, replicas: dict[str, Replica]) -> None:
        self.replicas = replicas
        self.seconds: dict[str, list[float]] = {name: [] for name in replicas}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._ask, args=(name, r.url), daemon=True)
                         for name, r in replicas.items()]

    def _ask(self, name: str, url: str) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=BOUND_S).read()
            except OSError:
                return  # the replica is gone (killed): nothing more to time
            self.seconds[name].append(time.monotonic() - t0)
            self._stop.wait(0.2)

    def __enter__(self) -> HealthProbe:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(BOUND_S)

    def summary(self, name: str) -> str:
        got = sorted(self.seconds[name])
        if not got:
            return "no health answer timed"
        return (f"{len(got)} health answers, slowest {got[-1]:.2f} s, median {got[len(got) // 2] * 1000:.0f} ms "
                f"(HAProxy's check waits {CHECK_TIMEOUT})")


# Every change of the app root's connection and script state, in order (installed once a session has loaded): a
# session that "sees nothing" of a failover logs no state but CONNECTED; one that reconnects logs a lost connection,
# then a run, then its end.
WATCH_JS = """() => { const app = document.querySelector('[data-testid="stApp"]'); window.__kvlab = [];
  new MutationObserver(() => window.__kvlab.push(app.getAttribute('data-test-connection-state') + ' '
    + app.getAttribute('data-test-script-state'))).observe(app, {attributes: true}); }"""
STATE_JS = """() => { const app = document.querySelector('[data-testid="stApp"]');
  return [window.__kvlab || [], app.getAttribute('data-test-connection-state'), app.getAttribute('data-test-script-state')]; }"""


def kv_total(batch: int) -> str:
    """What KV memory shows as the total for its defaults (Llama 3.1 8B, 32,768 tokens, fp16) at this batch."""
    from benchmarks.classroom import kv_total as total

    return total(batch)


@dataclass
class Session:
    """One student: a browser context on KV memory with their own batch, and what happened to it."""

    batch: int
    expect: str
    page: object = None
    replica: str = ""  # the replica that served its page (the response header)
    sockets: list = field(default_factory=list)
    error: str = ""
    reconnect_s: float | None = None  # from the kill to the page connected to a survivor
    recovered_s: float | None = None  # from the kill to the page run again by the survivor, its numbers shown
    moved_to: str = ""

    @property
    def path(self) -> str:
        return f"/kv_memory?batch={self.batch}"

    def cookie(self) -> str:
        return next((c["value"] for c in self.page.context.cookies() if c["name"] == REPLICA_COOKIE), "")

    def shown_batch(self) -> str | None:
        return self.page.evaluate("() => new URLSearchParams(location.search).get('batch')")


def open_sessions(browser, base: str, batches: list[int]) -> list[Session]:
    """One new browser context (a student's own cookies) per batch on KV memory, all requested at once, then each
    waited for: loaded, its own total shown, its state watched from then on."""
    sessions = []
    for batch in batches:
        s = Session(batch, kv_total(batch))
        context = browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
        s.page = context.new_page()
        s.page.on("websocket", lambda ws, s=s: _watch(s, ws))
        response = s.page.goto(base + s.path, wait_until="commit", timeout=BOUND_S * 1000)
        s.replica = response.headers.get(REPLICA_HEADER, "")
        sessions.append(s)
    for s in sessions:
        s.page.wait_for_selector(DONE, timeout=BOUND_S * 1000)
        s.page.get_by_text(s.expect).first.wait_for(timeout=BOUND_S * 1000)
        s.page.evaluate(WATCH_JS)
    return sessions


def open_session(browser, base: str, batch: int) -> Session:
    """One student's session (see open_sessions)."""
    return open_sessions(browser, base, [batch])[0]


def check_session(s: Session) -> None:
    """The session shows its own view: its batch in the URL, its own total, and the replica it was given."""
    if s.shown_batch() != str(s.batch):
        raise AssertionError(f"batch={s.batch} session shows batch={s.shown_batch()}")
    if not s.replica or s.cookie() != s.replica:
        raise AssertionError(f"batch={s.batch} session: header names {s.replica!r}, cookie {s.cookie()!r}")
    if s.page.locator('[data-testid="stException"]').count():
        raise AssertionError(f"batch={s.batch} session shows an exception")


def _watch(s: Session, ws) -> None:
    ws.frames_in = 0  # messages the server sent on this socket: a survivor's run shows as frames on the new one

    def count(_frame) -> None:
        ws.frames_in += 1

    ws.on("framereceived", count)
    s.sockets.append(ws)


def _reconnected(s: Session, survivors: set[str]) -> bool:
    _, connection, _ = s.page.evaluate(STATE_JS)  # a Playwright call first: it delivers the socket events
    return (connection == "CONNECTED" and len(s.sockets) >= 2 and not s.sockets[-1].is_closed()
            and s.cookie() in survivors)


def _rerun_done(s: Session) -> bool:
    log, connection, script = s.page.evaluate(STATE_JS)
    return (any(e.endswith(" running") for e in log) and connection == "CONNECTED" and script == "notRunning"
            and s.page.get_by_text(s.expect).count() > 0)


def kill_and_recover(deployment: Deployment, sessions: list[Session], victim: str) -> float:
    """Kill replica `victim` (SIGKILL). Each of its sessions must reconnect through the load balancer to a survivor
    (a new websocket, the cookie now naming the survivor) and keep showing its view; Streamlit's page does not rerun
    by itself on a reconnect, so the student's next action is played (R, Streamlit's rerun key): the survivor must
    run the page from the same URL and show the same numbers. Returns seconds from the kill until the last of them
    was answered by a survivor (`recovered_s`; `reconnect_s` is the reconnect alone). Every other session must have
    seen nothing: one websocket, still open, never out of the connected state."""
    survivors = set(deployment.replicas) - {victim}
    mine = [s for s in sessions if s.replica == victim]
    before = {id(s): s.page.url for s in mine}
    deployment.replicas[victim].kill()
    t0 = time.monotonic()
    # all of them watched at once: each is timed when it reconnects, and played its rerun at once
    reconnecting, rerunning = list(mine), []
    while (reconnecting or rerunning) and time.monotonic() - t0 < BOUND_S:
        for s in list(reconnecting):
            if _reconnected(s, survivors):
                s.reconnect_s, s.moved_to = time.monotonic() - t0, s.cookie()
                s.page.evaluate("() => { window.__kvlab = []; }")
                s.page.locator("body").press("r")
                reconnecting.remove(s)
                rerunning.append(s)
        for s in list(rerunning):
            if _rerun_done(s):
                s.recovered_s = time.monotonic() - t0
                rerunning.remove(s)
        if reconnecting or rerunning:
            (reconnecting or rerunning)[0].page.wait_for_timeout(100)
    for s in reconnecting:
        s.error = f"not reconnected to a survivor within {BOUND_S:.0f} s"
    for s in rerunning:
        s.error = f"its view was not run again by a survivor within {BOUND_S:.0f} s"
    for s in mine:
        if s.error:
            continue
        if s.page.url != before[id(s)]:
            s.error = f"reconnected to another view: {s.page.url}"
        elif s.sockets[-1].frames_in == 0:
            s.error = "the survivor sent nothing on the new websocket"
    for s in sessions:
        if s.replica == victim or s.error:
            continue
        log, connection, _ = s.page.evaluate(STATE_JS)
        if len(s.sockets) != 1 or s.sockets[0].is_closed() or connection != "CONNECTED" or any(
                not e.startswith("CONNECTED") for e in log):
            s.error = f"saw the failover: {len(s.sockets)} websockets, states {log[:6]}"
        elif s.page.get_by_text(s.expect).count() == 0:
            s.error = "its total is gone"
    return max((s.recovered_s for s in mine if s.recovered_s is not None), default=float("nan"))


# What one student's page run costs the server (not the browser), on one replica: the real-model page cold (torch
# imported, the model loaded: once per replica) and warm with new values, and KV memory (a simulator page).
COST_PAGES = [("decode_cost", {"n": "24"}, "all 24 tokens"), ("decode_cost", {"n": "32"}, "all 32 tokens"),
              ("kv_memory", {"batch": "3"}, None)]


def page_costs(browser, replica: Replica) -> list[tuple[str, float]]:
    """(path, server CPU seconds) for each of COST_PAGES opened in turn straight on `replica`, to its run's end."""
    out = []
    for slug, params, expect in COST_PAGES:
        path = f"/{slug}?" + "&".join(f"{k}={v}" for k, v in params.items())
        context = browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
        page = context.new_page()
        before = replica.cpu_s()
        try:
            page.goto(replica.url + path, wait_until="domcontentloaded", timeout=BOUND_S * 1000)
            page.wait_for_selector(DONE, timeout=BOUND_S * 1000)
            page.get_by_text(expect or kv_total(int(params["batch"]))).first.wait_for(timeout=BOUND_S * 1000)
            out.append((path, replica.cpu_s() - before))
        finally:
            context.close()
    return out


@dataclass
class Report:
    sessions: list[Session]
    failover_s: float
    costs: list[tuple[str, float]]  # (path, server CPU s) on one replica
    usage: dict[str, tuple[float, float]]  # replica -> (CPU s over the KV memory sessions, peak MiB)
    health: dict[str, str]  # replica -> its health answers' times while the sessions opened
    taken_out: list[str]  # HAProxy's state changes before the kill: a live replica marked DOWN shows here


def run(num_replicas: int, num_sessions: int, out_dir: Path) -> Report:
    """The whole benchmark (see the module's docstring)."""
    from playwright.sync_api import sync_playwright

    sessions: list[Session] = []
    with Deployment(num_replicas, out_dir) as dep, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            costs = page_costs(browser, dep.replicas["r1"])
            cpu0 = {name: r.cpu_s() for name, r in dep.replicas.items()}
            with HealthProbe(dep.replicas) as probe:
                for i in range(num_sessions):
                    try:
                        s = open_session(browser, dep.url, 4 + i)
                        check_session(s)
                    except Exception as exc:  # a benchmark reports, it does not stop at the first failure
                        s = Session(4 + i, "", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                    sessions.append(s)
            health = {name: probe.summary(name) for name in dep.replicas}
            taken_out = dep.lb.state_changes()
            loaded = [s for s in sessions if not s.error]
            counts = {name: sum(s.replica == name for s in loaded) for name in dep.replicas}
            victim = max(counts, key=counts.get)
            usage = {name: (r.cpu_s() - cpu0[name], r.peak_rss_mb()) for name, r in dep.replicas.items()}
            failover = kill_and_recover(dep, loaded, victim)
        finally:
            browser.close()
    return Report(sessions, failover, costs, usage, health, taken_out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", default="3", help="replicas behind the load balancer, 2 to 8 (default 3)")
    ap.add_argument("--sessions", default="10", help="browser sessions, 1 to 40 (default 10)")
    args = ap.parse_args(argv)
    for name, value, lo, hi in (("--replicas", args.replicas, 2, 8), ("--sessions", args.sessions, 1, 40)):
        if not value.isdigit() or not lo <= int(value) <= hi:
            print(f"benchmarks.deploy: {name} must be a whole number from {lo} to {hi}, got {value!r}", file=sys.stderr)
            return 2
    if not Path(HAPROXY).exists() or not Path(CHROMIUM).exists():
        print(f"benchmarks.deploy: needs HAProxy ({HAPROXY}) and Chromium ({CHROMIUM})", file=sys.stderr)
        return 2
    num_replicas, num_sessions = int(args.replicas), int(args.sessions)
    t0 = time.monotonic()
    report = run(num_replicas, num_sessions, ROOT / "test-output" / "deploy")
    sessions, failover = report.sessions, report.failover_s
    print("server CPU s of one page run on replica r1 (the browser's own work not counted):")
    for path, cpu in report.costs:
        print(f"  {path:<22} {cpu:6.2f}")
    print(f"{'batch':>5} {'replica':>7} {'after':>6} {'reconnect s':>11} {'answered s':>10}  error")
    for s in sessions:
        con, rec = (f"{x:.1f}" if x is not None else "-" for x in (s.reconnect_s, s.recovered_s))
        print(f"{s.batch:>5} {s.replica or '-':>7} {s.moved_to or '-':>6} {con:>11} {rec:>10}  {s.error}")
    for name, (cpu, peak) in report.usage.items():
        print(f"replica {name}: {sum(s.replica == name for s in sessions)} KV memory sessions, {cpu:.2f} CPU s for "
              f"them, peak {peak:.0f} MiB (before the kill{', the model loaded' if name == 'r1' else ''})")
    for name, line in report.health.items():
        print(f"replica {name} while the sessions opened: {line}")
    print(f"replicas HAProxy took out before the kill: {'; '.join(report.taken_out) or 'none'}")
    print(f"whole run {time.monotonic() - t0:.0f} s on {os.cpu_count()} cores")
    completed = sum(not s.error for s in sessions)
    print(f"replicas={num_replicas} sessions={len(sessions)} completed={completed} errors={len(sessions) - completed} "
          f"failover_s={failover:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
