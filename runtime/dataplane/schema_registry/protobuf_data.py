"""Protobuf descriptors and messages to Connect schemas and values and back, after Confluent's ProtobufData.

Why descriptors: a registered Protobuf schema comes back from the registry (``format=serialized``) as a
base64 ``FileDescriptorProto``; Python's protobuf builds message classes from it at run time, so no
generated code is needed. The mapping follows Confluent's: a message is a struct named by its full name,
every field optional (proto3 has no required fields), int32/sint32/sfixed32 -> int32, the 64-bit and
unsigned 32-bit integers -> int64, float/double, bool, string, bytes, enums -> strings carrying
Confluent's ``io.confluent.connect.protobuf.Enum`` parameters, repeated -> array, map -> map, and the
well-known google.protobuf.Timestamp, google.type.Date, google.type.TimeOfDay and confluent.type.Decimal
-> Connect's Timestamp, Date, Time and Decimal. Written back, a struct becomes one proto3 file with one
top-level message (message index [0]) and nested messages for nested structs and map entries.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Final

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    decimal_schema,
)

__all__ = [
    "PROTOBUF_ENUM",
    "connect_to_file",
    "connect_to_message",
    "descriptor_to_connect",
    "message_class",
    "message_to_connect",
    "new_pool",
]

PROTOBUF_ENUM: Final = "io.confluent.connect.protobuf.Enum"
TAG: Final = "protobuf.tag"
_T = FieldDescriptor
_INT32: Final = {_T.TYPE_INT32, _T.TYPE_SINT32, _T.TYPE_SFIXED32}
_INT64: Final = {
    _T.TYPE_INT64,
    _T.TYPE_SINT64,
    _T.TYPE_SFIXED64,
    _T.TYPE_UINT64,
    _T.TYPE_FIXED64,
    _T.TYPE_UINT32,
    _T.TYPE_FIXED32,
}
_SIMPLE: Final = {
    _T.TYPE_FLOAT: "float",
    _T.TYPE_DOUBLE: "double",
    _T.TYPE_BOOL: "boolean",
    _T.TYPE_STRING: "string",
    _T.TYPE_BYTES: "bytes",
}
_TIMESTAMP_TYPE: Final = "google.protobuf.Timestamp"
_DATE_TYPE: Final = "google.type.Date"
_TIME_TYPE: Final = "google.type.TimeOfDay"
_DECIMAL_TYPE: Final = "confluent.type.Decimal"
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def new_pool() -> DescriptorPool:
    """A descriptor pool holding the well-known types a registered schema may import."""
    from confluent_kafka.schema_registry.common.protobuf import _init_pool

    pool = DescriptorPool()
    _init_pool(pool)
    return pool


def _repeated(fd: FieldDescriptor) -> bool:
    # protobuf 7 has only ``is_repeated``; ``label`` is gone.
    return bool(fd.is_repeated)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.type == _T.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry and _repeated(fd)


def _field_schema(fd: FieldDescriptor, int_for_enums: bool) -> ConnectSchema:
    if _is_map(fd):
        entry = fd.message_type
        keys = _single(entry.fields_by_name["key"], int_for_enums, optional=False)
        values = _single(entry.fields_by_name["value"], int_for_enums, optional=True)
        return ConnectSchema("map", True, keys=keys, values=values)
    base = _single(fd, int_for_enums, optional=not _repeated(fd))
    if _repeated(fd):
        return ConnectSchema("array", True, items=base)
    return base


def _single(fd: FieldDescriptor, int_for_enums: bool, optional: bool) -> ConnectSchema:
    params = ((TAG, str(fd.number)),)
    if fd.type in _INT32:
        return ConnectSchema("int32", optional, parameters=params)
    if fd.type in _INT64:
        return ConnectSchema("int64", optional, parameters=params)
    if fd.type in _SIMPLE:
        return ConnectSchema(_SIMPLE[fd.type], optional, parameters=params)
    if fd.type == _T.TYPE_ENUM:
        if int_for_enums:
            return ConnectSchema("int32", optional, parameters=params)
        enum = fd.enum_type
        symbols = tuple((f"{PROTOBUF_ENUM}.{v.name}", str(v.number)) for v in enum.values)
        return ConnectSchema(
            "string",
            optional,
            name=enum.full_name,
            parameters=((PROTOBUF_ENUM, enum.name), *symbols, *params),
        )
    full = fd.message_type.full_name
    if full == _TIMESTAMP_TYPE:
        return ConnectSchema("int64", optional, name=TIMESTAMP, version=1)
    if full == _DATE_TYPE:
        return ConnectSchema("int32", optional, name=DATE, version=1)
    if full == _TIME_TYPE:
        return ConnectSchema("int32", optional, name=TIME, version=1)
    if full == _DECIMAL_TYPE:
        return decimal_schema(0, optional)
    return _message_schema(fd.message_type, int_for_enums, optional=True)


def _message_schema(desc: Descriptor, int_for_enums: bool, optional: bool) -> ConnectSchema:
    fields = tuple(ConnectField(fd.name, _field_schema(fd, int_for_enums)) for fd in desc.fields)
    return ConnectSchema("struct", optional, name=desc.full_name, fields=fields)


def descriptor_to_connect(desc: Descriptor, int_for_enums: bool = False) -> ConnectSchema:
    """The Connect schema of a top-level message."""
    return _message_schema(desc, int_for_enums, optional=False)


def _single_value(fd: FieldDescriptor, value: Any, int_for_enums: bool) -> Any:
    if fd.type == _T.TYPE_ENUM:
        if int_for_enums:
            return int(value)
        found = fd.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    if fd.type != _T.TYPE_MESSAGE:
        return value
    full = fd.message_type.full_name
    if full == _TIMESTAMP_TYPE:
        return _EPOCH + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
    if full == _DATE_TYPE:
        return dt.date(value.year, value.month, value.day)
    if full == _TIME_TYPE:
        return dt.time(value.hours, value.minutes, value.seconds, value.nanos // 1000)
    if full == _DECIMAL_TYPE:
        from confluent_kafka.schema_registry.common.protobuf import protobuf_to_decimal

        return protobuf_to_decimal(value)
    return message_to_connect(value, int_for_enums)


def message_to_connect(message: Message, int_for_enums: bool = False) -> dict[str, Any]:
    """A parsed message as a Connect struct value (a dict in field order); an unset message field is None."""
    out: dict[str, Any] = {}
    for fd in message.DESCRIPTOR.fields:
        value = getattr(message, fd.name)
        if _is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _single_value(value_fd, v, int_for_enums) for k, v in value.items()}
        elif _repeated(fd):
            out[fd.name] = [_single_value(fd, v, int_for_enums) for v in value]
        elif fd.type == _T.TYPE_MESSAGE and not message.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _single_value(fd, value, int_for_enums)
    return out


# ------------------------------------------------------------------------------ Connect -> Protobuf

_TO_PROTO: Final = {
    "int8": _T.TYPE_INT32,
    "int16": _T.TYPE_INT32,
    "int32": _T.TYPE_INT32,
    "int64": _T.TYPE_INT64,
    "float": _T.TYPE_FLOAT,
    "double": _T.TYPE_DOUBLE,
    "boolean": _T.TYPE_BOOL,
    "string": _T.TYPE_STRING,
    "bytes": _T.TYPE_BYTES,
}
_LOGICAL: Final = {
    TIMESTAMP: (_TIMESTAMP_TYPE, "google/protobuf/timestamp.proto"),
    DATE: (_DATE_TYPE, "google/type/date.proto"),
    TIME: (_TIME_TYPE, "google/type/timeofday.proto"),
    DECIMAL: (_DECIMAL_TYPE, "confluent/type/decimal.proto"),
}


def _fill_field(
    field: descriptor_pb2.FieldDescriptorProto,
    schema: ConnectSchema,
    parent: descriptor_pb2.DescriptorProto,
    name: str,
    deps: set[str],
) -> None:
    if schema.name in _LOGICAL:
        type_name, dep = _LOGICAL[schema.name]
        field.type = _T.TYPE_MESSAGE
        field.type_name = "." + type_name
        deps.add(dep)
    elif schema.type == "string" and PROTOBUF_ENUM in schema.params:
        name = schema.params[PROTOBUF_ENUM]
        if name not in [e.name for e in parent.enum_type]:
            enum = parent.enum_type.add(name=name)
            prefix = PROTOBUF_ENUM + "."
            for key, number in schema.parameters or ():
                if key.startswith(prefix):
                    enum.value.add(name=key[len(prefix) :], number=int(number))
        field.type = _T.TYPE_ENUM
        field.type_name = name
    elif schema.type in _TO_PROTO:
        field.type = _TO_PROTO[schema.type]
    elif schema.type == "struct":
        nested = parent.nested_type.add()
        _fill_message(nested, schema, (schema.name or name).rpartition(".")[2], deps)
        field.type = _T.TYPE_MESSAGE
        field.type_name = nested.name
    else:
        raise ConnectDataError(f"Connect type {schema.type} cannot be nested here in Protobuf")


def _fill_message(
    message: descriptor_pb2.DescriptorProto, schema: ConnectSchema, name: str, deps: set[str]
) -> None:
    message.name = name
    for number, f in enumerate(schema.fields, start=1):
        field = message.field.add()
        field.name = f.name
        field.number = int(f.schema.params.get(TAG, number))
        field.label = _T.LABEL_OPTIONAL
        fs = f.schema
        if fs.type == "array":
            assert fs.items is not None
            field.label = _T.LABEL_REPEATED
            _fill_field(field, fs.items, message, f.name.capitalize(), deps)
        elif fs.type == "map":
            assert fs.keys is not None and fs.values is not None
            entry = message.nested_type.add()
            entry.name = "".join(p.capitalize() for p in f.name.split("_")) + "Entry"
            entry.options.map_entry = True
            key = entry.field.add()
            key.name, key.number, key.label = "key", 1, _T.LABEL_OPTIONAL
            _fill_field(key, fs.keys, entry, "Key", deps)
            value = entry.field.add()
            value.name, value.number, value.label = "value", 2, _T.LABEL_OPTIONAL
            _fill_field(value, fs.values, entry, "Value", deps)
            field.label = _T.LABEL_REPEATED
            field.type = _T.TYPE_MESSAGE
            field.type_name = entry.name
        else:
            _fill_field(field, fs, message, f.name.capitalize(), deps)


def connect_to_file(schema: ConnectSchema) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file with one top-level message for a Connect struct schema."""
    if schema.type != "struct":
        raise ConnectDataError(f"ProtobufConverter writes structs; this schema is {schema.type}")
    full = schema.name or "ConnectDefault1"
    package, _, name = full.rpartition(".")
    file = descriptor_pb2.FileDescriptorProto(name=f"{full}.proto", syntax="proto3")
    if package:
        file.package = package
    deps: set[str] = set()
    _fill_message(file.message_type.add(), schema, name, deps)
    file.dependency.extend(sorted(deps))
    return file


