#!/usr/bin/env python3
"""gen-flags.py - generate a deterministic flags file (docs/flags-file.md) for the benchmarks.

    gen-flags.py --flags 30 [--seed 42] [--name-prefix p30] > flags.json
    gen-flags.py --flags 1000 --targeting 3 --named-users 1000 > flags.json

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

--targeting N (issue 26, docs/flags-file.md "rules" and "targets") turns
every Nth flag (the first, the (N+1)th, ...) into a flag with three rules
and named users, and changes nothing else: the same seed with and without
--targeting gives the same names, switches, percentages and segments of
every other flag, so the two files are the bench's pair (bench/run.sh,
key "targeting"). Such a flag has, instead of its "segments":

    rules   [{"segments": ["staff-ids"], "rolloutPercentage": 100},
             {"segments": <its own segments, or one segment the bench
                           user's traits decide when it had none>,
              "rolloutPercentage": 50},
             {"segments": [], "rolloutPercentage": 20}]
    targets {"on": [2/3 of --named-users ids], "off": [the other 1/3]}

and keeps its "rolloutPercentage" as the fallthrough. "staff-ids" tests the
caller's id ("trait": "$userId", op "in") against --staff ids. Named users
and staff are drawn from the ids the bench's distinct-user runs send
(bench-user-1 ... bench-user-N, N = --user-space), so some requests hit them;
the draws use a generator of their own (seeded from --seed), which is
what leaves the rest of the file as it is without --targeting.
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


def project(n, seed, prefix, targeting=0, named=1000, staff=50,
            user_space=100000):
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
    segments = {s: SEGMENTS[s] for s in used}
    if targeting:
        add_targeting(flags, segments, seed, targeting, named, staff,
                      user_space)
    return {"flags": flags, "segments": segments}


def add_targeting(flags, segments, seed, every, named, staff, user_space):
    """Rules and named users on every `every`th flag (in place)."""
    trnd = random.Random("targeting:%d" % seed)
    ids = ["bench-user-%d" % k for k in range(1, user_space + 1)]
    segments["staff-ids"] = {"rules": [
        {"trait": "$userId", "op": "in",
         "values": sorted(trnd.sample(ids, min(staff, len(ids))))}]}
    # the trait segments a rule may use when its flag had none
    trait_segs = list(SEGMENTS)
    for i in range(0, len(flags), every):
        f = flags[i]
        own = f.pop("segments", None) or [trnd.choice(trait_segs)]
        for s in own:
            segments[s] = SEGMENTS[s]
        f["rules"] = [
            {"segments": ["staff-ids"], "rolloutPercentage": 100},
            {"segments": own, "rolloutPercentage": 50},
            {"segments": [], "rolloutPercentage": 20},
        ]
        users = trnd.sample(ids, min(named, len(ids)))
        cut = (2 * len(users) + 2) // 3
        f["targets"] = {"on": users[:cut], "off": users[cut:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flags", type=int, required=True, help="number of flags")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--name-prefix", default="ff")
    ap.add_argument("--targeting", type=int, default=0, metavar="N",
                    help="rules and named users on every Nth flag (0: none)")
    ap.add_argument("--named-users", type=int, default=1000,
                    help="named users (targets) of such a flag")
    ap.add_argument("--staff", type=int, default=50,
                    help="user ids in the \"staff-ids\" segment")
    ap.add_argument("--user-space", type=int, default=100000,
                    help="ids bench-user-1..N the named users are drawn from")
    a = ap.parse_args()
    if a.targeting < 0 or a.named_users < 0 or a.staff < 0 or a.user_space < 1:
        ap.error("--targeting, --named-users, --staff must be >= 0, --user-space >= 1")
    flags = project(a.flags, a.seed, a.name_prefix, a.targeting,
                    a.named_users, a.staff, a.user_space)
    if a.targeting:
        # the file holds a 5 MB project: no indentation
        json.dump(flags, sys.stdout, separators=(",", ":"))
    else:
        json.dump(flags, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
