#!/usr/bin/env python3
"""Compares two op traces of the same command on two devices, op by op.

    PARLANCE_TRACE_OPS=/tmp/cpu  parlance transcribe ... --device cpu
    PARLANCE_TRACE_OPS=/tmp/cuda parlance transcribe ... --device cuda
    python3 tools/op_trace/compare.py /tmp/cpu /tmp/cuda

The first directory is the baseline. For every node computed in both runs it reports the relative
difference of its output, ||b - a|| / ||a||, next to the largest difference among its inputs: a
node whose output differs much more than its inputs is where the devices part (its kernel rounds
differently, or it amplifies what it was given). Leaves (weights, inputs uploaded from the host)
are the same on both sides and count as exact; data uploaded from the host (the previous graph's
results) are compared like nodes. The record layout is in src/core/op_trace.h.
Uses numpy when present (the GPU machine has it), plain Python otherwise.
"""
import argparse
import math
import os
import struct
import sys
from array import array

try:
    import numpy as np
except ImportError:  # pragma: no cover - plain Python fallback
    np = None

RECORD = struct.Struct("<I4i64s32s4qQ")


def read_trace(path):
    """Records keyed as the two sides can match them: a node by its index in the graph, data
    read from the host by (name, shape, occurrence) (a device may read one input more or less,
    which shifts their indices), sources translated to those keys."""
    nodes = {}
    with open(path, "rb") as f:
        while True:
            head = f.read(RECORD.size)
            if len(head) < RECORD.size:
                break
            index, s0, s1, s2, s3, name, op, n0, n1, n2, n3, count = RECORD.unpack(head)
            raw = f.read(4 * count)
            if np is not None:
                values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
            else:
                values = array("f")
                values.frombytes(raw)
            nodes[index] = {
                "sources": [s for s in (s0, s1, s2, s3) if s >= 0],
                "unknown": any(s == -2 for s in (s0, s1, s2, s3)),  # reads data not recorded
                "leaf": op.startswith(b"NONE\0"),
                "name": name.split(b"\0")[0].decode(errors="replace"),
                "op": op.split(b"\0")[0].decode(errors="replace"),
                "ne": (n0, n1, n2, n3),
                "values": values,
                "count": count,
            }
    key, seen = {}, {}
    for index, n in nodes.items():
        if n["leaf"]:
            # A GPU reads the scheduler's copy of a host input, named "CUDA0#name#0".
            name = n["name"].split("#")[1] if n["name"].count("#") == 2 else n["name"]
            k = (name, n["ne"])
            seen[k] = seen.get(k, 0) + 1
            key[index] = ("input",) + k + (seen[k],)
        else:
            key[index] = index
    keyed = {}
    for index, n in nodes.items():
        n["sources"] = [key.get(s, s) for s in n["sources"]]
        keyed[key[index]] = n
    return keyed


def relative_difference(a, b):
    if np is not None:
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            same = np.array_equal(np.isinf(a), np.isinf(b)) and np.array_equal(a[np.isinf(a)], b[np.isinf(b)])
            keep = np.isfinite(a) & np.isfinite(b)
            if not same or np.any(np.isnan(a) != np.isnan(b)):
                return math.inf
            a, b = a[keep], b[keep]
        norm = float(np.linalg.norm(a))
        diff = float(np.linalg.norm(b - a))
    else:
        norm = diff = 0.0
        for x, y in zip(a, b):
            if math.isinf(x) or math.isinf(y):
                if x != y:
                    return math.inf
                continue
            norm += x * x
            diff += (y - x) ** 2
        norm, diff = math.sqrt(norm), math.sqrt(diff)
    if norm == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / norm


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline", help="trace directory of the reference device (e.g. cpu)")
    ap.add_argument("other", help="trace directory of the device under test (e.g. cuda)")
    ap.add_argument("--top", type=int, default=25, help="rows of the ranking (default 25)")
    ap.add_argument("--floor", type=float, default=1e-7,
                    help="differences below this count as agreement (default 1e-7)")
    args = ap.parse_args()

    graphs = sorted(f for f in os.listdir(args.baseline) if f.endswith(".trace"))
    rows = []  # (ratio, own, inputs, graph, index, op_a, op_b, name, ne)
    per_op = {}
    print(f"{'graph':<18} {'nodes':>6} {'compared':>8}  last node's difference")
    for g in graphs:
        path_b = os.path.join(args.other, g)
        if not os.path.exists(path_b):
            print(f"{g:<18} missing in {args.other}")
            continue
        a, b = read_trace(os.path.join(args.baseline, g)), read_trace(path_b)
        ops_a = [(k, n["ne"]) for k, n in a.items() if not n["leaf"]]
        ops_b = [(k, n["ne"]) for k, n in b.items() if not n["leaf"]]
        if ops_a != ops_b:  # (the op may differ: a CPU custom product for ggml's mul_mat)
            # Device-specific graphs (a GPU decoder step attends per sequence): no node-to-node match.
            print(f"{g:<18} {len(ops_a):>6} nodes differ ({len(ops_a)} vs {len(ops_b)}, or their shapes): not compared")
            continue
        own = {}
        for index in a:  # in the order written: a record's sources come before it
            na, nb = a[index], b.get(index)
            if nb is None or na["count"] == 0 or na["count"] != nb["count"]:
                # A view, a cache write or an unreadable node: as different as what it was made of.
                own[index] = max((own.get(s, 0.0) for s in na["sources"]), default=0.0)
                continue
            own[index] = relative_difference(na["values"], nb["values"])
            if na["leaf"]:  # data from the host: an input of this graph, not an op of it
                continue
            if na["unknown"] or nb["unknown"]:  # an input not recorded (a KV cache): no ratio
                continue
            inputs = max((own.get(s, 0.0) for s in na["sources"]), default=0.0)
            ratio = own[index] / max(inputs, args.floor) if own[index] > args.floor else 0.0
            label = na["op"] if na["op"] == nb["op"] else f"{na['op']}|{nb['op']}"
            rows.append((ratio, own[index], inputs, g, index, label, na["name"], na["ne"]))
            if own[index] > args.floor:
                per_op.setdefault(label, []).append(ratio)
        computed = [i for i in own if a[i]["count"] and not a[i]["leaf"]]
        last = max(computed) if computed else None
        print(f"{g:<18} {len(ops_a):>6} {len(computed):>8}  {own[last]:.3e} ({a[last]['op']} {a[last]['name']})"
              if last is not None else f"{g:<18} {len(a):>6} {0:>8}")

    print(f"\nThe {args.top} nodes whose output differs most beyond their inputs (ratio = own / max(inputs, floor)):")
    print(f"{'ratio':>9} {'own':>10} {'inputs':>10}  {'graph':<18} {'node':>5}  op / name / ne")
    for ratio, o, i, g, index, op, name, ne in sorted(rows, key=lambda r: -r[0])[: args.top]:
        print(f"{ratio:9.2f} {o:10.3e} {i:10.3e}  {g:<18} {index:>5}  {op} / {name} / {list(ne)}")

    print("\nBy op (nodes differing above the floor): count, median and largest ratio")
    for op, ratios in sorted(per_op.items(), key=lambda kv: -max(kv[1])):
        print(f"  {op:<24} {len(ratios):>6} {median(ratios):9.2f} {max(ratios):9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
