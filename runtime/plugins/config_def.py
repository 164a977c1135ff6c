"""Typed configuration definitions, parsing and validation with Apache Kafka's ``ConfigDef`` semantics.

Connector configs arrive as string maps over REST and from the config topic, and the validate endpoint
must answer with the same per-key error messages Apache Kafka Connect gives, so parsing rules (Java's
``trim``, ``Integer.parseInt``, comma-separated lists) and message texts follow Java's exactly. The
module is pure: no I/O, no knowledge of connectors.
"""

from __future__ import annotations

import enum
import importlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from kconnect.config.java_text import java_trim
from kconnect.runtime.codecs.java_json import java_double_str


class Type(enum.Enum):
    """Value types; the names are what the validate endpoint reports as ``type``."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(enum.Enum):
    """Java's ``ConfigDef.Importance``; kept so that ``importance`` in REST answers (validate, plugin
    config) says what Apache Kafka Connect says."""

    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(enum.Enum):
    """A UI hint Apache Kafka Connect reports as ``width``; kept so REST answers match."""

    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault:
    """Marks a key as required; a distinct object so that ``None`` can remain a real default."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()

_INT_RANGES: Final = {
    Type.SHORT: (-(2**15), 2**15 - 1),
    Type.INT: (-(2**31), 2**31 - 1),
    Type.LONG: (-(2**63), 2**63 - 1),
}
_INTEGER_TEXT: Final = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble accepts a type suffix (1.5d, 2f) and the words NaN and Infinity.
_DOUBLE_TEXT: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_COMMA_WITH_WHITESPACE: Final = re.compile(r"\s*,\s*")


