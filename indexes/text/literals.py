"""What a string predicate requires of a matching value, as literals the text index can look up.

Pure Python (no JVM, no tantivy). A text index holds, for every row, the trigrams of the
row's value after :func:`fold` and between the anchors :data:`START` and :data:`END`. A predicate
is reduced to a :data:`Requirement`: a formula of :class:`Has` (the value contains this text)
joined by :class:`AllOf` and :class:`AnyOf` that every matching value satisfies. It is a
necessary condition only: Spark still evaluates the exact predicate on the files kept.

The scheme is sound because :func:`fold` is a homomorphism of strings (it maps each character
independently), so ``L`` inside ``V`` implies ``fold(L)`` inside ``fold(V)``, and it is
insensitive to Spark's case mappings (``fold(lower(V)) == fold(upper(V)) == fold(V)``), so one
folded index serves case-sensitive, ``lower(col)``/``upper(col)``/``ilike`` and ``(?i)`` regex
predicates alike. Patterns this module cannot read exactly as Spark (Java) does give ``None``:
no pruning.
"""
from __future__ import annotations

import re
import unicodedata
import warnings
from dataclasses import dataclass

try:   # Python 3.11+
    from re import _constants as _sre, _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

#: Marks the start and the end of every value in the index (a gram holding one of them says
#: where a value starts or ends). A value may itself contain these characters: that only adds
#: grams, which never hides a match.
START, END = "\u0002", "\u0003"
GRAM = 3

# Case pairs that Spark's upper()/lower() (ICU, Unicode 17) knows and this Python's Unicode data
# may not: (first upper, first lower, count). Folding maps each upper to its lower, which is
# harmless where casefold already does it; tests check fold() against Spark on every code point.
_NEWER_CASE_PAIRS = (
    (0xA7DC, 0x019B, 1), (0xA7CB, 0x0264, 1), (0x1C89, 0x1C8A, 1), (0xA7CC, 0xA7CD, 1),
    (0xA7CE, 0xA7CF, 1), (0xA7D2, 0xA7D3, 1), (0xA7D4, 0xA7D5, 1), (0xA7DA, 0xA7DB, 1),
    (0x10D50, 0x10D70, 22), (0x16EA0, 0x16EBB, 25),
)
#: What an index's folded grams depend on; an index built under another value is not used.
UNICODE_VERSION = f"{unicodedata.unidata_version}+case17"

# casefold merges the case variants of a character; the dotless i and the combining dot above
# are what Java's locale-sensitive lower() (Turkish) and İ → "i̇" add on top of that.
_EXTRA_FOLD = str.maketrans({
    "\u0131": "i", "\u0307": None,
    **{chr(upper + i): chr(lower + i) for upper, lower, n in _NEWER_CASE_PAIRS for i in range(n)},
})


def fold(text: str) -> str:
    """The case-folded form of ``text`` the index stores (and literals are looked up in)."""
    if text.isascii():   # the same, faster: casefold is lower there, and nothing to translate
        return text.lower()
    return text.casefold().translate(_EXTRA_FOLD)


def grams(text: str) -> frozenset[str]:
    """The distinct trigrams of ``fold(text)`` (empty when it is shorter than three)."""
    folded = fold(text)
    return frozenset(folded[i:i + GRAM] for i in range(len(folded) - GRAM + 1))


# --- requirements ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Has:
    """A matching value contains ``text`` (START/END included where it is anchored)."""

    text: str


@dataclass(frozen=True)
class AllOf:
    """Every part holds; ``AllOf(())`` is no requirement at all (:data:`ANYTHING`)."""

    parts: tuple


@dataclass(frozen=True)
class AnyOf:
    """At least one part holds; ``AnyOf(())`` is unsatisfiable (:data:`NOTHING`)."""

    parts: tuple


Requirement = Has | AllOf | AnyOf
ANYTHING = AllOf(())
NOTHING = AnyOf(())


def all_of(parts) -> Requirement:
    """The conjunction of ``parts``, flattened, without parts that require nothing."""
    flat: list = []
    for p in parts:
        if p == NOTHING:
            return NOTHING
        if isinstance(p, Has) and len(grams(p.text)) == 0:
            continue
        flat.extend(p.parts if isinstance(p, AllOf) else [p])
    unique = tuple(dict.fromkeys(flat))
    return unique[0] if len(unique) == 1 else AllOf(unique)


def any_of(parts) -> Requirement:
    """The disjunction of ``parts``; a part that requires nothing makes the whole require nothing."""
    flat: list = []
    for p in parts:
        if isinstance(p, Has) and len(grams(p.text)) == 0:
            return ANYTHING
        if p == ANYTHING:
            return ANYTHING
        flat.extend(p.parts if isinstance(p, AnyOf) else [p])
    unique = tuple(dict.fromkeys(flat))
    return unique[0] if len(unique) == 1 else AnyOf(unique)


def equals(value: str) -> Requirement:
    """``col = value``."""
    return all_of([Has(START + value + END)])


def contains(text: str) -> Requirement:
    return all_of([Has(text)])


def starts_with(prefix: str) -> Requirement:
    return all_of([Has(START + prefix)])


