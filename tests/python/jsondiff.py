"""Where two JSON values differ, for the Python checks under tests/."""

from __future__ import annotations

import json
from typing import Any, Iterator


def diff(expected: Any, actual: Any, path: str = "",
         names: tuple[str, str] = ("expected", "actual")) -> Iterator[str]:
    """Every differing field path (`a.b[0].c`), with what each side has.
    Values of different JSON types differ even when Python calls them equal
    (1, 1.0 and true). `names` label the two sides in the messages."""
    left, right = names
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in actual:
                yield f"{sub}: missing in the {right} ({left}: {json.dumps(expected[k])})"
            elif k not in expected:
                yield f"{sub}: only in the {right} ({json.dumps(actual[k])})"
            else:
                yield from diff(expected[k], actual[k], sub, names)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: {len(expected)} items in {left}, {len(actual)} in {right}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            yield from diff(e, a, f"{path}[{i}]", names)
    elif type(expected) is not type(actual) or expected != actual:
        yield f"{path}: {left} {json.dumps(expected)[:200]}, {right} {json.dumps(actual)[:200]}"
