#!/usr/bin/env python3
"""Two real-data trials side by side (scripts/trial.py --out A.json, --out B.json): what
changed between them, instance by instance and context by context.

Prints, for every instance of either: the validation (kept exactly / covering / differing /
not validated, with the FAIL_TO_PASS / PASS_TO_PASS counts), the gold replay offline, and
whether the bundle id is the same; for every context: whether it locked and whether the lock
id is the same. Then the counts. Exit 0 when the verdicts, lists and gold results are the same
in both (bundle and lock ids may differ: they are reported, not judged), 1 otherwise.

Usage: python3 scripts/trial_diff.py BEFORE.json AFTER.json [--markdown]
"""

import argparse
import json
import sys


def verdict(r):
    if not r:
        return "-"
    v = r.get("validation", "-")
    if v == "kept":
        return f'kept, {r.get("match", "exact")} ({r.get("f2p")}/{r.get("p2p")})'
    return v.split(":")[0] + (": " + v.split(":")[1].strip() if v.count(":") >= 1 else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    a, b = (json.load(open(p)) for p in (args.before, args.after))
    same_outcome, changed, same_bundle, new_bundle = 0, [], 0, []
    rows = []
    for iid in sorted(set(a["instances"]) | set(b["instances"])):
        ra, rb = a["instances"].get(iid), b["instances"].get(iid)
        va, vb = verdict(ra), verdict(rb)
        ga, gb = (ra or {}).get("gold", "-"), (rb or {}).get("gold", "-")
        lists_a = ((ra or {}).get("f2p"), (ra or {}).get("p2p"), (ra or {}).get("match"))
        lists_b = ((rb or {}).get("f2p"), (rb or {}).get("p2p"), (rb or {}).get("match"))
        ba, bb = (ra or {}).get("bundle"), (rb or {}).get("bundle")
        bundle = "-" if not ba and not bb else ("same" if ba == bb else "new")
        if bundle == "same":
            same_bundle += 1
        elif bundle == "new":
            new_bundle.append(iid)
        if va == vb and ga == gb and lists_a == lists_b:
            same_outcome += 1
        else:
            changed.append(iid)
        rows.append((iid, va, vb, ga, gb, bundle))
    locks = []
    for ctx in sorted(set(a["contexts"]) | set(b["contexts"])):
        ca, cb = a["contexts"].get(ctx, {}), b["contexts"].get(ctx, {})
        locks.append((ctx, ca.get("locked"), cb.get("locked"), ca.get("lock_id"),
                      cb.get("lock_id")))
    if args.markdown:
        print("| instance | validation before | validation after | gold before | gold after "
              "| bundle id |")
        print("| --- | --- | --- | --- | --- | --- |")
        for iid, va, vb, ga, gb, bundle in rows:
            print(f"| {iid} | {va[:90]} | {vb[:90]} | {ga} | {gb} | {bundle} |")
    else:
        for iid, va, vb, ga, gb, bundle in rows:
            mark = " " if iid not in changed else "*"
            print(f"{mark} {iid}: {va[:70]} -> {vb[:70]}; gold {ga} -> {gb}; bundle {bundle}")
    print()
    for ctx, la, lb, ia, ib in locks:
        if la != lb:
            print(f"* context {ctx}: locked {la} -> {lb}")
        elif ia and ib and ia != ib:
            print(f"  context {ctx}: another lock id ({ia[:12]} -> {ib[:12]})")
    print(f"\n{len(rows)} instances: {same_outcome} with the same verdict, lists and gold result, "
          f"{len(changed)} changed{': ' + ', '.join(changed) if changed else ''}; bundle ids: "
          f"{same_bundle} the same, {len(new_bundle)} new"
          f"{': ' + ', '.join(new_bundle) if new_bundle else ''}; contexts locked before "
          f"{sum(1 for l in locks if l[1])}, after {sum(1 for l in locks if l[2])}")
    return 0 if not changed else 1


if __name__ == "__main__":
    sys.exit(main())
