"""What every page writes text with."""

from html import escape as _html_escape

from codspeed_wire.markdown import visible


def escape(text: str, quote: bool = True) -> str:
    """HTML-escaped, with invisible controls written out (``visible``)."""
    return _html_escape(visible(text), quote)
