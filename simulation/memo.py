"""Memos keyed by plain JSON values: the values an overlay's judgement reads recur across overlays (10,000
overlays of a hundred requirements hold a few hundred distinct requirement lists), so a verdict on one is worked
out once. A key is the value's marshal bytes: exact (a value of another type, `True` for `1`, is another key; a map
with its keys in another order only a miss) and some four times quicker to make than its `repr`. A judgement that
asks several layers about one value pins it (`pinned`), so that its key is made once for all of them.

Every key is kept as one object per distinct key (`_KEYS`), which all memos share: the bytes the memos hold are
counted once per key, and an equal key is found by identity. Past `BYTES` of keys every memo is cleared, so
whatever an input (or a webhook's stream of requests) holds, the memos keep at most that much of it."""

from __future__ import annotations

import itertools
import marshal
import threading
import weakref
from collections.abc import Callable, Hashable, MutableMapping, Sequence
from typing import Any, TypeVar, cast

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

# Bounds the memos: this many entries each, each key at most KEY_LIMIT bytes (a list of 100 requirements is some
# 7 KiB), and the keys of all memos together at most BYTES (10,000 overlays of 1,416 distinct lists of 93
# requirements hold 9 MB; docs/design.md §6.1).
LIMIT = 4096
KEY_LIMIT = 16384
BYTES = 16 << 20


class Memo(dict[Hashable, T]):
    """One memo's entries (a dict that `clear_all` can find: it registers on its first entry)."""

    __slots__ = ("__weakref__",)


# The memos that hold entries, and one object per distinct key any of them may hold, with their bytes.
_MEMOS: weakref.WeakValueDictionary[int, Memo[Any]] = weakref.WeakValueDictionary()
_KEYS: dict[Hashable, Hashable] = {}
_held = 0
_lock = threading.Lock()

# Values pinned while a judgement runs, by id, each held beside its key: a held value's id is its own, and a
# value is not changed while it is judged (a pin ends with the judgement: a caller may change its objects after).
_pinned: dict[int, tuple[Any, Hashable | None]] = {}


