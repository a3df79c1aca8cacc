"""``FrozenMap``: the read-only mapping that frozen config sections hold where a YAML section is
a mapping (``RunConfig.behaviors``, ``environment_parameters``, ...). It compares, hashes and
pickles by its items, like the dict it was made from.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping


class FrozenMap(Mapping):
    """A read-only dict (frozen dataclasses hold these instead of dicts); pickles like one."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping | None = None):
        object.__setattr__(self, "_data", dict(data or {}))

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self) -> Iterator:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name, value):
        raise AttributeError("FrozenMap is read-only")

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self):
        return (FrozenMap, (self._data,))

    def __hash__(self):
        return hash(tuple(self._data.items()))
