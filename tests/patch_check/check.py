#!/usr/bin/env python3
"""Applies the mutating webhook's patches with a second JSON Patch
implementation and validates the patched pods against the Kubernetes schemas.

Usage: check.py FILE

FILE (written by tests/it/patch_check.rs) is JSON Lines, one admission a line:

    {"name": "...", "strict": true, "object": {...}, "patch": [...] | null,
     "expected": {...}}

`patch` is the patch of the webhook's response exactly as it was encoded
(null: the response had none), `expected` the object after the Rust crate
json_patch applied it. For every line:

- the patch applies with the Python package jsonpatch and gives exactly
  `expected`, as JSON values (1, 1.0 and true differ);
- with `strict`, the result validates against the strict Pod schema of
  kubernetes-validate (no field Kubernetes does not know, every type right)
  for Kubernetes 1.32 (the oldest release gpu-policy supports) and the
  newest version the package ships.

Prints a line per failure and the summary `patch check: N objects, P patches
(O operations), S validated strictly against Kubernetes ..., F failed`;
exits 1 on any failure.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import jsonpatch
import jsonpointer
import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions, latest_version, schema_contents
from referencing import Registry, Resource

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import jsondiff  # noqa: E402  (tests/python)

KUBE_VERSIONS = ["1.32.0", latest_version()]
# Lines a worker process takes at a time.
CHUNK = 50


def strict_validator(version: str) -> jsonschema.protocols.Validator:
    """What kubernetes_validate.validate(pod, version, strict=True) builds on
    every call (about half its time), built once."""
    if version not in all_versions():
        raise SystemExit(f"kubernetes-validate has no schemas for Kubernetes {version}")
    directory = f"kubernetes-json-schema/v{version}-local-strict"
    schema = schema_contents(f"{directory}/pod-v1.json", version)
    definitions = schema_contents(f"{directory}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


# Built before the worker processes fork, which inherit them.
VALIDATORS = {version: strict_validator(version) for version in KUBE_VERSIONS}


def schema_errors(pod: Any) -> list[str]:
    """Every version's first schema error, as `version: path: message`."""
    errors = []
    for version, validator in VALIDATORS.items():
        error = jsonschema.exceptions.best_match(validator.iter_errors(pod))
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path)
            errors.append(f"{version}: /{path}: {error.message[:300]}")
    return errors


def self_test() -> None:
    """The validators are the package's, and strict: a known field passes,
    an unknown one fails, like kubernetes_validate.validate says."""
    good = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "a", "image": "busybox", "env": None}]}}
    bad = json.loads(json.dumps(good))
    bad["spec"]["containers"][0]["futureField"] = 1
    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(good, version, strict=True)
        try:
            kubernetes_validate.validate(bad, version, strict=True)
            raise SystemExit(f"kubernetes-validate {version} accepts an unknown field")
        except kubernetes_validate.ValidationError:
            pass
    if schema_errors(good) or len(schema_errors(bad)) != len(KUBE_VERSIONS):
        raise SystemExit("the cached validators disagree with kubernetes_validate.validate")


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def check(line: str) -> tuple[int, int, bool, list[str]]:
    """(patches, operations, validated strictly, failures) of one line."""
    case = json.loads(line, object_pairs_hook=no_duplicate_keys)
    name, patch, expected = case["name"], case["patch"], case["expected"]
    failures = []
    operations = 0
    result = case["object"]
    if patch is not None:
        if not isinstance(patch, list) or not patch:
            return 1, 0, False, [f"{name}: the patch is not a non-empty array: {patch!r}"]
        operations = len(patch)
        try:
            result = jsonpatch.apply_patch(case["object"], patch)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
            return 1, operations, False, [f"{name}: jsonpatch cannot apply the patch: {error}"]
    # As JSON values: 1, 1.0 and true differ.
    where = next(jsondiff.diff(expected, result, names=("json_patch", "jsonpatch")), None)
    if where is not None:
        failures.append(f"{name}: jsonpatch and json_patch disagree at {where}")
    strict = bool(case["strict"])
    if strict:
        errors = schema_errors(result)
        if errors:
            before = "valid" if not schema_errors(case["object"]) else "already invalid"
            failures.append(f"{name}: the patched pod fails the strict schema (the pod "
                            f"before the patch was {before}): " + "; ".join(errors))
    return int(patch is not None), operations, strict, failures


def check_chunk(lines: list[str]) -> tuple[int, int, int, int, list[str]]:
    objects = patches = operations = strict = 0
    failures: list[str] = []
    for line in lines:
        p, o, s, f = check(line)
        objects += 1
        patches += p
        operations += o
        strict += s
        failures += f
    return objects, patches, operations, strict, failures


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    self_test()
    with open(sys.argv[1], encoding="utf-8") as file:
        lines = [line for line in file if line.strip()]
    chunks = [lines[i:i + CHUNK] for i in range(0, len(lines), CHUNK)]
    workers = max(1, len(os.sched_getaffinity(0)))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(check_chunk, chunks))
    objects = sum(r[0] for r in results)
    patches = sum(r[1] for r in results)
    operations = sum(r[2] for r in results)
    strict = sum(r[3] for r in results)
    failures = [failure for r in results for failure in r[4]]
    for failure in failures[:50]:
        print(f"FAILED {failure}")
    if len(failures) > 50:
        print(f"... and {len(failures) - 50} more")
    print(f"patch check: {objects} objects, {patches} patches ({operations} operations), "
          f"{strict} validated strictly against Kubernetes {' and '.join(KUBE_VERSIONS)} "
          f"(jsonpatch {jsonpatch.__version__}, kubernetes-validate "
          f"{kubernetes_validate.version.__version__}), {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