def ends_with(suffix: str) -> Requirement:
    return all_of([Has(suffix + END)])


def like(pattern: str, escape: str = "\\") -> Requirement | None:
    """``col LIKE pattern`` (Spark's semantics: ``_`` one character, ``%`` any run, ``escape``
    before ``_``, ``%`` or itself); None when Spark would reject the pattern."""
    pieces: list[str] = []
    current: list[str] = []
    anchored_start = True
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            if i + 1 >= len(pattern) or pattern[i + 1] not in ("_", "%", escape):
                return None   # Spark raises: no pruning may hide that
            current.append(pattern[i + 1])
            i += 2
            continue
        if c in "_%":
            piece = "".join(current)
            pieces.append(START + piece if anchored_start else piece)
            current, anchored_start = [], False
        else:
            current.append(c)
        i += 1
    last = "".join(current)
    pieces.append((START if anchored_start else "") + last + END)
    return all_of([Has(p) for p in pieces])


# --- regular expressions (Java's syntax, the subset read the same way by Python) -------------
_SAFE_LETTER_ESCAPES = set("dDsSwWbBtnrfA")
_ATOMIC_GROUP = getattr(_sre, "ATOMIC_GROUP", None)          # Python 3.11+
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)} - {None}
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z-]*)[:)]")


def _java_compatible(pattern: str) -> bool:
    """Whether ``pattern`` uses only constructs that Java and Python parse alike (a construct
    read differently could make a literal look required that is not)."""
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 >= len(pattern):
                return False
            n = pattern[i + 1]
            if n == "x":
                if not re.fullmatch(r"[0-9a-fA-F]{2}", pattern[i + 2:i + 4]):
                    return False
                i += 4
                continue
            if n == "u":
                if not re.fullmatch(r"[0-9a-fA-F]{4}", pattern[i + 2:i + 6]):
                    return False
                i += 6
                continue
            if n.isalnum() and (n not in _SAFE_LETTER_ESCAPES or not n.isascii()):
                return False      # \Q, \p{..}, \h, \v, \e, \0, back references, ...
            i += 2
            continue
        if in_class:
            if c == "[" or pattern.startswith("&&", i):
                return False      # nested classes and intersections exist only in Java
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            j = i + 1 + (pattern[i + 1:i + 2] == "^")
            if pattern[j:j + 1] == "]":
                return False      # "[]" and "[^]" differ between the two
            i = j
            continue
        elif c == "{":
            m = _QUANTIFIER.match(pattern, i)
            if m is None:
                return False      # Java rejects a brace that is no quantifier
            i = m.end()
            continue
        elif c == "}":
            return False
        elif c == "(" and pattern.startswith("(?", i):
            m = _INLINE_FLAGS.match(pattern, i)
            if m is not None and not set(m.group(1)) <= set("imsu-"):
                return False      # x (comments) changes what is literal; d, U, a, L differ
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                return False      # named groups are spelled differently
            if pattern.startswith("(?P", i) or pattern.startswith("(?#", i):
                return False
        i += 1
    return not in_class


def regex(pattern: str) -> Requirement | None:
    """``col RLIKE pattern`` (Java's ``find``: a match anywhere in the value): what any match
    must contain; None when the pattern is outside the subset read the same way by Java and
    Python (then it prunes nothing)."""
    if not _java_compatible(pattern):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = _sre_parse.parse(pattern, 0)
    except (re.error, Warning, RecursionError, OverflowError):
        return None
    multiline = bool(parsed.state.flags & re.MULTILINE) or "m" in "".join(
        m.group(1) for m in _INLINE_FLAGS.finditer(pattern))
    return _sequence(list(parsed), not multiline)


def _sequence(items: list, may_anchor: bool) -> Requirement:
    """What a match of the concatenation ``items`` contains: each maximal run of literal
    characters, and what each other item requires."""
    parts: list = []
    run: list[str] = []
    anchored = False

    def flush() -> None:
        nonlocal anchored
        if run:
            parts.append(Has((START if anchored else "") + "".join(run)))
        run.clear()
        anchored = False

    for index, (op, arg) in enumerate(items):
        if op is _sre.LITERAL:
            run.append(chr(arg))
            continue
        flush()
        if op is _sre.AT and arg in (_sre.AT_BEGINNING, _sre.AT_BEGINNING_STRING) \
                and may_anchor and index == 0:
            anchored = True
            continue
        parts.append(_item(op, arg))
    flush()
    return all_of(parts)


def _item(op, arg) -> Requirement:
    if op is _sre.SUBPATTERN:
        return _sequence(list(arg[-1]), False)
    if op is _ATOMIC_GROUP:
        return _sequence(list(arg), False)
    if op in _REPEATS:
        low, _, body = arg
        return _sequence(list(body), False) if low >= 1 else ANYTHING
    if op is _sre.BRANCH:
        return any_of([_sequence(list(b), False) for b in arg[1]])
    if op is _sre.ASSERT:   # what a lookaround matches is text of the value too
        return _sequence(list(arg[1]), False)
    return ANYTHING   # classes, any character, anchors, look-behinds, negations, references
