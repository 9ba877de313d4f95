"""Text from the logs made safe for where it is shown.

File, run and column names come from the user's disk and files: they may hold control
characters (ESC sequences that drive the terminal, NUL), or bytes that are not UTF-8 (Python
keeps them as lone surrogates, which cannot be printed or encoded). :func:`printable` shows
such characters as ``\\xNN`` escapes for the terminal and stderr; :func:`xml_text` does the same
for XML 1.0, which cannot hold them at all. Ordinary text, tabs and line breaks are unchanged.
"""

from __future__ import annotations

import re
from typing import Any

#: C0 controls but tab/newline/CR, DEL, C1 controls, lone surrogates (undecodable bytes)
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
#: the same for one-line text: line breaks too
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: what XML 1.0 cannot carry, plus the two non-characters
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _escape(m: re.Match) -> str:
    c = ord(m.group(0))
    if 0xDC80 <= c <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with control characters and undecodable bytes shown as escapes."""
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_escape, text)


def xml_text(text: str) -> str:
    """``text`` (a whole XML document) with the characters XML 1.0 forbids shown as escapes."""
    return _XML_BAD.sub(_escape, text)


def printable_doc(obj: Any) -> Any:
    """A copy of a plain document (dicts, lists, strings) with every string :func:`printable`."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, dict):
        return {printable_doc(k): printable_doc(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [printable_doc(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(printable_doc(v) for v in obj)
    return obj