def connect_to_message(message: Message, schema: ConnectSchema, value: Any) -> Message:
    """Fill ``message`` (an empty message of the class built from ``connect_to_file(schema)``)."""
    for f in schema.fields:
        item = value.get(f.name) if value is not None else None
        if item is None:
            continue
        fd = message.DESCRIPTOR.fields_by_name[f.name]
        target = getattr(message, f.name)
        fs = f.schema
        if fs.type == "array":
            assert fs.items is not None
            for element in item:
                if fd.type == _T.TYPE_MESSAGE:
                    _set_message(target.add(), fs.items, element)
                else:
                    target.append(_scalar(fs.items, element, fd))
        elif fs.type == "map":
            assert fs.values is not None and fs.keys is not None
            value_fd = fd.message_type.fields_by_name["value"]
            for k, v in item.items():
                if value_fd.type == _T.TYPE_MESSAGE:
                    _set_message(target[k], fs.values, v)
                else:
                    target[k] = _scalar(fs.values, v, value_fd)
        elif fd.type == _T.TYPE_MESSAGE:
            _set_message(target, fs, item)
        else:
            setattr(message, f.name, _scalar(fs, item, fd))
    return message


def _scalar(schema: ConnectSchema, value: Any, fd: FieldDescriptor) -> Any:
    if fd.type == _T.TYPE_ENUM and isinstance(value, str):
        found = fd.enum_type.values_by_name.get(value)
        if found is None:
            raise ConnectDataError(f"{value} is not a symbol of enum {fd.enum_type.full_name}")
        return found.number
    if schema.type in ("float", "double"):
        return float(value)
    return value


def _set_message(target: Message, schema: ConnectSchema, value: Any) -> None:
    if schema.name == TIMESTAMP:
        delta = value - _EPOCH
        target.seconds = delta.days * 86400 + delta.seconds
        target.nanos = delta.microseconds * 1000
    elif schema.name == DATE:
        target.year, target.month, target.day = value.year, value.month, value.day
    elif schema.name == TIME:
        target.hours, target.minutes = value.hour, value.minute
        target.seconds, target.nanos = value.second, value.microsecond * 1000
    elif schema.name == DECIMAL:
        from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf

        target.CopyFrom(decimal_to_protobuf(decimal.Decimal(value), schema.scale))
    else:
        connect_to_message(target, schema, value)


def message_class(pool: DescriptorPool, file: descriptor_pb2.FileDescriptorProto, indexes: list[int]) -> Any:
    """The message class at ``indexes`` in ``file``, added to ``pool`` if it is not there yet."""
    try:
        found = pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
        found = pool.FindFileByName(file.name)
    desc = found.message_types_by_name[file.message_type[indexes[0]].name]
    for index in indexes[1:]:
        desc = desc.nested_types[index]
    return GetMessageClass(desc)
