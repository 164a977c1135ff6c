"""ConfigDef: Java's parsing rules, validator messages and validate() shape, as tables.

Expected messages are the texts an Apache Kafka Connect 3.9 worker returned for the same inputs.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from kconnect.runtime.codecs.java_json import java_double_str
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    CompositeValidator,
    ConfigDef,
    ConfigKey,
    ConfigValidationError,
    ConfigValue,
    Importance,
    LambdaValidator,
    ListSize,
    NonEmptyString,
    NonEmptyStringWithoutControlChars,
    NonNullValidator,
    Password,
    Range,
    Type,
    Validator,
    ValidList,
    ValidString,
    Width,
    convert_to_string,
    import_class,
    java_str,
    java_trim,
    parse_type,
)

# ---- parsing


@pytest.mark.parametrize(
    ("type_", "raw", "expected"),
    [
        (Type.BOOLEAN, "true", True),
        (Type.BOOLEAN, " TRUE ", True),
        (Type.BOOLEAN, "False", False),
        (Type.BOOLEAN, False, False),
        (Type.STRING, "  padded  ", "padded"),
        (Type.STRING, "", ""),
        (Type.STRING, "\t\n x \x00", "x"),
        (Type.INT, "42", 42),
        (Type.INT, " -7 ", -7),
        (Type.INT, "+3", 3),
        (Type.INT, 5, 5),
        (Type.INT, "2147483647", 2**31 - 1),
        (Type.SHORT, "-32768", -(2**15)),
        (Type.LONG, "9223372036854775807", 2**63 - 1),
        (Type.DOUBLE, "1.5", 1.5),
        (Type.DOUBLE, "1e3", 1000.0),
        (Type.DOUBLE, ".5", 0.5),
        (Type.DOUBLE, "2f", 2.0),
        (Type.DOUBLE, "-Infinity", -math.inf),
        (Type.DOUBLE, 3, 3.0),
        (Type.LIST, "a, b ,c", ["a", "b", "c"]),
        (Type.LIST, "", []),
        (Type.LIST, "   ", []),
        (Type.LIST, "a,,b, ", ["a", "", "b", ""]),
        (Type.LIST, ["x", "y"], ["x", "y"]),
        (Type.CLASS, "kconnect.runtime.plugins.config_def.ConfigDef", ConfigDef),
        (Type.CLASS, "kconnect.runtime.plugins.config_def:ConfigDef", ConfigDef),
        (Type.CLASS, ConfigDef, ConfigDef),
        (Type.PASSWORD, " s3cret ", Password("s3cret")),
        (Type.STRING, None, None),
    ],
)
def test_parse_type(type_: Type, raw: Any, expected: Any) -> None:
    assert parse_type("k", raw, type_) == expected


def test_parse_type_nan() -> None:
    assert math.isnan(parse_type("k", "NaN", Type.DOUBLE))


@pytest.mark.parametrize(
    ("type_", "raw", "message"),
    [
        (Type.INT, "abc", "Invalid value abc for configuration k: Not a number of type INT"),
        (Type.INT, "1_000", "Invalid value 1_000 for configuration k: Not a number of type INT"),
        (Type.INT, "1.0", "Invalid value 1.0 for configuration k: Not a number of type INT"),
        (Type.INT, "2147483648", "Invalid value 2147483648 for configuration k: Not a number of type INT"),
        (Type.SHORT, "40000", "Invalid value 40000 for configuration k: Not a number of type SHORT"),
        (Type.LONG, "", "Invalid value  for configuration k: Not a number of type LONG"),
        (Type.DOUBLE, "inf", "Invalid value inf for configuration k: Not a number of type DOUBLE"),
        (
            Type.BOOLEAN,
            "maybe",
            "Invalid value maybe for configuration k: Expected value to be either true or false",
        ),
        (Type.BOOLEAN, 1, "Invalid value 1 for configuration k: Expected value to be either true or false"),
        (
            Type.STRING,
            5,
            "Invalid value 5 for configuration k: Expected value to be a string, but it was a int",
        ),
        (
            Type.INT,
            1.5,
            "Invalid value 1.5 for configuration k: Expected value to be a 32-bit integer, but it "
            "was a float",
        ),
        (Type.LIST, 7, "Invalid value 7 for configuration k: Expected a comma separated list."),
        (
            Type.CLASS,
            "no.such.module.Thing",
            "Invalid value no.such.module.Thing for configuration k: Class no.such.module.Thing "
            "could not be found.",
        ),
        (Type.CLASS, 3, "Invalid value 3 for configuration k: Expected a Class instance or class name."),
    ],
)
def test_parse_type_errors(type_: Type, raw: Any, message: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        parse_type("k", raw, type_)
    assert str(info.value) == message
    assert info.value.name == "k"
    assert info.value.value == raw


def test_class_values_go_through_the_given_resolver() -> None:
    seen: list[str] = []

    def resolver(name: str) -> object:
        seen.append(name)
        if name == "known.Converter":
            return "resolved"
        raise LookupError(name)

    assert parse_type("k", " known.Converter ", Type.CLASS, resolver) == "resolved"
    with pytest.raises(ConfigValidationError, match=r"Class other\.Thing could not be found"):
        parse_type("k", "other.Thing", Type.CLASS, resolver)
    assert seen == ["known.Converter", "other.Thing"]


def test_import_class_rejects_what_does_not_import() -> None:
    assert import_class("kconnect.runtime.plugins.config_def.Range.at_least") == Range.at_least
    for name in ("nodots", "kconnect.runtime.plugins.config_def.Missing", "kconnect.nope.X", ":X"):
        with pytest.raises(LookupError):
            import_class(name)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.5, "0.5"),
        (100.0, "100.0"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (12345678.0, "1.2345678E7"),
        (1.5e-5, "1.5E-5"),
        (0.001, "0.001"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (-2.5e20, "-2.5E20"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_java_double_str(value: float, text: str) -> None:
    assert java_double_str(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (["a", "a"], "[a, a]"),
        ([], "[]"),
        (2.0, "2.0"),
        (Password("x"), "[hidden]"),
    ],
)
def test_java_str(value: Any, text: str) -> None:
    assert java_str(value) == text


def test_java_trim_strips_only_up_to_space() -> None:
    assert java_trim("\x01 a b \x1f") == "a b"
    assert java_trim("\u00a0a\u00a0") == "\u00a0a\u00a0"  # Java's trim keeps no-break spaces


@pytest.mark.parametrize(
    ("value", "type_", "text"),
    [
        (None, Type.STRING, None),
        (["a", "b"], Type.LIST, "a,b"),
        ([], Type.LIST, ""),
        (True, Type.BOOLEAN, "true"),
        (3, Type.INT, "3"),
        (2.0, Type.DOUBLE, "2.0"),
        (Password("secret"), Type.PASSWORD, "[hidden]"),
        (ConfigDef, Type.CLASS, "kconnect.runtime.plugins.config_def.ConfigDef"),
        ("org.example.Conv", Type.CLASS, "org.example.Conv"),
        ("x", None, "x"),
    ],
)
def test_convert_to_string(value: Any, type_: Type | None, text: str | None) -> None:
    assert convert_to_string(value, type_) == text


def test_password_never_shows_its_value() -> None:
    secret = Password("hunter2")
    assert "hunter2" not in f"{secret} {secret!r} {java_str(secret)}"
    assert secret.value == "hunter2"
    assert secret == Password("hunter2")
    assert secret != Password("other")


# ---- validators


@pytest.mark.parametrize(
    ("validator", "value", "message"),
    [
        (Range.at_least(1), 1, None),
        (Range.at_least(1), 0, "Invalid value 0 for configuration k: Value must be at least 1"),
        (Range.at_least(1), None, "Invalid value null for configuration k: Value must be non-null"),
        (Range.between(0, 10), 11, "Invalid value 11 for configuration k: Value must be no more than 10"),
        (Range.between(0.5, 1.5), 0.25, "Invalid value 0.25 for configuration k: Value must be at least 0.5"),
        (Range.between(0, 10), 10, None),
        (ValidString.in_("none", "all"), "all", None),
        (
            ValidString.in_("none", "all"),
            "ALL",
            "Invalid value ALL for configuration k: String must be one of: none, all",
        ),
        (CaseInsensitiveValidString.in_("required", "requested"), "ReQuired", None),
        (
            CaseInsensitiveValidString.in_("interval", "poll", "connector"),
            "bogus",
            "Invalid value bogus for configuration k: String must be one of (case insensitive): "
            "INTERVAL, POLL, CONNECTOR",
        ),
        (
            CaseInsensitiveValidString.in_("a"),
            None,
            "Invalid value null for configuration k: String must be one of (case insensitive): A",
        ),
        (ValidList.in_("a", "b"), ["a", "b", "a"], None),
        (
            ValidList.in_("a", "b"),
            ["a", "c"],
            "Invalid value c for configuration k: String must be one of: a, b",
        ),
        (NonEmptyString(), None, None),
        (NonEmptyString(), "", "Invalid value  for configuration k: String must be non-empty"),
        (NonEmptyStringWithoutControlChars(), None, None),
        (NonEmptyStringWithoutControlChars(), "a/b c", None),
        (
            NonEmptyStringWithoutControlChars(),
            "",
            "Invalid value  for configuration k: String may not be empty",
        ),
        (
            NonEmptyStringWithoutControlChars(),
            "a\x01b\x7f\x85",
            "Invalid value a\x01b\x7f\x85 for configuration k: String may not contain control "
            "sequences but had "
            "the following ASCII chars: 1, 127, 133",
        ),
        (NonNullValidator(), None, "Invalid value null for configuration k: entry must be non null"),
        (
            ListSize.at_most_of_size(2),
            ["a", "b", "c"],
            "Invalid value [a, b, c] for configuration k: exceeds maximum list size of [2].",
        ),
        (
            CompositeValidator.of(NonNullValidator(), Range.at_least(5)),
            3,
            "Invalid value 3 for configuration k: Value must be at least 5",
        ),
    ],
)
def test_validator(validator: Validator, value: Any, message: str | None) -> None:
    if message is None:
        validator.ensure_valid("k", value)
        return
    with pytest.raises(ConfigValidationError) as info:
        validator("k", value)
    assert str(info.value) == message
    assert info.value.allowed == str(validator)


@pytest.mark.parametrize(
    ("validator", "description"),
    [
        (Range.at_least(1), "[1,...]"),
        (Range.between(0, 10), "[0,...,10]"),
        (Range(None, 5), "[...,5]"),
        (Range(None, None), "[...]"),
        (Range.between(0.5, 2.0), "[0.5,...,2.0]"),
        (ValidString.in_("none", "all"), "[none, all]"),
        (
            CaseInsensitiveValidString.in_("required", "requested", "Required"),
            "(case insensitive) [REQUIRED, REQUESTED]",
        ),
        (ValidList.in_("x", "y"), "[x, y]"),
        (NonEmptyString(), "non-empty string"),
        (NonEmptyStringWithoutControlChars(), "non-empty string without ISO control characters"),
        (NonNullValidator(), "non-null string"),
        (ListSize.at_most_of_size(3), "List containing maximum of 3 elements"),
        (CompositeValidator.of(NonNullValidator(), Range.at_least(0)), "non-null string, [0,...]"),
        (LambdaValidator.with_(lambda name, value: None, "anything goes"), "anything goes"),
    ],
)
def test_validator_says_what_is_allowed(validator: Validator, description: str) -> None:
    assert str(validator) == description


# ---- ConfigDef


def _example() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            "name",
            Type.STRING,
            NO_DEFAULT,
            NonEmptyString(),
            Importance.HIGH,
            "who",
            group="G",
            order_in_group=1,
        )
        .define(
            "count", Type.INT, 1, Range.at_least(1), Importance.HIGH, "how many", group="G", order_in_group=2
        )
        .define("mode", Type.STRING, "a", ValidString.in_("a", "b"), Importance.LOW, "which")
        .define("items", Type.LIST, "", None, Importance.LOW, "list", group="Other")
        .define("secret", Type.PASSWORD, None, None, Importance.MEDIUM, "shh")
    )


def test_define_builds_keys_in_order_with_groups() -> None:
    config_def = _example()
    assert config_def.names() == ["name", "count", "mode", "items", "secret"]
    assert config_def.groups == ["G", "Other"]
    key = config_def.config_keys["mode"]
    assert key == ConfigKey(
        name="mode",
        type=Type.STRING,
        default="a",
        validator=key.validator,
        importance=Importance.LOW,
        documentation="which",
        group=None,
        order_in_group=-1,
        width=Width.NONE,
        display_name="mode",
    )
    assert config_def.config_keys["name"].required
    assert config_def.config_keys["items"].default == []
    assert config_def.default_values() == {"count": 1, "mode": "a", "items": [], "secret": None}


def test_define_rejects_a_key_twice_and_bad_defaults() -> None:
    with pytest.raises(ConfigValidationError, match=r"Configuration x is defined twice\."):
        ConfigDef().define("x", Type.INT, 1).define("x", Type.INT, 2)
    with pytest.raises(ConfigValidationError, match="Value must be at least 1"):
        ConfigDef().define("x", Type.INT, 0, Range.at_least(1))
    with pytest.raises(ConfigValidationError, match="Not a number of type INT"):
        ConfigDef().define("x", Type.INT, "zero")


def test_merged_with_lets_the_other_definition_win() -> None:
    base = ConfigDef().define("a", Type.INT, 1, group="G1").define("b", Type.INT, 2)
    other = ConfigDef().define("b", Type.STRING, "x", group="G2").define("c", Type.BOOLEAN, False)
    merged = base.merged_with(other)
    assert merged.names() == ["a", "b", "c"]
    assert merged.config_keys["b"].type is Type.STRING
    assert merged.groups == ["G1", "G2"]
    assert base.names() == ["a", "b"], "merging must not change the inputs"


def test_parse_returns_typed_values_with_defaults() -> None:
    values = _example().parse(
        {"name": " n ", "count": "3", "items": "x, y", "secret": "pw", "unknown": "kept out"}
    )
    assert values == {"name": "n", "count": 3, "mode": "a", "items": ["x", "y"], "secret": Password("pw")}


@pytest.mark.parametrize(
    ("props", "message", "name"),
    [
        ({}, 'Missing required configuration "name" which has no default value.', "name"),
        ({"name": ""}, "Invalid value  for configuration name: String must be non-empty", "name"),
        (
            {"name": "n", "count": "0"},
            "Invalid value 0 for configuration count: Value must be at least 1",
            "count",
        ),
        (
            {"name": "n", "mode": "c"},
            "Invalid value c for configuration mode: String must be one of: a, b",
            "mode",
        ),
    ],
)
def test_parse_raises_naming_key_value_and_allowed(props: dict[str, str], message: str, name: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        _example().parse(props)
    assert str(info.value) == message
    assert info.value.name == name
    if "Invalid value" in message:
        assert java_str(info.value.value) == props[name]
        assert info.value.allowed == str(_example().config_keys[name].validator)


def test_validate_collects_every_error_without_raising() -> None:
    results = _example().validate({"count": "abc", "mode": "c", "items": "p,q"})
    assert [r.name for r in results] == ["name", "count", "mode", "items", "secret"]
    by_name = {r.name: r for r in results}
    assert by_name["name"] == ConfigValue(
        "name", None, [], ['Missing required configuration "name" which has no default value.'], True
    )
    # A parse failure leaves the value null, and the validator then also complains about null: Java does both.
    assert by_name["count"].value is None
    assert by_name["count"].errors == [
        "Invalid value abc for configuration count: Not a number of type INT",
        "Invalid value null for configuration count: Value must be non-null",
    ]
    assert by_name["mode"].value == "c"
    assert by_name["mode"].errors == ["Invalid value c for configuration mode: String must be one of: a, b"]
    assert by_name["items"] == ConfigValue("items", ["p", "q"], [], [], True)
    assert by_name["secret"] == ConfigValue("secret", None, [], [], True)


def test_validate_reports_undefined_dependents() -> None:
    config_def = ConfigDef().define("a", Type.STRING, "x", dependents=["ghost"])
    by_name = config_def.validate_all({})
    assert by_name["ghost"] == ConfigValue(
        "ghost", None, [], ["ghost is referred in the dependents, but not defined."], False
    )
    with pytest.raises(ConfigValidationError, match="referred in the dependents, but not defined: ghost"):
        config_def.parse({})


class _ModeRecommender:
    def valid_values(self, name: str, parsed: dict[str, Any]) -> list[Any]:
        return ["fast", "safe"] if parsed.get("enabled") else []

    def visible(self, name: str, parsed: dict[str, Any]) -> bool:
        return bool(parsed.get("enabled"))


def test_validate_asks_recommenders_with_all_parsed_values() -> None:
    config_def = (
        ConfigDef()
        .define("mode", Type.STRING, "fast", recommender=_ModeRecommender())
        .define("enabled", Type.BOOLEAN, False, dependents=["mode"])
    )
    on = config_def.validate_all({"enabled": "true"})["mode"]
    assert (on.recommended_values, on.visible) == (["fast", "safe"], True)
    off = config_def.validate_all({})["mode"]
    assert (off.recommended_values, off.visible) == ([], False)
