"""A value worked out on the first read of an attribute and kept in the instance (`Once`), and a mapping whose values
are each worked out on the first read of their key (`Each`)."""

from __future__ import annotations

import typing
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")
_K = TypeVar("_K")


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


class Each(Mapping[_K, _T]):
    """A mapping over keys known up front, each value worked out on the first read of its key and kept: a run reads
    a few of many (a report's statuses, the catalog's label keys). `keys` answers `in` and iterates in the mapping's
    order. Two threads reading one key at once may both work its value out; both get an equal one."""

    def __init__(self, keys: Collection[_K], make: Callable[[_K], _T]) -> None:
        self._keys, self._make = keys, make
        self._made: dict[_K, _T] = {}

    def __getitem__(self, key: _K) -> _T:
        found = self._made.get(key)
        if found is None:
            if key not in self._keys:
                raise KeyError(key)
            found = self._made[key] = self._make(key)
        return found

    def __iter__(self) -> Iterator[_K]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys
