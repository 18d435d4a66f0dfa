"""The deployment (Dockerfile, deploy/): settings checked at start, no outside request at a replica's start, the
Kubernetes manifest validated offline, and replicas behind HAProxy driven by Chromium: sessions spread with their
own numbers, uploads and media through the load balancer, one replica killed mid-session.

Everything runs here without a container engine: the replicas run deploy/start.sh (the image's CMD) and the load
balancer runs deploy/lb-start.sh on the shipped deploy/haproxy.cfg, on loopback ports chosen free. Locally the
HAProxy and browser tests skip when /usr/sbin/haproxy or Chromium is missing; with CI=true that is a failure.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from benchmarks.deploy import HAPROXY, Deployment, HealthProbe, Replica, kill_and_recover, open_session, open_sessions
from sim.words import text

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
OUT = ROOT / "test-output" / "deploy"


def _need_haproxy() -> None:
    if shutil.which(HAPROXY) is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but no HAProxy at {HAPROXY}: .ci/run must install Debian's haproxy")
        pytest.skip(f"no HAProxy at {HAPROXY} (apt-get install haproxy)")


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(DEPLOY / script)], env={"PATH": os.environ["PATH"], **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


# --- a wrong setting stops the start, naming it ---------------------------------------------------------------

@pytest.mark.parametrize("setting, value", [
    ("KVLAB_PORT", "abc"), ("KVLAB_PORT", "8.5"), ("KVLAB_PORT", "70000"), ("KVLAB_PORT", "0x1F"),
    ("KVLAB_THREADS", "0"), ("KVLAB_THREADS", "1.5"), ("KVLAB_PUBLIC_PORT", "-1"),
    ("KVLAB_PUBLIC_HOST", "https://lab.example.org"), ("KVLAB_PUBLIC_HOST", "lab.example.org:443"),
    ("KVLAB_ADDRESS", "0.0.0.0; rm -rf /"),
])
def test_a_replica_refuses_a_wrong_setting_and_names_it(setting, value):
    # /bin/false as the Python: a setting that slipped through would exit 1, not 2
    got = _run("start.sh", {setting: value, "KVLAB_PYTHON": "/bin/false"})
    assert got.returncode == 2, got
    assert got.stdout == "" and len(got.stderr.splitlines()) == 1 and setting in got.stderr, got.stderr
    assert f"'{value}'" in got.stderr  # and the value given, as given


def test_a_replica_s_defaults_are_valid():
    got = _run("start.sh", {"KVLAB_CHECK_ONLY": "1"})
    assert got.returncode == 0 and got.stderr == "", got


@pytest.mark.parametrize("env, named", [
    ({}, "KVLAB_REPLICAS"),
    ({"KVLAB_REPLICAS": "app1"}, "KVLAB_REPLICAS entry 1"),
    ({"KVLAB_REPLICAS": "app1:8501,app2:http"}, "KVLAB_REPLICAS entry 2's port"),
    ({"KVLAB_REPLICAS": "app1:8501,:8501"}, "KVLAB_REPLICAS entry 2's host"),
    ({"KVLAB_REPLICAS": "app1:8501", "KVLAB_LB_PORT": "80.5"}, "KVLAB_LB_PORT"),
    ({"KVLAB_REPLICAS": "app1:8501", "KVLAB_LB_STATS_PORT": "8080"}, "KVLAB_LB_STATS_PORT"),
    ({"KVLAB_REPLICAS": "app1:8501", "KVLAB_LB_TUNNEL_TIMEOUT": "forever"}, "KVLAB_LB_TUNNEL_TIMEOUT"),
    ({"KVLAB_REPLICAS": "app1:8501", "KVLAB_LB_CHECK_INTERVAL": "2"}, "KVLAB_LB_CHECK_INTERVAL"),
    ({"KVLAB_REPLICAS": "app1:8501", "KVLAB_REPLICA_MAXCONN": "0"}, "KVLAB_REPLICA_MAXCONN"),
    ({"KVLAB_REPLICAS": ",".join(f"app{i}:8501" for i in range(65))}, "at most 64"),
])
def test_the_load_balancer_refuses_a_wrong_setting_and_names_it(env, named, tmp_path):
    got = _run("lb-start.sh", {"KVLAB_LB_RUNDIR": str(tmp_path), "KVLAB_HAPROXY": "/bin/false", **env})
    assert got.returncode == 2, got
    assert len(got.stderr.splitlines()) == 1 and named in got.stderr, got.stderr


def test_the_shipped_config_takes_replicas_on_other_hosts(tmp_path):
    """HAProxy itself checks the written config (`haproxy -c`): replicas by IP on this and other hosts, and by
    name; one server line each, with its own cookie; the settings substituted."""
    _need_haproxy()
    replicas = ["127.0.0.1:8501", "10.0.0.12:8501", "localhost:8502"]
    got = _run("lb-start.sh", {"KVLAB_REPLICAS": ",".join(replicas), "KVLAB_LB_RUNDIR": str(tmp_path),
                               "KVLAB_HAPROXY": HAPROXY, "KVLAB_LB_CHECK_ONLY": "1"})
    assert got.returncode == 0, got
    written = (tmp_path / "kvlab-haproxy.cfg").read_text().splitlines()
    servers = [line.split() for line in written if line.strip().startswith("server ")]
    assert servers == [["server", f"r{i + 1}", r, "cookie", f"r{i + 1}"] for i, r in enumerate(replicas)]
    shipped = (DEPLOY / "haproxy.cfg").read_text().splitlines()
    assert [line for line in written if not line.strip().startswith("server ")] == [
        line for line in shipped if "@servers@" not in line]  # the shipped file, nothing else changed


class _SlowHealth:
    """A stand-in replica, alive but busy: it answers /_stcore/health only after `delay_s` (a replica drawing pages
    for a class answers in up to about 1.5 s on a 2-core machine, more on a loaded one)."""

    def __init__(self, delay_s: float) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.asked = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.asked += 1
                threading.Event().wait(delay_s)
                self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # its own port: no other process can take it
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_a_replica_whose_port_another_process_took_starts_on_a_new_one():
    """Tests run in parallel pick free ports: one picked here may be taken by another test's server before this
    replica binds it. The harness must not take the other server's health answer for this replica's (HAProxy would
    route students to a server that vanishes with the other test): it moves to a new port."""
    from benchmarks.browser import holds_port

    other = _SlowHealth(0.0)  # another process's server on the port, answering health checks at once
    replica = Replica("moved", OUT / "moved-replica.log", public_port=443)
    replica.use_port(other.port)
    try:
        replica.start()
        assert replica.port != other.port and replica.settings["KVLAB_PORT"] == str(replica.port)
        assert holds_port(replica.proc.pid, replica.port) and not holds_port(replica.proc.pid, other.port)
    finally:
        replica.stop()
        other.close()


@pytest.mark.slow
def test_a_busy_replica_stays_up_and_a_dead_one_goes_down(tmp_path):
    """The shipped config with the tests' 1-s check interval: a replica whose health answer takes 2.5 s (slow, not
    dead) passes check after check and is never taken out, while a replica that refuses connections is marked DOWN.
    With HAProxy's default (a check times out after `inter`), the slow one would be marked DOWN and its students
    moved to another replica."""
    _need_haproxy()
    from benchmarks.deploy import LoadBalancer

    slow = _SlowHealth(2.5)
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused, and no one else gets it
    lb = LoadBalancer([f"127.0.0.1:{slow.port}", f"127.0.0.1:{dead.getsockname()[1]}"], tmp_path,
                      check_interval="1s")
    try:
        lb.start(num_up=1)
        for _ in range(200):  # until three checks of the slow one have ended (HAProxy sends the next after one ends)
            if slow.asked >= 4 and lb.status()["r2"] == "DOWN":
                break
            threading.Event().wait(0.3)
        row = lb.stats()["r1"]
        assert slow.asked >= 4 and row["chkfail"] == "0" and row["status"] == "UP", (row, lb.state_changes())
        assert lb.stats()["r2"]["status"] == "DOWN"
        assert [c.split(",")[0] for c in lb.state_changes()] == ["r2 is DOWN"]  # r1 never taken out
    finally:
        lb.stop()
        slow.close()
        dead.close()


# --- the image and the compose file run what is tested -----------------------------------------------------------

def test_the_image_runs_the_tested_start_script_as_a_non_root_user():
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    assert lines[next(i for i, x in enumerate(lines) if x.startswith("FROM"))].startswith("FROM python:3.11-slim")
    assert 'CMD ["sh", "deploy/start.sh"]' in lines
    users = [x.split()[1] for x in lines if x.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    health = " ".join(lines[next(i for i, x in enumerate(lines) if x.startswith("HEALTHCHECK")):][:2])
    assert "/_stcore/health" in health
    torch_pin = next(x for x in (ROOT / "requirements.txt").read_text().splitlines() if x.startswith("torch=="))
    install = next(x for x in lines if "download.pytorch.org/whl/cpu" in x)
    assert f"{torch_pin}+cpu" in install.split()  # the CPU build of the pinned version
    from sim.model.real_source import INSTALL_COMMAND  # the real model's file, as the README and the pages say
    assert f"&& {INSTALL_COMMAND} \\" in lines
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for needed in ("app", "pages", "sim", "assets", "deploy", ".streamlit", "requirements.txt"):
        assert needed not in ignored and (ROOT / needed).exists()


def test_the_compose_file_s_settings_pass_the_start_checks():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    apps = sorted(name for name in services if name != "lb")
    lb = services["lb"]
    assert lb["environment"]["KVLAB_REPLICAS"].split(",") == [f"{a}:8501" for a in apps]
    assert sorted(lb["depends_on"]) == apps and "lb-start.sh" in " ".join(lb["entrypoint"])
    for name in apps:
        # "${KVLAB_PUBLIC_HOST:-localhost}": compose's default when the variable is not set
        env = {k: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(v)) for k, v in services[name]["environment"].items()}
        assert env["KVLAB_THREADS"] == "1"
        got = _run("start.sh", {**env, "KVLAB_CHECK_ONLY": "1"})
        assert got.returncode == 0, (name, got.stderr)


# --- Kubernetes: validated offline against the API's schemas, never applied ---------------------------------------

def _manifests() -> list[dict]:
    return list(yaml.safe_load_all((DEPLOY / "k8s" / "kvlab.yaml").read_text()))


def test_the_kubernetes_manifest_validates_against_the_api_schemas():
    import kubernetes_validate

    docs = _manifests()
    assert sorted(d["kind"] for d in docs) == ["Deployment", "HorizontalPodAutoscaler", "Ingress", "Service"]
    for d in docs:
        kubernetes_validate.validate(d, "1.37.0", strict=True)
    broken = _manifests()[0]  # the validator can fail: a probe's port as a list
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = [8501]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.37.0", strict=True)


def test_the_kubernetes_pieces_fit_together():
    by_kind = {d["kind"]: d for d in _manifests()}
    dep, svc, ing, hpa = (by_kind[k] for k in ("Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"))
    pod = dep["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/_stcore/health"
    assert container["command"] == ["sh", "deploy/start.sh"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KVLAB_THREADS"] == "1" and container["resources"]["limits"]["cpu"] == "1"
    assert _run("start.sh", {**env, "KVLAB_CHECK_ONLY": "1"}).returncode == 0
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    assert ing["metadata"]["annotations"]["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == svc["metadata"]["name"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_every_health_check_gives_a_busy_replica_the_load_balancer_s_time():
    """The same patience everywhere a health check decides a replica's fate: HAProxy's check timeout (lb-start.sh's
    default), the Kubernetes probes (whose own default, 1 s, would restart a pod busy with a class) and the image's
    HEALTHCHECK (its request's timeout, and Docker's, a little longer, for Python's start)."""
    from benchmarks.deploy import CHECK_TIMEOUT

    need_s = int(CHECK_TIMEOUT.removesuffix("s"))
    container = next(d for d in _manifests() if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    probes = [container[k] for k in ("readinessProbe", "livenessProbe", "startupProbe") if k in container]
    assert len(probes) == 2 and all(p.get("timeoutSeconds", 1) >= need_s for p in probes), probes
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    health = " ".join(lines[next(i for i, x in enumerate(lines) if x.startswith("HEALTHCHECK")):][:2])
    docker_s = int(next(w for w in health.split() if w.startswith("--timeout=")).removeprefix("--timeout=").rstrip("s"))
    request_s = float(health.rsplit("timeout=", 1)[1].split(")")[0])
    assert need_s <= request_s < docker_s, health


# --- a public replica asks no outside service for its address ----------------------------------------------------

class _Trap:
    """A loopback listener set as the replica's HTTP and HTTPS proxy: any request the replica makes to anything
    but loopback arrives here (and goes no further), its first line recorded."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.requests.append(conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace"))
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


EXTERNAL_IP_WARNING = "Did not auto detect external IP"


def _start_and_stop(server) -> tuple[str, dict[str, str]]:
    """The server started until healthy, a moment for a late request to reach the trap, stopped; its log and the
    environment its process ran with."""
    try:
        server.start()
        raw = Path(f"/proc/{server.proc.pid}/environ").read_bytes()
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        threading.Event().wait(1.0)
    finally:
        server.stop()
    return server.log_path.read_text(), env


class _BareReplica(Replica):
    """What a public replica without deploy/start.sh would run: every interface, no public address named."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.address", "0.0.0.0",
                "--server.port", str(self.port)]


def test_a_public_replica_asks_no_outside_service_for_its_address():
    """On every interface (as in the image) with KVLAB_PUBLIC_HOST set, the replica's start makes no request
    beyond loopback. The same server started without browser.serverAddress asks for its external IP (the trap
    catches it, so nothing leaves): the check can fail."""
    from benchmarks.deploy import outside_request_trap_env

    trap = _Trap()
    try:
        env = outside_request_trap_env(trap.url)
        # KVLAB_THREADS unset (empty: the test runner may set it) and other thread counts inherited: start.sh's
        # default must win
        public = Replica("public", OUT / "public-replica.log", public_port=443, address="0.0.0.0",
                         public_host="lab.example.org",
                         env={**env, "KVLAB_THREADS": "", "OMP_NUM_THREADS": "7", "MKL_NUM_THREADS": "7"})
        log, env_seen = _start_and_stop(public)
        assert trap.requests == [] and EXTERNAL_IP_WARNING not in log, (trap.requests, log)
        assert "URL: http://lab.example.org:443" in log  # the address students are told is the public one
        # start.sh exec's Streamlit: this is the server itself, with one torch (and OpenMP, MKL) thread by default
        assert {k: env_seen.get(k) for k in ("KVLAB_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")} == dict.fromkeys(
            ("KVLAB_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")

        log, _ = _start_and_stop(_BareReplica("bare", OUT / "bare-wildcard.log", public_port=443, env=env))
        assert any("checkip" in r for r in trap.requests) and EXTERNAL_IP_WARNING in log, trap.requests
    finally:
        trap.close()


# --- replicas behind HAProxy, in Chromium ------------------------------------------------------------------------

def _decode_qr(png: bytes) -> list[str]:
    import zxingcpp
    from PIL import Image

    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))]


