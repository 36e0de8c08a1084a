#!/usr/bin/env python3
"""Write the image layer that turns one root filesystem into another.

Usage: layer-diff.py LOWER.tar UPPER.tar OUT.tar

LOWER and UPPER are root filesystems as tar files (mmdebstrap's, the second made with more
packages). OUT holds every entry of UPPER that LOWER lacks or has otherwise: a regular file
whose content or mode differs, a link with another target, a directory that is new. Stacked
on LOWER, it gives UPPER (entries that UPPER dropped are not whited out: installing packages
removes nothing that matters here). Images that share LOWER then share its blob.
"""

import hashlib
import sys
import tarfile


def key(tar, info):
    """What makes two entries of the same name the same."""
    if info.isfile():
        h = hashlib.sha256()
        with tar.extractfile(info) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return ("file", info.mode, info.uid, info.gid, h.hexdigest())
    if info.issym() or info.islnk():
        return ("link", info.type, info.linkname)
    return (info.type, info.mode, info.uid, info.gid)


def main():
    lower_path, upper_path, out_path = sys.argv[1:4]
    with tarfile.open(lower_path) as lower:
        seen = {info.name: key(lower, info) for info in lower}
    written = set()
    with tarfile.open(upper_path) as upper, tarfile.open(
        out_path, "w", format=tarfile.PAX_FORMAT
    ) as out:
        for info in upper:
            if seen.get(info.name) == key(upper, info):
                continue
            if info.islnk() and info.linkname not in written:
                # A hard link to a file of the lower layer: a copy (a layer's hard links
                # point inside the layer).
                target = upper.getmember(info.linkname)
                copy = tarfile.TarInfo(info.name)
                copy.size, copy.mode, copy.mtime = target.size, target.mode, target.mtime
                copy.uid, copy.gid = target.uid, target.gid
                with upper.extractfile(target) as f:
                    out.addfile(copy, f)
            elif info.isfile():
                with upper.extractfile(info) as f:
                    out.addfile(info, f)
            else:
                out.addfile(info)
            written.add(info.name)
    print(f"layer-diff: {len(written)} entries", file=sys.stderr)


if __name__ == "__main__":
    main()
