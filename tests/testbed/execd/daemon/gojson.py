"""Request bodies decoded like Go's encoding/json (json.Decoder / json.Unmarshal) into execd's
request types, with Go's error texts: one implementation for the command, session and file
routes.

A schema names the Go type a value decodes into: "string", "bool", "int", "int64", "uint32",
"any" (interface{}), or ("map", elem, go_type), ("slice", elem, go_type),
("struct", name, {json_name: type}, go_type).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from . import config
from .goenc import ApiError, go_decode


class GoJSONError(ValueError):
    """A JSON body Go's encoding/json would reject; the message is Go's error text."""


def _go_quote_char(b: int) -> str:
    """Go's encoding/json quoteChar for the offending byte of a syntax error."""
    if b == 0x27:
        return "'\\''"
    if b == 0x22:
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}
    if b in named:
        text = named[b]
    elif b < 0x20 or b == 0x7F:
        text = f"\\x{b:02x}"
    elif 0x80 <= b < 0xA0 or b == 0xAD:
        text = f"\\u{b:04x}"
    else:
        text = chr(b)
    return "'" + text + "'"


_STRING_BODY = re.compile(
    rb'[^"\\\x00-\x1f]*(?:(?:\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})[^"\\\x00-\x1f]*)*'
)
"""The valid inside of a JSON string (plain bytes and complete escapes), as Go's scanner takes it."""


class _GoJSONScanner:
    """Checks one JSON value the way Go's scanner does and finds where it ends."""

    _SPACE = b" \t\r\n"

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _bad(self, context: str) -> GoJSONError:
        return GoJSONError(f"invalid character {_go_quote_char(self.data[self.pos])} {context}")

    def _peek(self) -> int:
        if self.pos >= len(self.data):
            raise EOFError
        return self.data[self.pos]

    def _skip_space(self) -> int:
        while True:
            c = self._peek()
            if c not in self._SPACE:
                return c
            self.pos += 1

    def value(self) -> None:
        c = self._skip_space()
        if c == 0x7B:  # {
            self.pos += 1
            c = self._skip_space()
            if c == 0x7D:
                self.pos += 1
                return
            while True:
                if c != 0x22:
                    raise self._bad("looking for beginning of object key string")
                self.string()
                c = self._skip_space()
                if c != 0x3A:
                    raise self._bad("after object key")
                self.pos += 1
                self.value()
                c = self._skip_space()
                if c == 0x7D:
                    self.pos += 1
                    return
                if c != 0x2C:
                    raise self._bad("after object key:value pair")
                self.pos += 1
                c = self._skip_space()
        if c == 0x5B:  # [
            self.pos += 1
            c = self._skip_space()
            if c == 0x5D:
                self.pos += 1
                return
            while True:
                self.value()
                c = self._skip_space()
                if c == 0x5D:
                    self.pos += 1
                    return
                if c != 0x2C:
                    raise self._bad("after array element")
                self.pos += 1
        if c == 0x22:
            self.string()
            return
        if c == 0x2D or 0x30 <= c <= 0x39:
            self.number()
            return
        for word in (b"true", b"false", b"null"):
            if c == word[0]:
                self.pos += 1
                for expect in word[1:]:
                    if self._peek() != expect:
                        raise self._bad(
                            f"in literal {word.decode()} (expecting {_go_quote_char(expect)})"
                        )
                    self.pos += 1
                return
        raise self._bad("looking for beginning of value")

    def string(self) -> None:
        self.pos += 1  # the opening quote
        # Runs of valid content are skipped by one match (a command's text can be long); the
        # loop below then meets the closing quote, or the byte Go's scanner would reject.
        self.pos = _STRING_BODY.match(self.data, self.pos).end()  # type: ignore[union-attr]
        while True:
            c = self._peek()
            if c == 0x22:
                self.pos += 1
                return
            if c == 0x5C:
                self.pos += 1
                c = self._peek()
                if c == 0x75:  # \u
                    self.pos += 1
                    for _ in range(4):
                        h = self._peek()
                        if not (0x30 <= h <= 0x39 or 0x41 <= h <= 0x46 or 0x61 <= h <= 0x66):
                            raise self._bad("in \\u hexadecimal character escape")
                        self.pos += 1
                    continue
                if c not in b'"\\/bfnrt':
                    raise self._bad("in string escape code")
                self.pos += 1
                continue
            if c < 0x20:
                raise self._bad("in string literal")
            self.pos += 1

    def _digits(self) -> None:
        while self.pos < len(self.data) and 0x30 <= self.data[self.pos] <= 0x39:
            self.pos += 1

    def number(self) -> None:
        # The number may end the input (a complete top-level value), so EOF is checked by hand.
        if self.data[self.pos] == 0x2D:
            self.pos += 1
            c = self._peek()
            if not 0x30 <= c <= 0x39:
                raise self._bad("in numeric literal")
        if self.data[self.pos] == 0x30:
            self.pos += 1
        else:
            self._digits()
        if self.pos < len(self.data) and self.data[self.pos] == 0x2E:
            self.pos += 1
            c = self._peek()
            if not 0x30 <= c <= 0x39:
                raise self._bad("after decimal point in numeric literal")
            self._digits()
        if self.pos < len(self.data) and self.data[self.pos] in b"eE":
            self.pos += 1
            c = self._peek()
            if c in b"+-":
                self.pos += 1
                c = self._peek()
            if not 0x30 <= c <= 0x39:
                raise self._bad("in exponent of numeric literal")
            self._digits()