class Password:
    """A secret value whose string form never reveals it, so it cannot leak into logs or REST answers."""

    HIDDEN: Final = "[hidden]"
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        """The secret itself, for the code that must use it (a client's settings): only this explicit read
        reveals it, never ``str`` or ``repr``."""
        return self._value

    def __str__(self) -> str:
        return self.HIDDEN

    def __repr__(self) -> str:
        return f"Password({self.HIDDEN})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def java_str(value: Any) -> str:
    """How Java's string concatenation renders a config value inside an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    if isinstance(value, type):
        return class_name(value)
    return str(value)


def class_name(value: Any) -> str:
    """The name a CLASS value is reported under: ``module.QualName`` for Python classes."""
    if isinstance(value, str):
        return value
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if module and qualname:
        return f"{module}.{qualname}"
    return str(value)


class ConfigValidationError(ValueError):
    """A config value that cannot be parsed or that a validator rejects (Java's ``ConfigException``).

    ``str(error)`` is exactly the message Apache Kafka Connect reports for the same problem, because
    these messages reach users verbatim through the validate endpoint.
    """

    def __init__(
        self,
        name: str | None = None,
        value: Any = None,
        reason: str | None = None,
        *,
        message: str | None = None,
        allowed: str | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.reason = reason
        self.allowed = allowed
        if message is None:
            message = f"Invalid value {java_str(value)} for configuration {name}"
            if reason is not None:
                message += f": {reason}"
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class Validator:
    """Checks one parsed value; ``str()`` says what is allowed, as Java's validators' ``toString``."""

    def ensure_valid(self, name: str, value: Any) -> None:
        """Raise ConfigValidationError for a value this rule rejects, in Java's words, since the message
        reaches users verbatim through the validate endpoint.

        Subclasses implement it. ``None`` reaches it too: an unset optional key, or a value that failed to
        parse.
        """
        raise NotImplementedError

    def __call__(self, name: str, value: Any) -> None:
        self.ensure_valid(name, value)

    def _fail(self, name: str, value: Any, reason: str) -> ConfigValidationError:
        return ConfigValidationError(name, value, reason, allowed=str(self))


def _number_str(n: float) -> str:
    return java_double_str(n) if isinstance(n, float) else str(n)


class Range(Validator):
    """A numeric range; null is rejected because Java's Range rejects it too."""

    def __init__(self, minimum: float | None, maximum: float | None) -> None:
        self.minimum = minimum
        self.maximum = maximum

    @classmethod
    def at_least(cls, minimum: float) -> Range:
        """Java's ``Range.atLeast``, under its name, so definitions read as the Java ones they mirror."""
        return cls(minimum, None)

    @classmethod
    def between(cls, minimum: float, maximum: float) -> Range:
        """Java's ``Range.between``, under its name, so definitions read as the Java ones they mirror."""
        return cls(minimum, maximum)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject null and values outside the bounds with Java's messages, bounds printed as Java prints
        numbers (``1.0`` for a double)."""
        if value is None:
            raise self._fail(name, None, "Value must be non-null")
        if self.minimum is not None and value < self.minimum:
            raise self._fail(name, value, f"Value must be at least {_number_str(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise self._fail(name, value, f"Value must be no more than {_number_str(self.maximum)}")

    def __str__(self) -> str:
        lo = None if self.minimum is None else _number_str(self.minimum)
        hi = None if self.maximum is None else _number_str(self.maximum)
        if lo is None and hi is None:
            return "[...]"
        if lo is None:
            return f"[...,{hi}]"
        if hi is None:
            return f"[{lo},...]"
        return f"[{lo},...,{hi}]"


class ValidString(Validator):
    """One of a fixed set of strings, compared case-sensitively."""

    def __init__(self, valid: Sequence[str]) -> None:
        self.valid = list(valid)

    @classmethod
    def in_(cls, *valid: str) -> ValidString:
        """Java's ``ValidString.in`` (``in`` is a Python keyword, hence the underscore)."""
        return cls(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject anything outside the set, compared case-sensitively, with Java's message listing the
        allowed strings."""
        if value not in self.valid:
            raise self._fail(name, value, "String must be one of: " + ", ".join(self.valid))

    def __str__(self) -> str:
        return "[" + ", ".join(self.valid) + "]"


class CaseInsensitiveValidString(Validator):
    """One of a fixed set of strings, ignoring case; the set is listed upper-cased, as Java lists it."""

    def __init__(self, valid: Sequence[str]) -> None:
        self.valid: list[str] = []
        for v in valid:
            upper = v.upper()
            if upper not in self.valid:
                self.valid.append(upper)

    @classmethod
    def in_(cls, *valid: str) -> CaseInsensitiveValidString:
        """Java's ``CaseInsensitiveValidString.in`` (``in`` is a Python keyword)."""
        return cls(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject a non-string, or a string whose upper-case form is not in the set, with Java's "(case
        insensitive)" message."""
        if not isinstance(value, str) or value.upper() not in self.valid:
            allowed = ", ".join(self.valid)
            raise self._fail(name, value, f"String must be one of (case insensitive): {allowed}")

    def __str__(self) -> str:
        return "(case insensitive) [" + ", ".join(self.valid) + "]"


class ValidList(Validator):
    """A list whose every element is one of a fixed set of strings."""

    def __init__(self, valid: Sequence[str]) -> None:
        self.valid_string = ValidString(valid)

    @classmethod
    def in_(cls, *valid: str) -> ValidList:
        """Java's ``ValidList.in`` (``in`` is a Python keyword)."""
        return cls(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Check each element against the set, so that the error names the first bad element as Java's
        does, not the whole list; an unset list passes."""
        for element in value or ():
            self.valid_string.ensure_valid(name, element)

    def __str__(self) -> str:
        return str(self.valid_string)


class NonEmptyString(Validator):
    """Rejects the empty string but lets null through, so optional keys can still be left unset."""

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject ``""`` with Java's message; null passes (see the class)."""
        if value is not None and value == "":
            raise self._fail(name, value, "String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


def _is_iso_control(code_point: int) -> bool:
    return code_point <= 0x1F or 0x7F <= code_point <= 0x9F


class NonEmptyStringWithoutControlChars(Validator):
    """What Apache Kafka Connect demands of connector names: non-empty, no ISO control characters."""

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject an empty string, or one holding ISO control characters (their code points listed), in
        Java's words; null passes, left to the required-key check."""
        if value is None:
            return
        if value == "":
            raise self._fail(name, value, "String may not be empty")
        found = [ord(c) for c in value if _is_iso_control(ord(c))]
        if found:
            raise self._fail(
                name,
                value,
                "String may not contain control sequences but had the following ASCII chars: "
                + ", ".join(str(c) for c in found),
            )

    def __str__(self) -> str:
        return "non-empty string without ISO control characters"


class NonNullValidator(Validator):
    """Java's ``NonNullValidator``: rejects null only. The connector config composes it with the alias
    checks of ``transforms`` and ``predicates``, where an explicit null must be an error."""

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject null with Java's message, which quotes the value as the string ``null``."""
        if value is None:
            # Java passes the literal string "null" as the value here; the message is the same.
            raise self._fail(name, "null", "entry must be non null")

    def __str__(self) -> str:
        return "non-null string"


class ListSize(Validator):
    """Java's ``ListSize``: caps how many elements a list key may hold, with Java's message."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size

    @classmethod
    def at_most_of_size(cls, max_size: int) -> ListSize:
        """Java's ``ListSize.atMostOfSize``, under its name."""
        return cls(max_size)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Reject a list longer than the cap; null passes."""
        if value is not None and len(value) > self.max_size:
            raise self._fail(name, value, f"exceeds maximum list size of [{self.max_size}].")

    def __str__(self) -> str:
        return f"List containing maximum of {self.max_size} elements"


class CompositeValidator(Validator):
    """Runs validators in order and stops at the first failure, as Java's CompositeValidator."""

    def __init__(self, validators: Sequence[Validator]) -> None:
        self.validators = list(validators)

    @classmethod
    def of(cls, *validators: Validator) -> CompositeValidator:
        """Java's ``CompositeValidator.of``, under its name."""
        return cls(validators)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Run each validator in order; the first failure propagates with ``allowed`` set to the whole
        rule, since the key's answer says what is allowed for it, not for one part."""
        try:
            for v in self.validators:
                v.ensure_valid(name, value)
        except ConfigValidationError as exc:
            exc.allowed = str(self)  # the whole rule, not just the part that failed
            raise

    def __str__(self) -> str:
        return ", ".join(str(v) for v in self.validators)


class LambdaValidator(Validator):
    """A validator from a function, for one-off rules; the function raises ConfigValidationError."""

    def __init__(self, check: Callable[[str, Any], None], description: str) -> None:
        self.check = check
        self.description = description

    @classmethod
    def with_(cls, check: Callable[[str, Any], None], description: str) -> LambdaValidator:
        """Java's ``LambdaValidator.with`` (``with`` is a Python keyword)."""
        return cls(check, description)

    def ensure_valid(self, name: str, value: Any) -> None:
        """Call the function, which raises ConfigValidationError itself and so chooses its own message."""
        self.check(name, value)

    def __str__(self) -> str:
        return self.description


class Recommender(Protocol):
    """Suggests values for a key and says whether it applies, given the other parsed values."""

    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]:
        """The values to offer for ``name`` given the other keys' parsed values (Java's ``validValues``);
        the validate endpoint reports them as ``recommended_values``."""
        ...

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool:
        """Whether ``name`` applies given the other parsed values (Java's ``visible``), reported so that a
        UI can hide keys that do not apply."""
        ...


ClassResolver = Callable[[str], object]


def import_class(name: str) -> object:
    """Resolve ``package.module.Name`` (or ``package.module:Name``) by importing it.

    Nested names (``module.Outer.Inner``) work: the longest importable module prefix is used.
    Raises LookupError when nothing importable has that name, which parsing reports as Java's
    "Class X could not be found."
    """
    module_name, sep, attr = name.partition(":")
    if sep:
        candidates = [(module_name, attr.split("."))]
    else:
        parts = name.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    for module_name, attrs in candidates:
        if not module_name or not all(attrs):
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue  # this prefix is not a module: try a shorter one
            raise LookupError(name) from exc
        except ImportError as exc:
            raise LookupError(name) from exc
        obj: object = module
        for part in attrs:
            if not hasattr(obj, part):
                raise LookupError(name)
            obj = getattr(obj, part)
        return obj
    raise LookupError(name)


def parse_type(name: str, value: Any, type_: Type, class_resolver: ClassResolver = import_class) -> Any:
    """Convert a raw value (usually a string) to the key's type, with Java's parsing rules."""
    if value is None:
        return None
    trimmed = java_trim(value) if isinstance(value, str) else None
    kind = type(value).__name__
    if type_ is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if trimmed is not None and trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise ConfigValidationError(name, value, "Expected value to be either true or false")
    if type_ is Type.PASSWORD:
        if isinstance(value, Password):
            return value
        if trimmed is not None:
            return Password(trimmed)
        raise ConfigValidationError(name, value, f"Expected value to be a string, but it was a {kind}")
    if type_ is Type.STRING:
        if trimmed is not None:
            return trimmed
        raise ConfigValidationError(name, value, f"Expected value to be a string, but it was a {kind}")
    if type_ in _INT_RANGES:
        lo, hi = _INT_RANGES[type_]
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif trimmed is not None and _INTEGER_TEXT.fullmatch(trimmed):
            number = int(trimmed)
        elif trimmed is not None:
            raise ConfigValidationError(name, value, f"Not a number of type {type_.value}")
        else:
            expected = {Type.SHORT: "a 16-bit integer (short)", Type.INT: "a 32-bit integer"}
            what = expected.get(type_, "a 64-bit integer (long)")
            raise ConfigValidationError(name, value, f"Expected value to be {what}, but it was a {kind}")
        if not lo <= number <= hi:
            raise ConfigValidationError(name, value, f"Not a number of type {type_.value}")
        return number
    if type_ is Type.DOUBLE:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if trimmed is not None and _DOUBLE_TEXT.fullmatch(trimmed):
            text = trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed
            return float(text.replace("Infinity", "inf"))
        if trimmed is not None:
            raise ConfigValidationError(name, value, "Not a number of type DOUBLE")
        raise ConfigValidationError(name, value, f"Expected value to be a double, but it was a {kind}")
    if type_ is Type.LIST:
        if isinstance(value, list | tuple):
            return list(value)
        if trimmed is not None:
            return [] if not trimmed else _COMMA_WITH_WHITESPACE.split(trimmed)
        raise ConfigValidationError(name, value, "Expected a comma separated list.")
    if type_ is Type.CLASS:
        if isinstance(value, type):
            return value
        if trimmed is not None:
            try:
                return class_resolver(trimmed)
            except LookupError:
                raise ConfigValidationError(name, value, f"Class {value} could not be found.") from None
        raise ConfigValidationError(name, value, "Expected a Class instance or class name.")
    raise AssertionError(f"unknown type {type_}")  # pragma: no cover - the enum is closed


def convert_to_string(value: Any, type_: Type | None) -> str | None:
    """Render a parsed value the way Java's ``ConfigDef.convertToString`` does (REST ``value`` fields)."""
    if value is None:
        return None
    if type_ is Type.LIST or (type_ is None and isinstance(value, list | tuple)):
        return ",".join(java_str(v) for v in value)
    if type_ is Type.CLASS:
        return class_name(value)
    return java_str(value)


@dataclass(frozen=True)
class ConfigKey:
    """One defined key. ``default`` is stored parsed; ``NO_DEFAULT`` makes the key required."""

    name: str
    type: Type
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    documentation: str | None = ""
    group: str | None = None
    order_in_group: int = -1
    width: Width = Width.NONE
    display_name: str | None = None
    dependents: tuple[str, ...] = ()
    recommender: Recommender | None = None
    internal: bool = False

    def __post_init__(self) -> None:
        if self.display_name is None:
            object.__setattr__(self, "display_name", self.name)
        object.__setattr__(self, "dependents", tuple(self.dependents))
        if self.has_default:
            # A bad default is a programming error, found at definition time as Java finds it.
            parsed = parse_type(self.name, self.default, self.type, _keep_class_name)
            object.__setattr__(self, "default", parsed)
            if self.validator is not None:
                self.validator.ensure_valid(self.name, parsed)

    @property
    def has_default(self) -> bool:
        """Whether the key has a default and so may be left unset; ``None`` is a real default, which is why
        NO_DEFAULT exists."""
        return self.default is not NO_DEFAULT

    @property
    def required(self) -> bool:
        """The opposite of ``has_default``: a required key left unset is Java's "Missing required
        configuration" error."""
        return not self.has_default


def _keep_class_name(name: str) -> object:
    return name


@dataclass
class ConfigValue:
    """The validation outcome for one key; errors are collected rather than raised."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def add_error(self, message: str) -> None:
        """Record one more problem with this key: validation goes on after an error so that every problem
        is reported at once, as Java's ``addErrorMessage`` does."""
        self.errors.append(message)


class ConfigDef:
    """An ordered set of ConfigKeys with Java's ``parse`` (first error raises) and ``validate`` (collects)."""

    def __init__(self, base: ConfigDef | None = None) -> None:
        self._keys: dict[str, ConfigKey] = dict(base._keys) if base else {}
        self._groups: list[str] = list(base._groups) if base else []

    def define(
        self,
        name: str,
        type: Type,
        default: Any = NO_DEFAULT,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        documentation: str | None = "",
        *,
        group: str | None = None,
        order_in_group: int = -1,
        width: Width = Width.NONE,
        display_name: str | None = None,
        dependents: Iterable[str] = (),
        recommender: Recommender | None = None,
        internal: bool = False,
    ) -> ConfigDef:
        """Add a key from its parts: Java's ``define`` overloads as one signature with keyword arguments.
        Returns ``self`` so definitions chain as in Java; a bad default or a key defined twice raises here,
        at definition time."""
        return self.define_key(
            ConfigKey(
                name=name,
                type=type,
                default=default,
                validator=validator,
                importance=importance,
                documentation=documentation,
                group=group,
                order_in_group=order_in_group,
                width=width,
                display_name=display_name,
                dependents=tuple(dependents),
                recommender=recommender,
                internal=internal,
            )
        )

    def define_key(self, key: ConfigKey) -> ConfigDef:
        """Add a ready-made ConfigKey (how the connector config copies a transformation's keys under its
        prefix); a name already defined is an error, as in Java."""
        if key.name in self._keys:
            raise ConfigValidationError(message=f"Configuration {key.name} is defined twice.")
        return self._put(key)

    def _put(self, key: ConfigKey) -> ConfigDef:
        if key.group is not None and key.group not in self._groups:
            self._groups.append(key.group)
        self._keys[key.name] = key
        return self

    def merged_with(self, other: ConfigDef) -> ConfigDef:
        """A new definition with ``other``'s keys added; where both define a key, ``other`` wins."""
        merged = ConfigDef(self)
        for key in other._keys.values():
            merged._put(key)
        return merged

    @property
    def config_keys(self) -> Mapping[str, ConfigKey]:
        """The keys by name in definition order, typed read-only so that keys are only added through
        ``define``/``define_key`` and their duplicate check."""
        return self._keys

    @property
    def groups(self) -> list[str]:
        """The groups in the order their first key was defined, the order in which the validate endpoint
        lists them, as Java's does."""
        return list(self._groups)

    def names(self) -> list[str]:
        """Every key name in definition order (Java's ``ConfigDef.names``)."""
        return list(self._keys)

    def default_values(self) -> dict[str, Any]:
        """The parsed default of every key that has one (Java's ``defaultValues``): a config's values
        before any property is given."""
        return {k.name: k.default for k in self._keys.values() if k.has_default}

    def _undefined_dependents(self) -> list[str]:
        seen: list[str] = []
        for key in self._keys.values():
            for dependent in key.dependents:
                if dependent not in self._keys and dependent not in seen:
                    seen.append(dependent)
        return seen

    def parse(
        self, props: Mapping[str, Any], *, class_resolver: ClassResolver = import_class
    ) -> dict[str, Any]:
        """Parse and validate every key; the first problem raises ConfigValidationError."""
        undefined = self._undefined_dependents()
        if undefined:
            raise ConfigValidationError(
                message="Some configurations in are referred in the dependents, but not defined: "
                + ",".join(undefined)
            )
        values: dict[str, Any] = {}
        for key in self._keys.values():
            if key.name in props:
                parsed = parse_type(key.name, props[key.name], key.type, class_resolver)
            elif key.required:
                raise ConfigValidationError(
                    key.name,
                    None,
                    message=f'Missing required configuration "{key.name}" which has no default value.',
                )
            else:
                parsed = key.default
            if key.validator is not None:
                key.validator.ensure_valid(key.name, parsed)
            values[key.name] = parsed
        return values

    def validate(
        self, props: Mapping[str, Any], *, class_resolver: ClassResolver = import_class
    ) -> list[ConfigValue]:
        """Every key's outcome in definition order, never raising (Java's ``ConfigDef.validate``)."""
        return list(self.validate_all(props, class_resolver=class_resolver).values())

    def validate_all(
        self, props: Mapping[str, Any], *, class_resolver: ClassResolver = import_class
    ) -> dict[str, ConfigValue]:
        """Java's ``validateAll``: every key's ConfigValue by name, so a caller can add a cross-key problem
        to the key to blame before answering (the connector validation and JDBC do)."""
        results = {name: ConfigValue(name) for name in self._keys}
        for undefined in self._undefined_dependents():
            message = f"{undefined} is referred in the dependents, but not defined."
            results[undefined] = ConfigValue(undefined, errors=[message], visible=False)
        parsed: dict[str, Any] = {}
        for key in self._keys.values():
            result = results[key.name]
            value: Any = None
            if key.name in props:
                try:
                    value = parse_type(key.name, props[key.name], key.type, class_resolver)
                except ConfigValidationError as exc:
                    result.add_error(str(exc))
            elif key.required:
                result.add_error(f'Missing required configuration "{key.name}" which has no default value.')
            else:
                value = key.default
            # As in Java the validator runs even after a parse failure, on null: that is why a bad
            # tasks.max reports both "Not a number of type INT" and "Value must be non-null".
            if key.validator is not None:
                try:
                    key.validator.ensure_valid(key.name, value)
                except ConfigValidationError as exc:
                    result.add_error(str(exc))
            result.value = value
            parsed[key.name] = value
        for key in self._keys.values():
            if key.recommender is None:
                continue
            result = results[key.name]
            try:
                recommended = list(key.recommender.valid_values(key.name, parsed))
                if result.recommended_values:
                    recommended = [v for v in recommended if v in result.recommended_values]
                result.recommended_values = recommended
                result.visible = key.recommender.visible(key.name, parsed)
            except ConfigValidationError as exc:
                result.add_error(str(exc))
        return results
