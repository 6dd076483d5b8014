"""Glob patterns as regular expressions, in Hadoop's glob syntax: ``*`` and ``?`` within one
path segment, ``[...]`` classes with ``^`` negation, ``{a,b}`` alternatives, ``\\`` escapes;
where a pattern may span segments (the user rules' sources), ``**`` across them too."""
from __future__ import annotations

import re

#: an unescaped glob character
GLOB_CHARS = re.compile(r"(?<!\\)[*?\[{]")


def glob_pattern(text: str, across_segments: bool = False) -> str:
    """The regular expression (source text) ``text`` matches as a glob; ``**`` stands for any
    run of segments when ``across_segments``, else for two ``*``."""
    out, i, depth = [], 0, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(re.escape(text[i + 1]))
            i += 2
            continue
        if across_segments and text.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = text.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = text[i + 1:end]
                negate = body.startswith("^")
                body = body[1:] if negate else body
                out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "," and depth:
            out.append("|")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out) + ")" * depth
