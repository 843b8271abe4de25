"""A value worked out on the first read of an attribute and kept in the instance."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


class Once(Generic[_T]):
    """As functools.cached_property, without the lock it takes on each first read (Python 3.11): the core
    reads such values of every finding, overlay and entry a request makes, each once or a few times. Two
    threads reading at once may both work the value out; both get an equal one."""

    def __init__(self, make: Callable[[Any], _T]) -> None:
        self._make, self._name = make, ""
        self.__doc__ = make.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @typing.overload
    def __get__(self, obj: None, owner: type | None = None) -> Once[_T]: ...

    @typing.overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...

    def __get__(self, obj: object, owner: type | None = None) -> _T | Once[_T]:
        if obj is None:
            return self
        value = obj.__dict__[self._name] = self._make(obj)
        return value


def made(obj: object, name: str) -> bool:
    """Whether `obj`'s Once attribute `name` has been worked out (a caller may prefer another way until it is)."""
    return name in obj.__dict__
