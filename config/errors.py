"""The one error type for bad worker configuration.

Every configuration problem, whether a value of the wrong type, a failed cross-key check or an
unresolvable ``${provider:...}`` reference, surfaces as a :class:`ConfigError`, so the command line
can report it in one line and exit, and tests can assert on the key, value and constraint separately
instead of matching message text.
"""

from __future__ import annotations


def _one_line(text: str) -> str:
    """Escape control characters: a multi-line property value must not split a log line or message."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "".join(out)


class ConfigError(ValueError):
    """A worker configuration value is missing, malformed or inconsistent with another one.

    ``key`` is the configuration key at fault, ``value`` the offending value as written (``None``
    when a required key is absent) and ``allowed`` a phrase saying what the key accepts or why the
    value was refused. The wording of ``str()`` follows Apache Kafka's ``ConfigException`` so that
    operators who know one recognise the other.
    """

    key: str
    value: str | None
    allowed: str

    def __init__(self, key: str, value: str | None, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(self._message())

    @classmethod
    def missing(cls, key: str) -> ConfigError:
        """A required key has no value and no default."""
        return cls(key, None, "a value (the key is required and has no default)")

    def _message(self) -> str:
        if self.value is None:
            return f'Missing required configuration "{self.key}" which has no default value.'
        return (
            f"Invalid value '{_one_line(self.value)}' for configuration {_one_line(self.key)}: "
            f"{_one_line(self.allowed)}"
        )

    def __str__(self) -> str:
        return self._message()

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str | None, str]]:
        # Exceptions pickle through their args; ours has keyword-free positional state instead.
        return (type(self), (self.key, self.value, self.allowed))
