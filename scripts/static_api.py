#!/usr/bin/env python3
"""A static, read-only Kubernetes API server on loopback for
scripts/bench.sh: just enough of the protocol for `gpu-policy serve
--kubeconfig` to fill its caches and become ready, with the objects the
DRA pod review needs (its namespace, the ResourceClaimTemplate its claim
names, the DeviceClass `gpu.nvidia.com`, the RuntimeClass `nvidia` and one
GPU node).

LIST (`GET /api/v1/<plural>`, `/apis/<group>/<version>/<plural>`, and the
namespaced forms) answers every object of that kind in one page, as a
`PartialObjectMetadataList` when the client asks for metadata only. WATCH
(`watch=1|true`) answers 200 and sends nothing until `timeoutSeconds`:
nothing ever changes. `/version` says 1.35, and `/apis/<group>` lists the
versions of the group it holds (the caches ask which `resource.k8s.io`
version is served). Anything else is 404 with a Status. Every request is
logged to stderr, one line each. Standard library only.

Usage: static_api.py PORT NAMESPACE
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def objects(namespace):
    """{(group/version, plural): [object]} of the cluster."""
    meta = lambda name, **more: {"name": name, "uid": f"uid-{name}",
                                 "resourceVersion": "1", **more}
    return {
        ("v1", "namespaces"): [{
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": meta(namespace, labels={"gpu-policy.io/mode": "enforce"}),
        }],
        ("v1", "nodes"): [{
            "apiVersion": "v1", "kind": "Node",
            "metadata": meta("gpu-node-0", labels={
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.compute.major": "9",
                "nvidia.com/gpu.compute.minor": "0",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/cuda.driver-version.major": "570",
                "nvidia.com/cuda.driver-version.minor": "124",
                "nvidia.com/cuda.driver-version.revision": "06",
                "nvidia.com/cuda.runtime-version.major": "12",
                "nvidia.com/cuda.runtime-version.minor": "8",
            }),
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                       "capacity": {"nvidia.com/gpu": "8"}},
        }],
        ("node.k8s.io/v1", "runtimeclasses"): [{
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": meta("nvidia"), "handler": "nvidia",
        }],
        ("resource.k8s.io/v1", "deviceclasses"): [{
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": meta("gpu.nvidia.com"),
            "spec": {"selectors": [{"cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                              "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
        }],
        ("resource.k8s.io/v1", "resourceclaimtemplates"): [{
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": meta("single-gpu", namespace=namespace),
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
        }],
    }


def handler(cluster):
    class Api(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlparse(self.path)
            query = parse_qs(url.query)
            if url.path == "/version":
                return self.answer(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0"})
            parts = [p for p in url.path.split("/") if p]
            # /apis/<group>: the group's discovery, from the versions served.
            if parts[:1] == ["apis"] and len(parts) == 2:
                versions = sorted({v.split("/")[1] for v, _ in cluster
                                   if v.startswith(parts[1] + "/")}, reverse=True)
                if versions:
                    served = [{"groupVersion": f"{parts[1]}/{v}", "version": v}
                              for v in versions]
                    return self.answer(200, {"kind": "APIGroup", "apiVersion": "v1",
                                             "name": parts[1], "versions": served,
                                             "preferredVersion": served[0]})
            # /api/v1/... or /apis/<group>/<version>/...
            if parts[:1] == ["api"]:
                version, rest = parts[1], parts[2:]
            elif parts[:1] == ["apis"] and len(parts) >= 3:
                version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
            else:
                version, rest = None, []
            namespace = None
            if len(rest) == 3 and rest[0] == "namespaces":
                namespace, rest = rest[1], rest[2:]
            if version is None or len(rest) != 1:
                return self.answer(404, {"kind": "Status", "apiVersion": "v1",
                                         "status": "Failure", "reason": "NotFound",
                                         "code": 404, "message": f"{url.path} not found"})
            items = [o for o in cluster.get((version, rest[0]), [])
                     if namespace is None or o["metadata"].get("namespace") == namespace]
            if query.get("watch", [""])[0] in ("1", "true"):
                return self.hold(int(query.get("timeoutSeconds", ["290"])[0]))
            if "as=PartialObjectMetadataList" in self.headers.get("Accept", ""):
                return self.answer(200, {
                    "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"resourceVersion": "1"},
                    "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": o["metadata"]} for o in items]})
            self.answer(200, {"kind": f"{items[0]['kind']}List" if items else "List",
                              "apiVersion": version,
                              "metadata": {"resourceVersion": "1"}, "items": items})

        def hold(self, seconds):
            """A watch on a cluster where nothing changes."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            time.sleep(seconds)
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, fmt, *args):
            sys.stderr.write("%s\n" % (fmt % args))

    return Api


def main():
    port, namespace = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(objects(namespace)))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
