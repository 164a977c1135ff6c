"""Java ``.properties`` files and Kafka-style ``${provider:...}`` references in them.

Users bring worker files written for Apache Kafka Connect, so the parser follows
``java.util.Properties.load`` rather than any Python ini dialect: a file that Java reads one way must
not read another way here (escaped separators, continuation lines and ``\\uXXXX`` escapes included).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from .classes import CONFIG_PROVIDERS
from .errors import ConfigError
from .references import VARIABLE

__all__ = ["PropertiesSyntaxError", "load_properties", "parse_properties", "substitute"]

#: Java treats exactly these as whitespace around keys and separators (not \v, not Unicode spaces).
_WHITESPACE = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """The text is not a valid properties file: Java rejects it too, so guessing would hide a typo."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(offset where it starts, logical line)`` pairs exactly as the JDK 9+ LineReader forms them.

    Lines end at \\n, \\r or \\r\\n. Leading space, tab and form feed are skipped. A line continues while
    it ends in an odd number of backslashes: that backslash is dropped and so is the next line's
    leading whitespace. Comments (``#`` or ``!``) and blank lines are skipped; a comment is recognised
    whenever nothing has been collected yet, so a continuation of a lone backslash can still open one.
    At end of input a pending continuation is dropped, and what was collected is kept even when it is
    empty, which is why a file ending in a lone backslash defines the empty key.
    """
    n = len(text)
    off = 0
    while off < n:
        buf: list[str] = []
        begin = off
        skip_whitespace = True
        appended_line_begin = False
        backslash = False
        while True:
            if off >= n:
                if buf:
                    yield begin, "".join(buf[:-1] if backslash else buf)
                return
            c = text[off]
            off += 1
            if skip_whitespace:
                if c in _WHITESPACE or (not appended_line_begin and c in "\r\n"):
                    continue
                skip_whitespace = False
                appended_line_begin = False
            if not buf and c in "#!":
                while off < n and text[off] not in "\r\n":
                    off += 1
                off += 1
                skip_whitespace = True
                continue
            if c not in "\r\n":
                if not buf:
                    begin = off - 1
                buf.append(c)
                backslash = c == "\\" and not backslash
                continue
            if not buf:
                skip_whitespace = True
                continue
            if off >= n:
                yield begin, "".join(buf[:-1] if backslash else buf)
                return
            if not backslash:
                yield begin, "".join(buf)
                break
            buf.pop()
            skip_whitespace = True
            appended_line_begin = True
            backslash = False
            if c == "\r":
                if off >= n:
                    yield begin, "".join(buf)
                    return
                if text[off] == "\n":
                    off += 1


def _line_number(text: str, offset: int) -> int:
    return len(re.findall(r"\r\n|\r|\n", text[:offset])) + 1


class _MalformedEscape(Exception):
    pass


def _unescape(raw: str) -> str:
    """Apply Java's loadConvert: ``\\t \\n \\r \\f \\uXXXX``; a backslash before any other char yields it."""
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        i += 1
        if ch != "\\":
            out.append(ch)
            continue
        if i >= n:
            # A lone trailing backslash was a line continuation and is already gone; keep the
            # function total anyway rather than index past the end.
            break
        ch = raw[i]
        i += 1
        if ch == "u":
            digits = raw[i : i + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise _MalformedEscape(f"malformed \\uXXXX escape '\\u{digits}'")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(ch, ch))
    result = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in result):
        # Java strings are UTF-16, so a supplementary character is written as two \\u escapes;
        # joining the surrogate halves gives the same text Java would hold.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result