def key(value: Any) -> Hashable | None:
    """`value` as a memo key; None when it is too large to keep or not plain (a subclass, a custom type)."""
    if isinstance(value, dict | list):
        held = _pinned.get(id(value))
        return held[1] if held is not None and held[0] is value else _dumped(value)
    if isinstance(value, str):
        return None if len(value) > KEY_LIMIT else _shared((type(value).__name__, value), len(value))
    if isinstance(value, int):  # a decoder's ints have at most 4,300 digits
        return _shared((type(value).__name__, value), value.bit_length() // 8)
    return (type(value).__name__, value)


def _dumped(value: Any) -> Hashable | None:
    try:
        made = marshal.dumps(value)
    except ValueError:  # a type marshal does not know (no plain JSON), or nested too deep
        return None
    return _kept(made)


def _shared(made: Hashable, size: int) -> Hashable:
    """The one object of key `made` (of `size` bytes) that memos hold."""
    found = _KEYS.get(made)
    if found is not None:
        return found
    global _held
    with _lock:
        if _held + size > BYTES:
            clear_all()
        found = _KEYS.setdefault(made, made)
        if found is made:
            _held += size
    return found


def clear_all() -> None:
    """Empties every memo and the keys they share."""
    global _held
    for memo in list(_MEMOS.values()):
        memo.clear()
    _KEYS.clear()
    _held = 0


def held_bytes() -> int:
    """The bytes of the keys the memos may hold (at most BYTES)."""
    return _held


class pinned:  # lower case: read as a function, `with memo.pinned(value):`
    """While the block runs, `value`'s key is made once: every memo asked about it finds it by identity. A class,
    not a generator: every overlay checked enters one, and a generator's context manager costs twice as much."""

    __slots__ = ("_held",)

    def __init__(self, value: Any) -> None:
        self._held: tuple[Any, Hashable | None] | None = (value, _dumped(value)) if isinstance(value, dict | list) \
            else None

    def __enter__(self) -> None:
        held = self._held
        if held is not None:
            _pinned[id(held[0])] = held

    def __exit__(self, *_: object) -> None:
        held = self._held
        # Another thread's pin of the same object may have replaced it.
        if held is not None and _pinned.get(id(held[0])) is held:
            del _pinned[id(held[0])]


def remembered(memo: Memo[T], value: Any, make: Callable[[Any], T]) -> T:
    """make(value), remembered in `memo` per plain JSON value (unless too large to keep)."""
    return known(memo, key(value), value, make)


def known(memo: Memo[T], made: Hashable | None, value: Any, make: Callable[[Any], T]) -> T:
    """remembered(memo, value, make) where `made` is key(value), already at hand (`parts`)."""
    found = memo.get(made) if made is not None else None
    if found is None:
        found = make(value)
        if made is not None:
            if len(memo) >= LIMIT:
                memo.clear()
            if not memo:  # its first entry (since a clear): registered where clear_all, under the lock, reads
                with _lock:
                    _MEMOS[id(memo)] = memo
            memo[made] = found
    return found


def each(memo: Memo[T], made: Sequence[Hashable | None], values: Sequence[Any], make: Callable[[Any], T]) -> list[T]:
    """[known(memo, k, v, make) for k, v in zip(made, values)]: a list's elements (`made`: their keys, `parts`)
    judged one by one, the ones met before found at C speed (a new list of a hundred requirements holds
    requirements met before; a call per element was most of its judgement)."""
    if len(made) == 1:  # most maps an element rule reads (an overlay's capacity): nothing to gather
        return [known(memo, made[0], values[0], make)]
    found = [*map(memo.get, made)]  # a None key is never held: a miss
    if None in found:  # no answer a memo holds equals None
        return [old if old is not None else known(memo, k, v, make)
                for old, k, v in zip(found, made, values, strict=True)]
    return cast(list[T], found)


def parts(value: list[Any], made: Hashable | None = None) -> tuple[Hashable | None, ...]:
    """The keys of a list's elements, made once per distinct list for every layer that judges its elements one by
    one (a new list of a hundred requirements: the quick schema check, the elementwise CEL rules, the CEL rules under
    each element, the model's specs). Unlike `key`, an element's key is canonical: marshal's version 2 writes
    neither back-references (set by an object's reference count) nor interning, so an equal element read by
    another reader (the webhook's candidate beside the files' objects) is found, not judged again. `made`: the
    list's own key (`key`), where the caller has it: a list of a hundred requirements takes some 14 us to key."""
    return known(_PARTS, key(value) if made is None else made, value, _keys_of)


def _keys_of(value: list[Any]) -> tuple[Hashable | None, ...]:
    try:
        made = [*map(marshal.dumps, value, itertools.repeat(_CANONICAL, len(value)))]
    except ValueError:  # an element marshal does not know, or nested too deep: keyed one by one
        return tuple(map(_canonical, value))
    found = [*map(_KEYS.get, made)]  # most elements recur: their keys are found at C speed
    if None in found:
        found = [old if old is not None else _kept(new) for old, new in zip(found, made, strict=True)]
    return tuple(found)


_CANONICAL = 2


def _canonical(value: Any) -> Hashable | None:
    try:
        return _kept(marshal.dumps(value, _CANONICAL))
    except ValueError:
        return None


def _kept(made: bytes) -> Hashable | None:
    return _shared(made, len(made)) if len(made) <= KEY_LIMIT else None


_PARTS: Memo[tuple[Hashable | None, ...]] = Memo()


def bounded(store: MutableMapping[K, T], made: K, make: Callable[[], T], limit: int) -> T:
    """store[made], made by `make` when missing; a store of `limit` entries is emptied first, all at once (one step
    for concurrent readers, and its memory stays bounded)."""
    found = store.get(made)
    if found is None:
        found = make()
        if len(store) >= limit:
            store.clear()
        store[made] = found
    return found


def held(store: MutableMapping[int, tuple[Any, T]], value: Any, make: Callable[[Any], T]) -> T:
    """make(value) for an immutable `value` (a tuple of frozen specs), remembered per object: found by its id, which
    is its own while the entry holds it. For values an earlier memo made one object per distinct value."""
    found = store.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    made = make(value)
    if len(store) >= LIMIT:
        store.clear()
    store[id(value)] = (value, made)
    return made