def _upload_trace(browser, base: str) -> None:
    """Serving's own-trace tab: a JSONL trace uploaded through the load balancer reaches the replica that holds the
    session (the upload names its replica) and is simulated (its chart drawn, no error)."""
    from benchmarks.browser import DONE
    from sim.alloc.trace import write_trace

    trace = write_trace([{"arrival": 0.05 * i, "prompt_len": 400 + 60 * i, "prefix_group": "sys", "prefix_len": 320,
                          "output_len": 40} for i in range(3)])
    page = browser.new_context(reduced_motion="reduce").new_page()
    try:
        first = page.goto(f"{base}/serving?tab=trace", wait_until="domcontentloaded")
        page.wait_for_selector(DONE, timeout=180_000)
        with page.expect_response(lambda r: "/_stcore/upload_file/" in r.url and r.request.method == "PUT") as up:
            page.locator('input[type="file"]').first.set_input_files(
                {"name": "class.jsonl", "mimeType": "application/jsonl", "buffer": trace.encode()})
        assert up.value.ok, up.value.status
        assert up.value.headers["x-kvlab-replica"] == first.headers["x-kvlab-replica"]
        page.wait_for_selector('[data-testid="stPlotlyChart"] .js-plotly-plot', timeout=180_000)
        page.wait_for_selector(DONE, timeout=180_000)
        assert page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count() == 0
    finally:
        page.context.close()


