"""User text on the page, made harmless: every value that came from a user (a URL value, a prompt, a
file or config name, an error message that quotes one) passes through one of these before it is
shown in Markdown or in a plotly title, so it can never become a link, an image, a colour
directive, LaTeX or HTML, and it is never longer than a line.

Escaping Markdown's characters is not enough for links: Streamlit's Markdown (remark-gfm) also turns bare
`http://…`, `www.…` and `name@host.tld` into live links ("autolink literals"), and it finds them in the text after
the backslash escapes are gone. `plain` therefore also puts an invisible WORD JOINER (U+2060) inside each of them
(`http:⁠//`, `www⁠.`, `⁠@`), so the pattern no longer matches and the reader still sees the same characters;
tests/test_fuzz_pages.py checks Chromium's DOM for any link the app did not write.
"""

from __future__ import annotations

import html
import re

MAX_SHOWN = 60  # characters of a user value shown in a message
MAX_MESSAGE = 600  # characters of a whole error message that quotes user values

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>:$~=^&\"'@%])")
WORD_JOINER = "\u2060"  # invisible, never a line break, not a word character: it splits what an autolink needs
# GFM's autolink literals: a scheme's "://" (http, https; any scheme, to be safe), "www." and an email's "@" when a
# local part (a word character, ".", "+" or "-") stands before it ("H2O @ 25%" is no address and stays as it is)
_AUTOLINK_SPLITS = re.compile(r"(?<=:)(?=//)|(?<=[wW]{3})(?=\.)|(?<=[\w.+-])(?=@)")  # where a word joiner goes


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """At most `limit` characters, an ellipsis marking the cut; control characters written out."""
    flat = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))
    return flat if len(flat) <= limit else flat[: max(1, limit - 1)] + "…"


def code(value: object, limit: int = MAX_SHOWN) -> str:
    """A user value as inline code, shortened: Markdown shows everything inside literally.

    The fence is one backtick longer than the longest run of backticks in the value (CommonMark),
    and padded with spaces when the value starts or ends with a backtick.
    """
    text = shorten(str(value), limit)
    if text == "":
        return '`""`'
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def unlinked(text: str) -> str:
    """`text` with a word joiner inside every "://", "www." and "@": no autolink literal can match it."""
    return _AUTOLINK_SPLITS.sub(WORD_JOINER, text)


def plain(message: object, limit: int = MAX_MESSAGE) -> str:
    """A whole message that may quote user text (an exception's), shown literally in Markdown:
    every character Markdown, Streamlit's directives or LaTeX could act on is backslash-escaped, and no bare URL
    or email address in it can become a link (`unlinked`)."""
    flat = shorten(str(message), limit).strip()  # leading spaces: a code block
    return _MARKDOWN_SPECIAL.sub(r"\\\1", unlinked(flat))


def for_plotly(value: object, limit: int = MAX_SHOWN) -> str:
    """A user value inside a plotly title or label: plotly renders a subset of HTML (links
    included), so the value is HTML-escaped after shortening."""
    return html.escape(shorten(str(value), limit), quote=True)
