"""The .properties parser must read a file exactly as java.util.Properties does, and the
${env:...} / ${file:...} substitution must resolve or fail loudly, naming the key and the reference."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.config.errors import ConfigError
from kconnect.config.properties import PropertiesSyntaxError, load_properties, parse_properties, substitute

PARSE_CASES = [
    # comments and blank lines
    ("hash comment", "# a comment\nk=v\n", {"k": "v"}),
    ("bang comment", "! a comment\nk=v", {"k": "v"}),
    ("indented comment", "   \t# indented\nk=v", {"k": "v"}),
    ("hash inside value is literal", "k=a#b", {"k": "a#b"}),
    ("blank and whitespace lines", "\n   \n\t\f\nk=v\n\n", {"k": "v"}),
    ("empty text", "", {}),
    # separators
    ("equals", "k=v", {"k": "v"}),
    ("colon", "k:v", {"k": "v"}),
    ("whitespace", "k v", {"k": "v"}),
    ("tab", "k\tv", {"k": "v"}),
    ("spaces around equals", "k   =   v", {"k": "v"}),
    ("whitespace then colon", "k \t: v", {"k": "v"}),
    ("only the first separator counts", "k = = v", {"k": "= v"}),
    ("colon after equals is value", "k=:v", {"k": ":v"}),
    ("key without value", "lonely", {"lonely": ""}),
    ("key with separator only", "k=", {"k": ""}),
    ("empty key", "=v", {"": "v"}),
    ("leading whitespace skipped", "   \t k=v", {"k": "v"}),
    ("trailing whitespace kept", "k=v  \t", {"k": "v  \t"}),
    ("vertical tab is not whitespace", "k\x0b=v", {"k\x0b": "v"}),
    # escapes
    ("tab newline return formfeed", r"k=a\tb\nc\rd\fe", {"k": "a\tb\nc\rd\fe"}),
    ("escaped backslash", r"k=a\\b", {"k": "a\\b"}),
    ("escaped separators in key", r"a\=b\:c\ d=v", {"a=b:c d": "v"}),
    ("escaped hash starts no comment", r"\#k=v", {"#k": "v"}),
    ("unknown escape yields the char", r"k=\q\z\"", {"k": 'qz"'}),
    ("unicode escape", r"k=\u0041\u00e9\u20AC", {"k": "Aé€"}),
    ("unicode escape in key", r"\u006b=v", {"k": "v"}),
    ("surrogate pair joins", r"k=\uD83D\uDE00", {"k": "\U0001f600"}),
    ("literal non-ascii", "clé=välue", {"clé": "välue"}),
    ("escaped leading space in value", r"k=\ \ v", {"k": "  v"}),
    # continuation lines
    ("continuation", "k=a\\\n  b", {"k": "ab"}),
    ("continuation keeps inner whitespace", "k=a \\\n   b", {"k": "a b"}),
    ("even backslashes do not continue", "k=a\\\\\nb=c", {"k": "a\\", "b": "c"}),
    ("odd backslashes continue", "k=a\\\\\\\nb", {"k": "a\\b"}),
    ("continued line starting with hash is content", "k=a\\\n  #b", {"k": "a#b"}),
    ("comment line does not continue", "# c \\\nk=v", {"k": "v"}),
    ("continuation into empty line ends", "k=a\\\n\nb=c", {"k": "a", "b": "c"}),
    ("continuation at end of input", "k=a\\", {"k": "a"}),
    ("continuation across key", "ke\\\n  y=v", {"key": "v"}),
    ("crlf line endings", "a=1\r\nb=2\\\r\n  3\r\n", {"a": "1", "b": "23"}),
    ("cr line endings", "a=1\rb=2\\\r 3", {"a": "1", "b": "23"}),
    ("lone backslash at end of input is the empty key", "k=v\n\\", {"k": "v", "": ""}),
    ("lone backslash then comment", "\\\n# comment\nk=v", {"k": "v"}),
    # duplicates
    ("last duplicate wins", "k=1\nk=2\nk:3", {"k": "3"}),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES])
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "line"),
    [("k=\\u12G4", 1), ("a=1\n\nb=\\u00", 3), ("a=1\r\nb=x\\\r\n  \\u", 2), ("\\uXYZW=v", 1)],
)
def test_malformed_unicode_escape_names_the_line(text: str, line: int) -> None:
    with pytest.raises(PropertiesSyntaxError, match=rf"^line {line}: malformed \\uXXXX escape") as info:
        parse_properties(text)
    assert info.value.line == line


def test_load_properties_reads_utf8_strips_bom_and_falls_back_to_latin1(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("\ufeffname=Zoë\n".encode())
    assert load_properties(utf8) == {"name": "Zoë"}
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=Zoë\n".encode("iso-8859-1"))
    assert load_properties(str(latin1)) == {"name": "Zoë"}


# --- round trip -----------------------------------------------------------------------------------


def _escape(text: str, *, key: bool, escape_unicode: bool) -> str:
    """Escape like java.util.Properties.store: what a correct writer emits must parse back unchanged."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == " ":
            out.append("\\ " if key or i == 0 else " ")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif escape_unicode and not 0x20 <= ord(ch) <= 0x7E:
            encoded = ch.encode("utf-16-be")
            out.extend(
                f"\\u{int.from_bytes(encoded[j : j + 2], 'big'):04X}" for j in range(0, len(encoded), 2)
            )
        else:
            out.append(ch)
    return "".join(out)


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)