def _upload_config(browser, base: str) -> None:
    """KV memory's own config.json, uploaded through the load balancer: the page shows that architecture's total."""
    from benchmarks.browser import DONE
    from sim.cost.hf_config import parse_hf_config_with_notes
    from sim.cost.memory import MemoryConfig, fmt_bytes, kv_memory

    raw = (ROOT / "assets" / "presets" / "configs" / "qwen2.5-7b.json").read_text()
    arch, _ = parse_hf_config_with_notes(raw, source="upload")
    expect = fmt_bytes(kv_memory(MemoryConfig(arch, batch=3, context=32768, kv_dtype="fp16")).total_bytes)
    page = browser.new_context(reduced_motion="reduce").new_page()
    try:
        first = page.goto(f"{base}/kv_memory?model=custom&batch=3", wait_until="domcontentloaded")
        page.wait_for_selector(DONE, timeout=180_000)
        with page.expect_response(lambda r: "/_stcore/upload_file/" in r.url and r.request.method == "PUT") as up:
            page.locator('input[type="file"]').first.set_input_files(
                {"name": "my-config.json", "mimeType": "application/json", "buffer": raw.encode()})
        assert up.value.ok and up.value.headers["x-kvlab-replica"] == first.headers["x-kvlab-replica"]
        page.get_by_text(expect).first.wait_for(timeout=180_000)
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.context.close()


