#!/usr/bin/env python3
"""Reads an OCI image as a container runtime would, for the `image` scenario.

  oci_image.py validate LAYOUT TARBALL REF   the layout's index.json -> manifest -> config and
                                             layers: media types, sizes and sha256 digests
                                             match the blobs, the config's diff_ids match the
                                             uncompressed layers, the index names REF, and the
                                             tarball holds the same blobs plus a docker
                                             manifest.json naming REF. Prints a JSON summary.
  oci_image.py unpack LAYOUT ROOTFS          the manifest's layers, in order, into ROOTFS
                                             (whiteouts applied); prints the config's User,
                                             Entrypoint and Env as JSON.

Every problem is printed on stderr naming the file and what was expected; exit 1.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = ("application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.oci.image.layer.v1.tar")


class Bad(Exception):
    pass


def read_json(path):
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Bad(f"{path}: {e}") from None


def blob(layout, desc, what):
    """The bytes of a descriptor's blob, checked against its digest and size."""
    d = desc.get("digest", "")
    if not d.startswith("sha256:") or len(d) != 71:
        raise Bad(f"{what}: digest `{d}` is not sha256:<64 hex>")
    path = os.path.join(layout, "blobs", "sha256", d[7:])
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Bad(f"{what}: blob {path} missing: {e}") from None
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != d:
        raise Bad(f"{what}: blob {path} has digest {got}, the descriptor says {d}")
    if desc.get("size") != len(data):
        raise Bad(f"{what}: blob {path} is {len(data)} bytes, the descriptor says {desc.get('size')}")
    return data


def load(layout):
    """(index, manifest descriptor, manifest, config, [(layer descriptor, bytes)])."""
    lay = read_json(os.path.join(layout, "oci-layout"))
    if lay.get("imageLayoutVersion") != "1.0.0":
        raise Bad(f"{layout}/oci-layout: imageLayoutVersion {lay.get('imageLayoutVersion')!r}, expected '1.0.0'")
    index = read_json(os.path.join(layout, "index.json"))
    if index.get("schemaVersion") != 2:
        raise Bad(f"{layout}/index.json: schemaVersion {index.get('schemaVersion')!r}, expected 2")
    mans = [m for m in index.get("manifests", []) if m.get("mediaType") == MANIFEST]
    if len(mans) != 1:
        raise Bad(f"{layout}/index.json: {len(mans)} image manifests, expected exactly 1")
    mdesc = mans[0]
    manifest = json.loads(blob(layout, mdesc, "index.json manifests[0]"))
    if manifest.get("schemaVersion") != 2 or manifest.get("mediaType") != MANIFEST:
        raise Bad("manifest: schemaVersion/mediaType are not those of an OCI image manifest")
    cdesc = manifest.get("config", {})
    if cdesc.get("mediaType") != CONFIG:
        raise Bad(f"manifest config: mediaType {cdesc.get('mediaType')!r}, expected {CONFIG}")
    config = json.loads(blob(layout, cdesc, "manifest config"))
    layers = []
    for i, l in enumerate(manifest.get("layers", [])):
        if l.get("mediaType") not in LAYER_TYPES:
            raise Bad(f"manifest layers[{i}]: mediaType {l.get('mediaType')!r}, expected one of {LAYER_TYPES}")
        layers.append((l, blob(layout, l, f"manifest layers[{i}]")))
    if not layers:
        raise Bad("manifest: no layers")
    return index, mdesc, manifest, config, layers


def uncompressed(desc, data):
    return gzip.decompress(data) if desc["mediaType"].endswith("+gzip") else data


