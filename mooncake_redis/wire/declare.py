"""Wire types from Python annotations: a NamedTuple class is a struct, ``Annotated[int, <int
type>]`` a fixed-width integer, ``list``/``dict``/``X | None`` the containers and ``A | B`` of
structs a variant. The Mooncake types (``types.py``) are declared this way, so their literals
follow from one declaration each."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Union

from .structpack import (
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    Int,
    Map,
    Monostate,
    Optional,
    String,
    Struct,
    Variant,
    Vector,
    WireType,
)

INT_TYPES: dict[str, WireType] = {
    "i32": Int(I32, "i"),
    "u32": Int(U32, "I"),
    "i64": Int(I64, "q"),
    "u64": Int(U64, "Q"),
    "i8": Int(I8, "b"),
    "u8": Int(U8, "B"),
    "i16": Int(I16, "h"),
    "u16": Int(U16, "H"),
}
BOOL_T, STRING_T, VOID_T = Bool(), String(), Monostate()
_TRIVIAL: dict[type, tuple[int, int]] = {}
_STRUCTS: dict[type, Struct] = {}


def trivial(pack_alignment: int, alignment: int) -> Callable[[type], type]:
    """Marks a NamedTuple as trivially serializable (``std::pair``, plain aggregates)."""

    def mark(cls: type) -> type:
        _TRIVIAL[cls] = (pack_alignment, alignment)
        return cls

    return mark


def wire_type(annotation: Any) -> WireType:
    """The wire type of a Python annotation: ``Annotated[int, <int type>]``, ``bool``, ``str``,
    ``list[T]``, ``dict[K, V]``, ``T | None`` (optional), ``A | B`` of structs (variant), a
    NamedTuple class (struct), ``None`` (monostate), or a :class:`WireType` itself."""
    if isinstance(annotation, WireType):
        return annotation
    if annotation is None or annotation is type(None):
        return VOID_T
    if annotation is bool:
        return BOOL_T
    if annotation is str:
        return STRING_T
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        for meta in args[1:]:
            if isinstance(meta, WireType):
                return meta
        return wire_type(args[0])
    if origin is list:
        return Vector(wire_type(args[0]))
    if origin is dict:
        return Map(wire_type(args[0]), wire_type(args[1]))
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) < len(args):
            if len(members) != 1:
                raise TypeError(f"optional of a union is not a struct_pack type: {annotation}")
            return Optional(wire_type(members[0]))
        return Variant([(m, struct_of(m)) for m in members])
    if isinstance(annotation, type) and issubclass(annotation, tuple):
        return struct_of(annotation)
    raise TypeError(f"no struct_pack type for {annotation!r}")


def struct_of(cls: type) -> Struct:
    """The struct_pack type of a NamedTuple class, its fields in declaration order."""
    if cls not in _STRUCTS:
        hints = typing.get_type_hints(cls, include_extras=True)
        names: tuple[str, ...] = getattr(cls, "_fields", ())
        if not names:
            raise TypeError(f"{cls.__name__} is not a NamedTuple")
        _STRUCTS[cls] = Struct(cls, [wire_type(hints[n]) for n in names], _TRIVIAL.get(cls))
    return _STRUCTS[cls]


def args_type(annotations: Sequence[Any]) -> WireType | None:
    """coro_rpc's argument list: none (empty body), one (itself), several (a tuple)."""
    if not annotations:
        return None
    if len(annotations) == 1:
        return wire_type(annotations[0])
    return Struct(tuple, [wire_type(a) for a in annotations])
