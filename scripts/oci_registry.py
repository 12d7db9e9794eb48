#!/usr/bin/env python3
"""A static, read-only OCI registry on loopback for scripts/bench.sh: one
image (an OCI image manifest, its config blob and one layer, stored by
their real sha256 digests) under one repository and tag, served over plain
HTTP (list the address in `imageResolution.insecureRegistries`).

Serves `GET /v2/`, `GET|HEAD /v2/<repository>/manifests/<tag or digest>`
and `GET|HEAD /v2/<repository>/blobs/<digest>` with `Content-Type` and
`Docker-Content-Digest`; anything else is 404 with the registry's error
JSON. Every request is logged to stderr, one line each, so that the caller
can count what was asked. Standard library only.

Usage: oci_registry.py PORT REPOSITORY TAG ENV...   (ENV: NAME=value)
"""

import hashlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def digest_of(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image(env):
    """(manifest digest, {digest: (content type, bytes)}) of one image."""
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": env},
        "rootfs": {"type": "layers", "diff_ids": []},
    }).encode()
    layer = b"a layer nobody downloads"
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": digest_of(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": digest_of(layer), "size": len(layer)}],
    }).encode()
    content = {digest_of(data): (kind, data)
               for kind, data in [(OCI_CONFIG, config), (OCI_LAYER, layer), (OCI_MANIFEST, manifest)]}
    return digest_of(manifest), content


def handler(repository, tag, manifest_digest, content):
    class Registry(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, kind, data, digest=None, body=True):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            if digest:
                self.send_header("Docker-Content-Digest", digest)
            self.end_headers()
            if body:
                self.wfile.write(data)

        def not_found(self, body):
            error = {"errors": [{"code": "NOT_FOUND", "message": "unknown to this registry"}]}
            self.answer(404, "application/json", json.dumps(error).encode(), body=body)

        def serve(self, body):
            path = self.path.split("?", 1)[0]
            if path in ("/v2/", "/v2"):
                return self.answer(200, "application/json", b"{}", body=body)
            prefix = f"/v2/{repository}/"
            if not path.startswith(prefix):
                return self.not_found(body)
            kind, _, reference = path[len(prefix):].partition("/")
            if kind == "manifests" and reference == tag:
                reference = manifest_digest
            if kind not in ("manifests", "blobs") or reference not in content:
                return self.not_found(body)
            media_type, data = content[reference]
            self.answer(200, media_type, data, digest=reference, body=body)

        def do_GET(self):
            self.serve(body=True)

        def do_HEAD(self):
            self.serve(body=False)

    return Registry


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    port, repository, tag, env = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    manifest_digest, content = image(env)
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(repository, tag, manifest_digest, content))
    print(f"serving {repository}:{tag} ({manifest_digest}) on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
