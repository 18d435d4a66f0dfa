"""Issue 39, items 2 and 8: the settings a public class server needs, checked against a running server (the
project's .streamlit/config.toml, read from the working directory as `streamlit run` reads it): an upload larger
than any page takes is refused by the server itself, sent straight to its upload endpoint; an uncaught exception
shows visitors no message and no traceback; the server listens on loopback unless told otherwise."""

import socket
import tomllib
import urllib.request

import pytest

from benchmarks.browser import DONE, AppServer
from sim.alloc.trace import MAX_PAGE_TRACE_BYTES
from tests.conftest import ROOT, _need_browser

pytestmark = pytest.mark.browser

SECRET = "SECRET-7f3a /home/teacher/.ssh/id_rsa"
SCRIPT = f'''
import streamlit as st

st.title("probe")
st.file_uploader("a file", key="f")
if st.button("boom"):
    raise RuntimeError({SECRET!r})
'''
MIB = 2**20


@pytest.fixture(scope="module")
def probe_server(tmp_path_factory):
    _need_browser()
    script = tmp_path_factory.mktemp("probe") / "probe.py"
    script.write_text(SCRIPT)
    server = AppServer(ROOT / "test-output" / "hardening-streamlit.log", script=script)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    server.stop()


def _open(browser, url):
    page = browser.new_page()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    page.wait_for_selector(DONE, timeout=60_000)
    return page


def test_the_server_refuses_an_upload_larger_than_any_page_takes(probe_server, browser):
    """A small upload through the widget gives this session's upload URL and XSRF token; the same endpoint is then
    sent files straight, as a script would: the largest a page takes (a 2 MiB trace) is received, one over the
    server's limit is refused with 413 (Streamlit's default limit, 200 MB, took three 50 MB uploads)."""
    limit_mb = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"].get("maxUploadSize", 200)
    assert MAX_PAGE_TRACE_BYTES < limit_mb * MIB <= MAX_PAGE_TRACE_BYTES + 1 * MIB  # what a page takes, + framing
    page = _open(browser, probe_server.url)
    try:
        with page.expect_request(lambda r: "/_stcore/upload_file/" in r.url and r.method == "PUT") as sent:
            page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
                files=[{"name": "small.json", "mimeType": "application/json", "buffer": b"{}"}])
        request = sent.value
        headers = {k: v for k, v in request.headers.items() if k.lower() == "x-xsrftoken"}
        assert headers, "the widget's upload carries no XSRF token"

        def put(num_bytes: int) -> int:
            return page.request.put(request.url, headers=headers, multipart={"file": {
                "name": "t.jsonl", "mimeType": "application/octet-stream", "buffer": b"x" * num_bytes}}).status

        assert put(MAX_PAGE_TRACE_BYTES) == 204  # what the Serving page takes reaches it
        assert put(limit_mb * MIB + 1) == 413
    finally:
        page.close()


def test_an_uncaught_exception_shows_visitors_no_message_and_no_traceback(probe_server, browser):
    page = _open(browser, probe_server.url)
    try:
        page.get_by_role("button", name="boom").click()
        box = page.locator('[data-testid="stException"]')
        box.wait_for(timeout=60_000)
        page.wait_for_selector(DONE, timeout=60_000)
        shown = page.locator('[data-testid="stMain"]').inner_text()
        assert "SECRET-7f3a" not in shown and "id_rsa" not in shown
        assert "Traceback" not in shown and "RuntimeError" not in shown and "probe.py" not in shown
    finally:
        page.close()
    assert SECRET in probe_server.log_path.read_text()  # the operator still has it


def test_metrics_carry_nothing_per_user_and_the_default_address_is_loopback(probe_server):
    """/_stcore/metrics has no off switch in Streamlit 1.67 (README: a public host blocks it at its proxy): it
    must at least name no user. `server.address` stays loopback, so a plain `streamlit run` is not reachable from
    the network."""
    body = urllib.request.urlopen(probe_server.url + "/_stcore/metrics", timeout=30).read().decode()
    assert "user_session_events" not in body
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert config["server"]["enableExpensiveMemoryStats"] is False
    assert config["client"]["showErrorDetails"] == "none"
    # the probe server was started on 127.0.0.1: nothing answers on this machine's other addresses
    others = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    for host in others:
        with socket.socket() as s:
            s.settimeout(2)
            assert s.connect_ex((host, probe_server.port)) != 0, host
