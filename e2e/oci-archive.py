#!/usr/bin/env python3
"""Write an OCI image archive that `ctr images import` reads, with no registry and no daemon.

Usage: oci-archive.py OUT.tar < SPEC.json

SPEC: {"images": [{"names": ["ubuntu:noble", ...],
                   "layers": ["/path/layer.tar", ...],       # uncompressed tar files, bottom first
                   "config": {"Cmd": [...], "Env": [...], ...}}, ...]}

Every image becomes one manifest in index.json, once per name (annotation
io.containerd.image.name, normalised to docker.io/library/ where a name has no registry, as
containerd does). Images that share a layer file share its blob.
"""

import hashlib
import io
import json
import sys
import tarfile

OCI = "application/vnd.oci.image"


def digest_of(path):
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def full_name(name):
    """The name containerd stores for NAME (as `docker.io/library/ubuntu:noble`)."""
    first, _, rest = name.partition("/")
    if not rest:
        return "docker.io/library/" + name
    if "." not in first and ":" not in first and first != "localhost":
        return "docker.io/" + name
    return name


class Archive:
    def __init__(self, path):
        self.tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT)
        self.written = set()

    def add_bytes(self, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        self.tar.addfile(info, io.BytesIO(data))

    def blob_bytes(self, data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if digest not in self.written:
            self.add_bytes("blobs/sha256/" + digest[7:], data)
            self.written.add(digest)
        return digest, len(data)

    def blob_file(self, path, known):
        if path not in known:
            known[path] = digest_of(path)
        digest, size = known[path]
        if digest not in self.written:
            self.tar.add(path, arcname="blobs/sha256/" + digest[7:], recursive=False)
            self.written.add(digest)
        return digest, size


def main():
    out = sys.argv[1]
    spec = json.load(sys.stdin)
    archive = Archive(out)
    known = {}
    manifests = []
    for image in spec["images"]:
        layers = [archive.blob_file(p, known) for p in image["layers"]]
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": image.get("config", {}),
            "rootfs": {"type": "layers", "diff_ids": [d for d, _ in layers]},
        }
        cdigest, csize = archive.blob_bytes(json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI + ".manifest.v1+json",
            "config": {"mediaType": OCI + ".config.v1+json", "digest": cdigest, "size": csize},
            "layers": [
                {"mediaType": OCI + ".layer.v1.tar", "digest": d, "size": s} for d, s in layers
            ],
        }
        mdigest, msize = archive.blob_bytes(json.dumps(manifest, sort_keys=True).encode())
        for name in image["names"]:
            manifests.append({
                "mediaType": OCI + ".manifest.v1+json",
                "digest": mdigest,
                "size": msize,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": full_name(name)},
            })
    archive.add_bytes("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
    index = {"schemaVersion": 2, "mediaType": OCI + ".index.v1+json", "manifests": manifests}
    archive.add_bytes("index.json", json.dumps(index, indent=1).encode())
    archive.tar.close()


if __name__ == "__main__":
    main()
