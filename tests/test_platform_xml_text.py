"""waitlab's XML escaping of platform files gives the standard library's output (``xml.sax.saxutils``)."""

from __future__ import annotations

from xml.sax import saxutils

from hypothesis import given
from hypothesis import strategies as st

from waitlab.platforms.xml_text import escape, quoteattr

SPECIAL = st.text(alphabet=st.sampled_from(list("ab &<>\"'\n\r\t")), max_size=30)


@given(st.one_of(SPECIAL, st.text(max_size=30)))
def test_escape_and_quoteattr_are_the_standard_library_s(data: str):
    assert escape(data) == saxutils.escape(data)
    assert quoteattr(data) == saxutils.quoteattr(data)
