#!/usr/bin/env python3
"""Validates Kubernetes objects against the openAPIV3Schema of their CRDs,
strictly, with the Python package jsonschema (kubernetes-validate's own
dependency).

Usage: validate_crd.py CRD_FILE... < OBJECTS

CRD_FILE: YAML files of CustomResourceDefinitions (tests/crds/); every
version each one serves is read. OBJECTS (stdin): a JSON array of objects,
each validated against the schema of its apiVersion and kind.

Strict as the API server is not: the API server prunes a field its schema
does not know, without a word, so a field gpu-policy wrote and the CRD does
not have would vanish. Here every object schema that lists `properties`
and says nothing of the fields it does not list gets
`additionalProperties: false` (unless `x-kubernetes-preserve-unknown-fields`),
and an unknown field is an error. `metadata` (`type: object` alone) stays
open.

Prints one line per problem (`N apiVersion kind namespace/name: path: message`)
and the summary `validated N objects against K schemas, P problems`; exits 1
when there is a problem or an object whose kind no CRD serves.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import jsonschema
import yaml


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever fields are listed."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


def schemas(paths: list[str]) -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> strict schema, for every served version."""
    found: dict[tuple[str, str], Any] = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for crd in yaml.safe_load_all(handle):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for version in spec["versions"]:
                    if not version.get("served"):
                        continue
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    found[key] = strict(version["schema"]["openAPIV3Schema"])
    return found


def main() -> int:
    known = schemas(sys.argv[1:])
    objects = json.load(sys.stdin)
    problems = 0
    for index, obj in enumerate(objects):
        key = (obj.get("apiVersion", ""), obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        where = f"{index} {key[0]} {key[1]} {name}"
        schema = known.get(key)
        if schema is None:
            print(f"{where}: no CRD serves it")
            problems += 1
            continue
        validator = jsonschema.Draft7Validator(schema)
        for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.path)):
            path = ".".join(str(p) for p in error.absolute_path) or "(root)"
            print(f"{where}: {path}: {error.message}")
            problems += 1
    print(f"validated {len(objects)} objects against {len(known)} schemas, {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