class _GoNumber(str):
    """A JSON number kept as its literal text (Go's errors quote it)."""


# The Go types the routes decode into (see the module docstring).
_GO_INT_RANGES = {
    "int": (-(1 << 63), (1 << 63) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_PERMISSION_FIELDS = {"owner": "string", "group": "string", "mode": "int"}
GO_PERMISSION = ("struct", "Permission", _PERMISSION_FIELDS, "model.Permission")
GO_PERMISSION_MAP = ("map", GO_PERMISSION, "map[string]model.Permission")
# FileMetadata embeds Permission: Go 1.24+ names the embedded struct in a field's error path
# (``FileMetadata.Permission.mode``); a field key "Embedded.name" says so.
GO_FILE_METADATA = (
    "struct",
    "FileMetadata",
    {"path": "string", **{f"Permission.{k}": v for k, v in _PERMISSION_FIELDS.items()}},
    "model.FileMetadata",
)
GO_RENAME_LIST = (
    "slice",
    ("struct", "RenameFileItem", {"src": "string", "dest": "string"}, "model.RenameFileItem"),
    "[]model.RenameFileItem",
)
GO_REPLACE_MAP = (
    "map",
    (
        "struct",
        "ReplaceFileContentItem",
        {"old": "string", "new": "string"},
        "model.ReplaceFileContentItem",
    ),
    "map[string]model.ReplaceFileContentItem",
)


def _go_type_name(schema: object) -> str:
    return schema if isinstance(schema, str) else schema[-1]  # type: ignore[index,return-value]


def _go_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _GoNumber):
        return "number"
    return "string"


class _GoUnmarshal:
    """Go's encoding/json Unmarshal of an already valid value into one of the schemas above:
    case-insensitive field names, unknown fields ignored, null leaves the zero value, the first
    type mismatch reported with Go's text (decoding goes on, as Go's does)."""

    def __init__(self) -> None:
        self.error: str | None = None
        self.struct = ""
        self.fields: list[str] = []

    def _mismatch(self, value_text: str, schema: object) -> None:
        if self.error is not None:
            return
        target = _go_type_name(schema)
        if self.struct or self.fields:
            where = f"Go struct field {self.struct}.{'.'.join(self.fields)}"
        else:
            where = "Go value"
        self.error = f"json: cannot unmarshal {value_text} into {where} of type {target}"

    def run(self, value: object, schema: object) -> object:
        if value is None:
            return None
        if isinstance(schema, str):
            return self._scalar(value, schema)
        assert isinstance(schema, tuple)
        kind = schema[0]
        if kind == "map":
            return self._map(value, schema)
        if kind == "slice":
            if not isinstance(value, list):
                self._mismatch(_go_kind(value), schema)
                return None
            return [self.run(item, schema[1]) for item in value]
        return self._struct(value, schema)

    def _scalar(self, value: object, schema: str) -> object:
        if schema == "string":
            if isinstance(value, str) and not isinstance(value, _GoNumber):
                return value
            self._mismatch(_go_kind(value), schema)
            return None
        if schema == "bool":
            if isinstance(value, bool):
                return value
            self._mismatch(_go_kind(value), schema)
            return None
        if schema in _GO_INT_RANGES:
            if isinstance(value, _GoNumber):
                lo, hi = _GO_INT_RANGES[schema]
                number = int(value) if value.lstrip("-").isdigit() else None
                if number is not None and lo <= number <= hi:
                    return number
                self._mismatch(f"number {value}", schema)
                return None
            self._mismatch(_go_kind(value), schema)
            return None
        assert schema == "any"  # interface{}: the value as decoded
        return value

    def _map(self, value: object, schema: tuple[object, ...]) -> object:
        if not isinstance(value, dict):
            self._mismatch(_go_kind(value), schema)
            return None
        out = {}
        for key, item in value.items():
            # Go 1.25 does not name map keys in an error's field path (``envs``, not ``envs.A``)
            decoded = self.run(item, schema[1])
            # null stores the element's zero value (a struct's: None, read as empty)
            out[key] = "" if decoded is None and schema[1] == "string" else decoded
        return out

    def _struct(self, value: object, schema: tuple[object, ...]) -> object:
        _, struct_name, fields, _go = schema
        assert isinstance(struct_name, str) and isinstance(fields, dict)
        if not isinstance(value, dict):
            self._mismatch(_go_kind(value), schema)
            return None
        result: dict[str, object] = {}
        by_json = {f.rpartition(".")[2]: f for f in fields}  # "Permission.mode" -> json "mode"
        for key, item in value.items():
            name = (
                key
                if key in by_json
                else next((f for f in by_json if f.lower() == key.lower()), None)
            )
            if name is None:
                continue
            saved, depth = self.struct, len(self.fields)
            self.struct = struct_name
            self.fields += by_json[name].split(".")
            decoded = self.run(item, fields[by_json[name]])
            del self.fields[depth:]
            self.struct = saved
            if decoded is not None:
                result[name] = decoded
        return result


def go_json_decode(data: bytes, schema: object, whole: bool = False) -> object:
    """Decode `data` into `schema` as Go does; GoJSONError carries Go's message.

    whole=False is json.NewDecoder(body).Decode (execd's request bodies): the first value only,
    "EOF" for an empty body, "unexpected EOF" for a cut one. whole=True is json.Unmarshal
    (upload metadata): nothing but space may follow, a cut value is "unexpected end of JSON
    input"."""
    scanner = _GoJSONScanner(data)
    try:
        scanner._skip_space()
    except EOFError:
        raise GoJSONError("unexpected end of JSON input" if whole else "EOF") from None
    start = scanner.pos
    try:
        scanner.value()
    except EOFError:
        raise GoJSONError("unexpected end of JSON input" if whole else "unexpected EOF") from None
    end = scanner.pos
    if whole:
        while scanner.pos < len(data):
            if data[scanner.pos] not in _GoJSONScanner._SPACE:
                raise scanner._bad("after top-level value")
            scanner.pos += 1
    value = json.loads(
        go_decode(data[start:end]),
        parse_int=_GoNumber,
        parse_float=_GoNumber,
        object_pairs_hook=lambda pairs: {
            re.sub("[\ud800-\udfff]", "\ufffd", k): v for k, v in pairs
        },
    )

    def fix(v: object) -> object:
        if isinstance(v, str) and not isinstance(v, _GoNumber):
            return v if v.isascii() else re.sub("[\ud800-\udfff]", "\ufffd", v)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    decoder = _GoUnmarshal()
    result = decoder.run(fix(value), schema)
    if decoder.error is not None:
        raise GoJSONError(decoder.error)
    return result


def bind_json(raw: bytes, schema: object) -> object:
    """execd's bindJSON (json.Decoder) of a request body into `schema`; a failure is its 400."""
    try:
        return go_json_decode(raw, schema)
    except GoJSONError as e:
        raise ApiError(
            400, "INVALID_REQUEST_BODY", f"error parsing request, MAYBE invalid body format. {e}"
        ) from None


# field name -> Go type of execd's command request structs (Go matches names case-insensitively)
RUN_COMMAND_FIELDS = {
    "command": "string",
    "cwd": "string",
    "background": "bool",
    "timeout": "int64",
    "uid": "uint32",
    "gid": "uint32",
    "envs": ("map", "string", "map[string]string"),
}
RUN_IN_SESSION_FIELDS = {"command": "string", "cwd": "string", "timeout": "int64"}


def decode_go_request(raw: bytes, struct: str, fields: Mapping[str, object]) -> dict[str, object]:
    """Body -> {field: value} as Go's json.Decoder fills execd's `model.<struct>`; ApiError
    otherwise. Profile 1.1 also takes `argv` (any JSON value; validate_command checks it)."""
    if config.ACCEPTS_ARGV and "command" in fields:
        fields = {**fields, "argv": "any"}
    value = bind_json(raw, ("struct", struct, fields, f"model.{struct}"))
    assert value is None or isinstance(value, dict)
    return value or {}
