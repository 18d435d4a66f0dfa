"""Presenter mode's QR code of the current view (app/share_qr.py): the link it encodes, the image decoded back
(zxing-cpp, a test-only decoder), the bound on its length, and the button in the app."""

import io

import pytest

from app.share_qr import MAX_QR_CHARS, qr_png, view_link
from sim.words import text
from tests.conftest import run_in_app


def decode(png: bytes) -> list[str]:
    import zxingcpp
    from PIL import Image

    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))]


def test_the_link_is_the_view_with_every_url_value_but_presenter_mode():
    base = "http://lab.example.org:8080/kv_memory"
    params = [("batch", "8"), ("present", "1"), ("lang", "ko"), ("prompt", "To be, or not 한국"), ("lang", "en")]
    assert view_link(base, params) == base + "?batch=8&lang=ko&prompt=To+be%2C+or+not+%ED%95%9C%EA%B5%AD&lang=en"
    assert view_link(base, [("present", "1")]) == base  # nothing left: no bare '?'
    assert view_link("http://h/", []) == "http://h/"


@pytest.mark.parametrize("link", [
    "http://127.0.0.1:8501/kv_memory?batch=8&lang=ko",
    "https://lab.example.org/attention_masks?prompt=To+be%2C+or+not+%ED%95%9C%EA%B5%AD&tab=rows",
])
def test_the_qr_code_decodes_to_the_link(link):
    png = qr_png(link)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert decode(png) == [link]


def test_the_image_is_about_the_size_asked_for():
    from PIL import Image

    for link in ("http://h/x", "http://h/x?" + "a=1&" * 60):
        side = Image.open(io.BytesIO(qr_png(link, px=480))).size[0]
        assert 240 < side <= 480 + 2 * 4 * 8, (link, side)  # a whole number of pixels per module, quiet zone in


def test_a_link_too_long_to_scan_is_refused_not_truncated():
    long_link = "http://h/kv_memory?cfg=" + "x" * MAX_QR_CHARS
    with pytest.raises(ValueError, match="characters"):
        qr_png(long_link)
    assert decode(qr_png(long_link[:MAX_QR_CHARS])) == [long_link[:MAX_QR_CHARS]]


def _qr_buttons(at):
    return [b for b in at.sidebar.button if b.key == "_share_qr"]


def test_the_button_is_there_in_presenter_mode_only_in_both_languages():
    assert _qr_buttons(run_in_app("home")) == []
    at = run_in_app("home", {"present": "1"})
    assert [b.label for b in _qr_buttons(at)] == [text("en", "deploy.qr.button")]
    at = run_in_app("home", {"present": "1", "lang": "ko"})
    assert [b.label for b in _qr_buttons(at)] == [text("ko", "deploy.qr.button")]


def test_without_a_browser_address_the_dialog_says_so_and_draws_nothing():
    at = run_in_app("kv_memory", {"present": "1", "batch": "8"})
    _qr_buttons(at)[0].click().run()
    assert not at.exception
    assert text("en", "deploy.qr.no_address") in [i.value for i in at.info]
    assert len(at.get("imgs")) == 0


def test_home_points_to_the_teachers_guide():
    at = run_in_app("home")
    assert text("en", "deploy.home_guide") in [c.value for c in at.caption]