def _split_key_value(logical: str) -> tuple[str, str]:
    """Find the end of the key (first unescaped ``=``, ``:`` or whitespace) and the start of the value."""
    n = len(logical)
    key_end = n
    value_start = n
    has_separator = False
    backslash = False
    for pos, ch in enumerate(logical):
        if not backslash and ch in "=:":
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if not backslash and ch in _WHITESPACE:
            key_end, value_start = pos, pos + 1
            break
        backslash = ch == "\\" and not backslash
    while value_start < n:
        ch = logical[value_start]
        if ch in _WHITESPACE:
            value_start += 1
        elif not has_separator and ch in "=:":
            has_separator = True
            value_start += 1
        else:
            break
    return logical[:key_end], logical[value_start:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text with ``java.util.Properties.load`` semantics; a later duplicate key wins."""
    result: dict[str, str] = {}
    for begin, logical in _logical_lines(text):
        raw_key, raw_value = _split_key_value(logical)
        try:
            result[_unescape(raw_key)] = _unescape(raw_value)
        except _MalformedEscape as exc:
            raise PropertiesSyntaxError(_line_number(text, begin), str(exc)) from None
    return result


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and parse a properties file.

    The file is decoded as UTF-8 and, if that fails, as ISO-8859-1, the way Java's
    ``PropertyResourceBundle`` does: ASCII files (the usual case, since non-ASCII is normally written
    as ``\\uXXXX``) read identically either way, and legacy Latin-1 files still load. A leading UTF-8
    byte-order mark is dropped; Java would make it part of the first key and then ignore that key.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text.removeprefix("\ufeff"))


# Kafka's ConfigTransformer grammar, the one connector configs use too (config_providers.py).
_REFERENCE = VARIABLE


def _providers(props: Mapping[str, str]) -> dict[str, str]:
    """Map provider names to the built-in implementation ("env" or "file") that resolves them.

    ``env`` and ``file`` are always on. A name declared in ``config.providers`` whose
    ``config.providers.<name>.class`` is one of Apache Kafka's env or file providers resolves the
    same way; a declared name with any other class is left alone, and so is its ``${...}``.
    """
    kinds = {"env": "env", "file": "file"}
    declared = [name.strip() for name in props.get("config.providers", "").split(",") if name.strip()]
    for name in declared:
        cls = props.get(f"config.providers.{name}.class", "").strip()
        kind = CONFIG_PROVIDERS.get(cls)
        if kind is None:
            kinds.pop(name, None)
        else:
            kinds[name] = kind
    return kinds


def substitute(props: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Resolve ``${env:NAME}`` and ``${file:PATH:KEY}`` references in property values.

    This is what Apache Kafka does for the providers named in ``config.providers``, except that
    kconnect always enables ``env`` (EnvVarConfigProvider) and ``file`` (FileConfigProvider) so that
    secrets can stay out of worker files without boilerplate. ``file`` reads PATH as a properties file
    and takes KEY from it. References to other providers are left untouched, as Kafka leaves those it
    does not know. Like Kafka, substitution is a single pass: resolved text is not scanned again, and
    the ``config.providers*`` keys that configure providers are not substituted.

    Unlike Kafka, which silently keeps the literal ``${...}`` when a variable or key is absent, a
    reference that cannot be resolved raises :class:`ConfigError` naming the key being resolved and
    the reference: a worker that starts with a literal ``${env:PASSWORD}`` as its password fails
    later and far less clearly.
    """
    kinds = _providers(props)
    files: dict[str, dict[str, str] | OSError | ValueError] = {}

    def load(path: str) -> dict[str, str] | OSError | ValueError:
        if path not in files:
            try:
                files[path] = load_properties(path)
            except (OSError, ValueError) as exc:
                files[path] = exc
        return files[path]

    def resolve(config_key: str, match: re.Match[str]) -> str:
        reference = match.group(0)
        kind = kinds.get(match["provider"])
        path, key = match["path"], match["key"]
        if kind == "env":
            if path is not None:
                raise ConfigError(config_key, reference, "an env reference must have the form ${env:NAME}")
            if key not in environ:
                raise ConfigError(
                    config_key, reference, f"must reference a set environment variable; {key} is not set"
                )
            return environ[key]
        if kind == "file":
            if path is None:
                raise ConfigError(
                    config_key, reference, "a file reference must have the form ${file:PATH:KEY}"
                )
            loaded = load(path)
            if isinstance(loaded, OSError):
                reason = loaded.strerror or str(loaded)
                raise ConfigError(config_key, reference, f"must reference a readable file; {path}: {reason}")
            if isinstance(loaded, ValueError):
                raise ConfigError(config_key, reference, f"must reference a valid properties file; {loaded}")
            if key not in loaded:
                raise ConfigError(
                    config_key, reference, f"must reference a key present in {path}; {key} is not"
                )
            return loaded[key]
        return reference

    def resolve_all(config_key: str, value: str) -> str:
        return _REFERENCE.sub(lambda match: resolve(config_key, match), value)

    result: dict[str, str] = {}
    for config_key, value in props.items():
        if (
            config_key == "config.providers"
            or config_key.startswith("config.providers.")
            or "${" not in value
        ):
            result[config_key] = value
        else:
            result[config_key] = resolve_all(config_key, value)
    return result