@settings(max_examples=300)
@given(
    props=st.dictionaries(_TEXT, _TEXT, max_size=8),
    escape_unicode=st.booleans(),
    separator=st.sampled_from(["=", ":", " ", " = ", "\t:\t"]),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_escaped_dictionary_round_trips(
    props: dict[str, str], escape_unicode: bool, separator: str, newline: str
) -> None:
    lines = ["# written by the test", ""]
    lines += [
        _escape(k, key=True, escape_unicode=escape_unicode)
        # The empty key needs a visible separator: with only whitespace the line is blank.
        + (separator if k or separator.strip() else "=")
        + _escape(v, key=False, escape_unicode=escape_unicode)
        for k, v in props.items()
    ]
    assert parse_properties(newline.join(lines) + newline) == props


# --- substitution ---------------------------------------------------------------------------------


@pytest.fixture
def secrets_file(tmp_path: Path) -> Path:
    path = tmp_path / "secrets.properties"
    path.write_text("db.password=s3cr:et\nempty=\n# comment\nkey\\:with\\:colons=x\n", encoding="utf-8")
    return path


ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
SUBSTITUTION_CASES = [
    ("no references", {"a": "plain"}, {"a": "plain"}),
    ("env", {"a": "${env:HOME_DIR}"}, {"a": "/home/kc"}),
    ("env inside text", {"a": "x-${env:HOME_DIR}-y"}, {"a": "x-/home/kc-y"}),
    ("two references", {"a": "${env:USER}@${env:HOME_DIR}"}, {"a": "kc@/home/kc"}),
    ("empty env value", {"a": "${env:EMPTY}"}, {"a": ""}),
    ("file", {"a": "${file:SECRETS:db.password}"}, {"a": "s3cr:et"}),
    ("file key with colons", {"a": "${file:SECRETS:key:with:colons}"}, {"a": "x"}),
    ("file empty value", {"a": "${file:SECRETS:empty}"}, {"a": ""}),
    ("unknown provider left as is", {"a": "${vault:secret/db:pw}"}, {"a": "${vault:secret/db:pw}"}),
    (
        "not a reference",
        {"a": "${nocolon} and $env:X and {env:X}"},
        {"a": "${nocolon} and $env:X and {env:X}"},
    ),
    ("no recursion", {"a": "${env:REF}"}, {"a": "${env:USER}"}),
    (
        "declared alias of the env provider",
        {"config.providers": "myenv", "config.providers.myenv.class": ENV_PROVIDER, "a": "${myenv:USER}"},
        {"config.providers": "myenv", "config.providers.myenv.class": ENV_PROVIDER, "a": "kc"},
    ),
    (
        "redeclared name with an unknown class is left alone",
        {"config.providers": "env", "config.providers.env.class": "com.example.Vault", "a": "${env:USER}"},
        {"config.providers": "env", "config.providers.env.class": "com.example.Vault", "a": "${env:USER}"},
    ),
    (
        "provider settings are not substituted",
        {"config.providers.file.param.x": "${env:USER}", "a": "${env:USER}"},
        {"config.providers.file.param.x": "${env:USER}", "a": "kc"},
    ),
]

ENVIRON = {"HOME_DIR": "/home/kc", "USER": "kc", "EMPTY": "", "REF": "${env:USER}"}


@pytest.mark.parametrize(
    ("props", "expected"), [c[1:] for c in SUBSTITUTION_CASES], ids=[c[0] for c in SUBSTITUTION_CASES]
)
def test_substitute(props: dict[str, str], expected: dict[str, str], secrets_file: Path) -> None:
    props = {k: v.replace("SECRETS", str(secrets_file)) for k, v in props.items()}
    assert substitute(props, ENVIRON) == expected


def test_substitute_does_not_modify_its_input() -> None:
    props = {"a": "${env:USER}"}
    substitute(props, ENVIRON)
    assert props == {"a": "${env:USER}"}


@pytest.mark.parametrize(
    ("value", "reference", "reason"),
    [
        ("${env:NOPE}", "${env:NOPE}", "must reference a set environment variable; NOPE is not set"),
        ("pre ${env:NOPE} post", "${env:NOPE}", "must reference a set environment variable; NOPE is not set"),
        ("${env:x:NOPE}", "${env:x:NOPE}", "an env reference must have the form ${env:NAME}"),
        (
            "${file:SECRETS:nope}",
            "${file:SECRETS:nope}",
            "must reference a key present in SECRETS; nope is not",
        ),
        (
            "${file:MISSING:k}",
            "${file:MISSING:k}",
            "must reference a readable file; MISSING: No such file or directory",
        ),
        ("${file:SECRETS}", "${file:SECRETS}", "a file reference must have the form ${file:PATH:KEY}"),
        (
            "${file:BAD:k}",
            "${file:BAD:k}",
            "must reference a valid properties file; line 2: malformed \\uXXXX escape",
        ),
    ],
)
def test_unresolvable_reference_names_key_and_reference(
    value: str, reference: str, reason: str, secrets_file: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("ok=1\nk=\\u12\n", encoding="utf-8")
    paths = {"SECRETS": str(secrets_file), "MISSING": str(tmp_path / "missing.properties"), "BAD": str(bad)}
    for name, path in paths.items():
        value, reference, reason = (s.replace(name, path) for s in (value, reference, reason))
    with pytest.raises(ConfigError) as info:
        substitute({"ssl.key.password": value}, ENVIRON)
    error = info.value
    assert (error.key, error.value) == ("ssl.key.password", reference)
    assert error.allowed.startswith(reason)
    assert str(error).startswith(f"Invalid value '{reference}' for configuration ssl.key.password: {reason}")


# --- differential check against the JDK ---------------------------------------------------------

_JAVA_DUMP = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
public class PropsDump {
  static String hex(String s) {
    StringBuilder b = new StringBuilder();
    for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
    return b.toString();
  }
  public static void main(String[] a) throws Exception {
    String all = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
    for (String doc : all.split("\u0000", -1)) {
      Properties p = new Properties();
      StringBuilder out = new StringBuilder();
      try {
        p.load(new StringReader(doc));
        TreeMap<String, String> m = new TreeMap<>();
        for (String k : p.stringPropertyNames()) m.put(k, p.getProperty(k));
        for (Map.Entry<String, String> e : m.entrySet())
          out.append(hex(e.getKey())).append('=').append(hex(e.getValue())).append(',');
      } catch (IllegalArgumentException e) { out.append("ERROR"); }
      System.out.println(out);
    }
  }
}
"""


def _utf16_hex(text: str) -> str:
    data = text.encode("utf-16-be", "surrogatepass")
    return data.hex()


@pytest.mark.interop
@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK to compare with java.util.Properties")
def test_parser_agrees_with_java_util_properties(tmp_path: Path) -> None:
    """Random documents built from the characters that matter to the grammar parse as the JDK parses them."""
    pieces = ["a", "b", "=", ":", " ", "\t", "\f", "\\", "\\", "\n", "\r", "\r\n", "#", "!", "u", "0", "f"]
    pieces += ["\\u00e9", "\\uD83D", "\\uDE00", "\\u003D", "é", "\u2028", "\x0b", "\U0001f600"]
    rng = random.Random(20240915)
    docs = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))) for _ in range(4000)]
    source = tmp_path / "PropsDump.java"
    source.write_text(_JAVA_DUMP, encoding="utf-8")
    run = subprocess.run(
        ["java", str(source)], input="\0".join(docs).encode(), capture_output=True, check=True, timeout=120
    )
    java_lines = run.stdout.decode().split("\n")
    mismatches = []
    for doc, expected in zip(docs, java_lines, strict=False):
        try:
            parsed = parse_properties(doc)
            ours = "".join(
                f"{_utf16_hex(k)}={_utf16_hex(v)},"
                for k, v in sorted(parsed.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass"))
            )
        except PropertiesSyntaxError:
            ours = "ERROR"
        if ours != expected:
            mismatches.append(doc)
    assert mismatches == []