def _qr_through_the_load_balancer(browser, base: str) -> None:
    """Presenter mode's QR code: its image is media served by the session's replica (sticky), and it decodes to
    the view's address as the browser shows it, less `present`."""
    from benchmarks.browser import DONE

    page = browser.new_context(viewport={"width": 1280, "height": 720}, reduced_motion="reduce").new_page()
    try:
        first = page.goto(f"{base}/kv_memory?batch=9&present=1", wait_until="domcontentloaded")
        page.wait_for_selector(DONE, timeout=180_000)
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.locator('[data-testid="stSidebar"]').get_by_role("button", name=text("en", "deploy.qr.button"),
                                                             exact=True).click()
        img = page.locator('[role="dialog"] img').first
        img.wait_for(timeout=60_000)
        media = page.request.get(base + img.get_attribute("src").removeprefix(base))
        assert media.ok and media.headers["x-kvlab-replica"] == first.headers["x-kvlab-replica"]
        want = page.url.replace("&present=1", "").replace("?present=1&", "?")
        assert "present" not in want and "batch=9" in want
        assert _decode_qr(media.body()) == [want]
    finally:
        page.context.close()


@pytest.mark.browser
@pytest.mark.slow
def test_replicas_behind_the_load_balancer(browser):
    """Two replicas (deploy/start.sh) behind HAProxy (deploy/lb-start.sh, the shipped config). Ten students on KV
    memory, each with their own batch, spread over both replicas and each shown their own total; a trace upload on
    Serving, a config upload on KV memory and presenter mode's QR image reach the session's own replica; then the
    replica with more sessions is killed: its sessions reconnect to the survivor and the survivor runs their same
    view (URL and numbers), the others see nothing, HAProxy's health checks mark the dead one DOWN and a new
    student goes to the survivor. Recovery times are printed (benchmarks/deploy.py measures them)."""
    _need_haproxy()
    with Deployment(2, OUT) as dep:
        with HealthProbe(dep.replicas) as probe:
            sessions = open_sessions(browser, dep.url, list(range(4, 14)))  # ten students at once
        try:
            changes = dep.lb.state_changes()  # a live replica taken out moves its students: the cause, if any
            for s in sessions:
                assert s.shown_batch() == str(s.batch) and s.cookie() == s.replica in dep.replicas, (s, changes)
            assert changes == []
            counts = {name: sum(s.replica == name for s in sessions) for name in dep.replicas}
            assert min(counts.values()) >= 1, counts

            _upload_trace(browser, dep.url)
            _upload_config(browser, dep.url)
            _qr_through_the_load_balancer(browser, dep.url)

            victim = max(counts, key=counts.get)
            survivor = next(n for n in dep.replicas if n != victim)
            failover_s = kill_and_recover(dep, sessions, victim)
            assert [(s.batch, s.error) for s in sessions if s.error] == []
            assert {s.moved_to for s in sessions if s.replica == victim} == {survivor}
            dep.lb.wait_status(victim, "DOWN")
            late = open_session(browser, dep.url, 99)
            assert late.replica == survivor
            late.page.context.close()
            print(f"sessions per replica {counts}; killed {victim}: its sessions reconnected after "
                  f"{max(s.reconnect_s for s in sessions if s.replica == victim):.1f} s and were answered by "
                  f"{survivor} after {failover_s:.1f} s; while they opened, "
                  + "; ".join(f"{name}: {probe.summary(name)}" for name in dep.replicas))
        finally:
            for s in sessions:
                s.page.context.close()