def validate(layout, tarball, ref):
    index, mdesc, manifest, config, layers = load(layout)
    diff_ids = config.get("rootfs", {}).get("diff_ids", [])
    if len(diff_ids) != len(layers):
        raise Bad(f"config: {len(diff_ids)} diff_ids for {len(layers)} layers")
    for i, ((desc, data), want) in enumerate(zip(layers, diff_ids)):
        got = "sha256:" + hashlib.sha256(uncompressed(desc, data)).hexdigest()
        if got != want:
            raise Bad(f"config rootfs.diff_ids[{i}] is {want}, the uncompressed layer is {got}")
    for key in ("architecture", "os"):
        if not config.get(key):
            raise Bad(f"config: no {key}")
    if mdesc.get("platform", {}).get("architecture") != config["architecture"]:
        raise Bad("index.json platform.architecture differs from the config's")
    repo, _, tag = ref.rpartition(":")
    ann = mdesc.get("annotations", {})
    if ann.get("org.opencontainers.image.ref.name") != tag:
        raise Bad(f"index.json: org.opencontainers.image.ref.name {ann.get('org.opencontainers.image.ref.name')!r}, expected {tag!r}")
    if ann.get("io.containerd.image.name") != ref:
        raise Bad(f"index.json: io.containerd.image.name {ann.get('io.containerd.image.name')!r}, expected {ref!r}")
    labels = config.get("config", {}).get("Labels", {})
    for k in ("org.opencontainers.image.title", "org.opencontainers.image.version",
              "org.opencontainers.image.revision", "org.opencontainers.image.licenses"):
        if not labels.get(k):
            raise Bad(f"config: OCI label {k} missing")
    if labels["org.opencontainers.image.version"] != tag:
        raise Bad(f"config: label version {labels['org.opencontainers.image.version']!r} is not the tag {tag!r}")
    # The tarball: the same layout, plus docker's manifest.json.
    try:
        with tarfile.open(tarball) as t:
            members = {m.name: m for m in t.getmembers() if m.isfile()}
            read = lambda n: t.extractfile(members[n]).read() if n in members else None
            for name in ("oci-layout", "index.json"):
                with open(os.path.join(layout, name), "rb") as f:
                    if read(name) != f.read():
                        raise Bad(f"{tarball}: {name} differs from the layout's")
            for d in [mdesc] + [manifest["config"]] + [l for l, _ in layers]:
                n = "blobs/sha256/" + d["digest"][7:]
                if read(n) is None or hashlib.sha256(read(n)).hexdigest() != d["digest"][7:]:
                    raise Bad(f"{tarball}: {n} missing or altered")
            dm = json.loads(read("manifest.json") or b"null")
    except (OSError, tarfile.TarError) as e:
        raise Bad(f"{tarball}: {e}") from None
    if not (isinstance(dm, list) and len(dm) == 1):
        raise Bad(f"{tarball}: manifest.json is not a list of one image")
    dm = dm[0]
    if dm.get("RepoTags") != [ref]:
        raise Bad(f"{tarball}: manifest.json RepoTags {dm.get('RepoTags')}, expected [{ref!r}]")
    if dm.get("Config") != "blobs/sha256/" + manifest["config"]["digest"][7:]:
        raise Bad(f"{tarball}: manifest.json Config is not the OCI config blob")
    if dm.get("Layers") != ["blobs/sha256/" + l["digest"][7:] for l, _ in layers]:
        raise Bad(f"{tarball}: manifest.json Layers are not the OCI layers in order")
    print(json.dumps({
        "manifest": mdesc["digest"], "config": manifest["config"]["digest"],
        "layers": len(layers),
        "compressed": sum(len(d) for _, d in layers),
        "uncompressed": sum(len(uncompressed(l, d)) for l, d in layers),
        "user": config.get("config", {}).get("User", ""),
        "architecture": config["architecture"],
    }))


def inside(root, path):
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def unpack(layout, rootfs):
    _, _, _, config, layers = load(layout)
    os.makedirs(rootfs, exist_ok=True)
    root = os.path.realpath(rootfs)
    for i, (desc, data) in enumerate(layers):
        with tarfile.open(fileobj=io.BytesIO(uncompressed(desc, data))) as t:
            for m in t.getmembers():
                name = os.path.normpath(m.name.lstrip("/"))
                if name == "." or name.startswith(".."):
                    raise Bad(f"layer {i}: entry {m.name!r} leaves the root filesystem")
                parent, base = os.path.split(name)
                if not inside(root, os.path.join(root, parent)):
                    raise Bad(f"layer {i}: {m.name!r} would be written through a link outside the root")
                if base == ".wh..wh..opq":
                    d = os.path.join(root, parent)
                    for e in os.listdir(d) if os.path.isdir(d) else []:
                        p = os.path.join(d, e)
                        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
                    continue
                if base.startswith(".wh."):
                    p = os.path.join(root, parent, base[4:])
                    if os.path.isdir(p) and not os.path.islink(p):
                        shutil.rmtree(p)
                    elif os.path.lexists(p):
                        os.remove(p)
                    continue
                target = os.path.join(root, name)
                if os.path.lexists(target) and not (m.isdir() and os.path.isdir(target)):
                    shutil.rmtree(target) if os.path.isdir(target) and not os.path.islink(target) else os.remove(target)
                try:
                    t.extract(m, root, numeric_owner=True, filter="fully_trusted")
                except TypeError:  # Python without extraction filters
                    t.extract(m, root, numeric_owner=True)
    c = config.get("config", {})
    print(json.dumps({"User": c.get("User", ""), "Entrypoint": c.get("Entrypoint", []), "Env": c.get("Env", [])}))


def main():
    try:
        if len(sys.argv) == 5 and sys.argv[1] == "validate":
            validate(*sys.argv[2:])
        elif len(sys.argv) == 4 and sys.argv[1] == "unpack":
            unpack(*sys.argv[2:])
        else:
            sys.exit(__doc__)
    except Bad as e:
        print(f"oci_image: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
