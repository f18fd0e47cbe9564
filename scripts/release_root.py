#!/usr/bin/env python3
"""Recomputes the root hash of a swe-ark release snapshot (docs/RELEASES.md).

Usage: python3 release_root.py SNAPSHOT.json
Prints the root; exits 1 when it is not the root the file states.
"""
import hashlib
import json
import sys

snap = json.load(open(sys.argv[1], encoding="utf-8"))
assert snap["format"] == "swe-ark-release" and snap["version"] == 1
instances = sorted(
    (
        {
            "bundle": i["bundle"],
            "instance_id": i["instance_id"],
            "objects": sorted(set(i["objects"])),
        }
        for i in snap["instances"]
    ),
    key=lambda i: i["instance_id"].encode("utf-8"),
)
canonical = json.dumps(
    {"format": "swe-ark-release", "instances": instances, "version": 1},
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
).encode("utf-8")
root = hashlib.sha256(canonical).hexdigest()
print(root)
sys.exit(0 if root == snap["root"] else 1)
