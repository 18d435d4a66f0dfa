"""The current view as a QR code, so a room can follow the projector: in presenter mode the sidebar has a button
that opens a dialog with the view's link as a QR code (a PNG made by segno, pure Python, nothing fetched) and as
text. The link is the address the browser shows: the page and every value in its URL, the language included,
less `present`: the room's screens are not projectors.

The link is read when the button is pressed, at the start of that run, when the URL holds everything the last
run wrote into it (pressing a button changes no page value), so the code always matches the view on the screen.
"""

from __future__ import annotations

import io
from urllib.parse import urlencode

import streamlit as st

from app.i18n import t
from app.present import PRESENT_KEY, presenting

# A QR code of a longer link has modules too small to scan from the back of a room (and at 2,953 bytes none fits
# at all): past this the dialog says so and shows the link as text only.
MAX_QR_CHARS = 1_000
QR_PX = 480  # about the image's side in pixels: readable across a classroom when projected


def view_link(base: str, params: list[tuple[str, str]]) -> str:
    """The link of a view: `base` (scheme, host, port and page, as the browser shows them) and its URL values in
    order, repeated names kept, `present` left out."""
    kept = [(k, v) for k, v in params if k != PRESENT_KEY]
    return base + ("?" + urlencode(kept) if kept else "")


def qr_png(link: str, *, px: int = QR_PX) -> bytes:
    """`link` as a QR code in PNG bytes (error correction M; about `px` pixels a side with its quiet zone)."""
    import segno

    if len(link) > MAX_QR_CHARS:
        raise ValueError(f"a link of {len(link):,} characters is over the {MAX_QR_CHARS:,} a QR code here may hold")
    qr = segno.make_qr(link, error="m")
    side = qr.symbol_size(scale=1, border=4)[0]
    buf = io.BytesIO()
    qr.save(buf, kind="png", scale=max(2, px // side), border=4)
    return buf.getvalue()


def _current_params() -> list[tuple[str, str]]:
    return [(k, v) for k in st.query_params for v in st.query_params.get_all(k)]


def _show_view_qr() -> None:
    base = st.context.url
    if not base:  # no browser has told this session its address (a script run by a test)
        st.info(t("deploy.qr.no_address"), icon=":material/info:")
        return
    link = view_link(base, _current_params())
    if len(link) > MAX_QR_CHARS:
        st.warning(t("deploy.qr.too_long", n=f"{len(link):,}", max=f"{MAX_QR_CHARS:,}"), icon=":material/warning:")
    else:
        st.image(qr_png(link), width=QR_PX)
        st.caption(t("deploy.qr.caption"))
    st.code(link, language=None, wrap_lines=True)  # the link as text: copied, or typed from the screen


def qr_button() -> None:
    """In presenter mode: a button that opens the dialog with the current view's QR code."""
    if presenting() and st.button(t("deploy.qr.button"), key="_share_qr", icon=":material/qr_code_2:",
                                  help=t("deploy.qr.help")):
        st.dialog(t("deploy.qr.title"), width="medium")(_show_view_qr)()
