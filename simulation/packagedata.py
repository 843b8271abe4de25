"""The core's package data (simulation/data): the only files the core reads."""

from __future__ import annotations

import json
import os
from typing import Any

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def text(name: str) -> str:
    # A path beside this module rather than importlib.resources, whose import (tempfile, shutil, bz2, lzma) cost a
    # one-file check more than reading the file: the package is always installed as files.
    with open(os.path.join(_DATA, name), encoding="utf-8") as handle:
        return handle.read()


def yaml_twin(name: str) -> Any:
    """A YAML file of the package data, read from its JSON twin (`<name>.json`, made by `make reference` and held
    equal to the YAML by `make lint` and tests/test_reference.py): parsing the CRD's YAML took a one-file check a
    tenth of a second."""
    return json.loads(text(f"{name}.json"))
