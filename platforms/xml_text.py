"""XML text and attribute values for the platform files waitlab writes, without :mod:`xml.sax.saxutils` (which
imports :mod:`urllib.request`, and with it ``http.client``, ``ssl`` and ``email``: 15-17 ms of every command's start,
issue 25).  The same output as ``saxutils.escape`` and ``saxutils.quoteattr`` (``tests/test_platform_xml_text.py``
compares them).
"""

from __future__ import annotations

_TEXT = (("&", "&amp;"), (">", "&gt;"), ("<", "&lt;"))
_ATTRIBUTE = (("\n", "&#10;"), ("\r", "&#13;"), ("\t", "&#9;"))


def escape(data: str) -> str:
    """``&``, ``<`` and ``>`` of ``data`` as entities.

    >>> escape("a < b & c")
    'a &lt; b &amp; c'
    """
    for raw, entity in _TEXT:
        data = data.replace(raw, entity)
    return data


def quoteattr(data: str) -> str:
    """``data`` as a quoted XML attribute value (double quotes unless it holds one and no single quote).

    >>> quoteattr('node-1'), quoteattr('say "hi"'), quoteattr('it\\'s "x"')
    ('"node-1"', '\\'say "hi"\\'', '"it\\'s &quot;x&quot;"')
    """
    data = escape(data)
    for raw, entity in _ATTRIBUTE:
        data = data.replace(raw, entity)
    if '"' in data:
        if "'" in data:
            return '"' + data.replace('"', "&quot;") + '"'
        return "'" + data + "'"
    return '"' + data + '"'