def test_community_cloud_gets_the_cpu_wheel_of_the_pinned_torch():
    """app/requirements.txt (read by Community Cloud before the root's): the CPU wheel of the very torch version
    requirements.txt pins, for CPython 3.11 on Linux x86-64, and every other pin from requirements.txt itself."""
    from urllib.parse import unquote

    from packaging.requirements import Requirement
    from packaging.utils import parse_wheel_filename

    lines = [x for x in (ROOT / "app" / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert lines[1:] == ["-r ../requirements.txt"]
    req = Requirement(lines[0])
    name, version, _, tags = parse_wheel_filename(unquote(req.url.rsplit("/", 1)[1]))
    pinned = next(x for x in (ROOT / "requirements.txt").read_text().splitlines() if x.startswith("torch=="))
    assert (req.name, name, str(version)) == ("torch", "torch", pinned.split("==")[1] + "+cpu")
    assert {(t.interpreter, t.platform) for t in tags} == {("cp311", "manylinux_2_28_x86_64")}
    assert req.marker.evaluate({"python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64"})
    assert not req.marker.evaluate({"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64"})


@pytest.mark.parametrize("args, named", [(["--replicas", "2.5"], "--replicas"), (["--replicas", "1"], "--replicas"),
                                         (["--sessions", "ten"], "--sessions"), (["--sessions", "0"], "--sessions")])
def test_the_benchmark_refuses_a_wrong_count_in_one_line(args, named, capsys):
    from benchmarks.deploy import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and named in err and repr(args[1]) in err
