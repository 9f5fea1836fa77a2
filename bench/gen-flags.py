#!/usr/bin/env python3
"""gen-flags.py - generate a deterministic flags file (docs/flags-file.md) for the benchmarks.

    gen-flags.py --flags 30 [--seed 42] [--name-prefix p30] > flags.json

The project mixes rollout percentages (0, fractional, 100), disabled flags,
flags without segments and flags gated by one or two segments. The segments
use the operators in, eq with ignoreCase, regex (with and without
ignoreCase), semver_gt and gte, on the traits the benchmark user sends
(bench/run.sh):

    userId=bench-user-7 plan=pro country=de appVersion=2.3.1
    email=ana.silva@example.com sessions=42

so that most rules really run: some segments match the user, some fail on
their first rule and some on their last one. The same seed always gives the
same file; a bigger project is built the same way with more flags.
"""
import argparse
import json
import random
import sys

# Segments referenced by the flags. Rules are evaluated in order, a segment
# matches when all of them match.
SEGMENTS = {
    "pro": {"rules": [
        {"trait": "plan", "op": "in", "values": ["pro", "enterprise", "team"]}]},
    "german": {"rules": [
        {"trait": "country", "op": "eq", "value": "DE", "ignoreCase": True}]},
    "staff": {"rules": [
        {"trait": "email", "op": "regex", "value": "@(example|bench)\\.com$",
         "ignoreCase": True}]},
    "new-app": {"rules": [
        {"trait": "appVersion", "op": "semver_gt", "value": "2.0.0"}]},
    "power": {"rules": [
        {"trait": "sessions", "op": "gte", "value": 10}]},
    "pro-dach": {"rules": [
        {"trait": "plan", "op": "in", "values": ["pro", "enterprise"]},
        {"trait": "country", "op": "in", "values": ["de", "at", "ch"],
         "ignoreCase": True},
        {"trait": "appVersion", "op": "semver_gt", "value": "1.9.5"}]},
    "heavy-staff": {"rules": [
        {"trait": "sessions", "op": "gte", "value": 25},
        {"trait": "email", "op": "regex", "value": "^[a-z]+\\.[a-z]+@"}]},
    # These do not match the benchmark user (first or last rule fails).
    "french": {"rules": [
        {"trait": "country", "op": "eq", "value": "fr", "ignoreCase": True}]},
    "next-major": {"rules": [
        {"trait": "plan", "op": "in", "values": ["pro", "enterprise"]},
        {"trait": "sessions", "op": "gte", "value": 5},
        {"trait": "appVersion", "op": "semver_gt", "value": "3.0.0"}]},
    "whales": {"rules": [
        {"trait": "sessions", "op": "gte", "value": 1000}]},
}

PERCENTAGES = [0, 5, 10, 12.5, 25, 33.333, 50, 50, 75, 90, 100, 100, 100]
WORDS = ["checkout", "search", "banner", "cart", "promo", "login", "export",
         "chat", "theme", "billing", "upload", "wizard", "reports", "invite"]


def project(n, seed, prefix):
    rnd = random.Random(seed)
    seg_names = list(SEGMENTS)
    flags = []
    for i in range(n):
        flag = {
            "name": "%s-%04d-%s" % (prefix, i, rnd.choice(WORDS)),
            # one flag in ten is switched off with its kill switch
            "enabled": rnd.random() >= 0.1,
            "rolloutPercentage": rnd.choice(PERCENTAGES),
        }
        k = rnd.choices([0, 1, 2], weights=[35, 45, 20])[0]
        if k:
            flag["segments"] = rnd.sample(seg_names, k)
        flags.append(flag)
    used = sorted({s for f in flags for s in f.get("segments", [])})
    return {"flags": flags, "segments": {s: SEGMENTS[s] for s in used}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flags", type=int, required=True, help="number of flags")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--name-prefix", default="ff")
    a = ap.parse_args()
    json.dump(project(a.flags, a.seed, a.name_prefix), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
