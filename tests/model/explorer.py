#!/usr/bin/env python3
"""An interleaving explorer for the voucher service (issue 23).

A Hypothesis RuleBasedStateMachine drives the REAL parts, one atomic step per
rule, against the stack's PostgreSQL, Redis and Kafka:

- gateway steps: the Lua scripts exactly as the gateway calls them (claim,
  reserve, confirm, cancel begin and finish, forget), each event put in an
  in-test queue; an answer (201, 200) is recorded only once the event is
  delivered, as the gateway answers;
- Kafka delivery: a queued event is produced to the voucher's partition (ack),
  reported "not persisted" (the gateway's forget path runs), stored without an
  answer (possibly persisted), or lost (timed out);
- writer steps: the next N events of the partition through the writer's batch
  (Writer: the real wr_apply_batch(), a refused batch bisected under
  savepoints as wr_pg.c does) and a commit of the writer group's offsets, or a crash
  before the commit; a restart from the committed offsets; a redelivery;
- reconciler steps: the real voucher-reconciler daemon, stopped at its pause
  points (after the tail, after the counters, before the repairs, before each
  repair script), advanced one point per step;
- faults: delete one key of the voucher, roll the orders hash back to an older
  value (a rollback that keeps every use's count), Redis losing its last k
  writes (rollback: a crash under appendfsync everysec, a restore from an older
  copy), the clock moving past the grace;
- the restart fence: after a rollback the gateway steps answer 503 until the
  reconciler verified Redis again (fence.lua, voucher:fence == run_id).

The promises are checked after every step (invariants) and at quiescence
(teardown). Time is the explorer's own (clock_shim.c, preloaded into the
daemon): it moves only when a step says so. A broken promise is classified
as one of issue 22's seven races, or something else, by what the reconciler's
hops did (classify()). See tests/model/README.md.
"""
import argparse
import atexit
import collections
import datetime
import functools
import json
import mmap
import os
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

import psycopg2
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from hypothesis import HealthCheck, Phase, settings, target
from hypothesis.errors import Flaky, FlakyStrategyDefinition
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule, run_state_machine_as_test)

HERE = os.path.dirname(os.path.abspath(__file__))
# The bases of the window sweeps (an aim's --sweep): sequences that leave a repair to do.
BASES = os.path.join(HERE, "bases")
sys.path.insert(0, os.path.join(HERE, "..", "..", "common"))
import embed  # noqa: E402  (common/embed.py: a script's "-- @include" lines)
import redis_model  # noqa: E402  (common/redis_model.py: proto/redis-model.json)
import mutants  # noqa: E402  (tests/model/mutants.py: the mutants' files)
TOPIC = os.environ.get("VOUCHER_KAFKA_TOPIC", "voucher-events")
GROUP = os.environ.get("VOUCHER_WRITER_GROUP", "voucher-writer")
PARTITIONS = 12
PAUSES = ["reconciler-after-tail", "reconciler-after-remaining", "reconciler-before-repair",
          "reconciler-each-repair", "reconciler-campaign-after-numbers",
          "reconciler-campaign-before-repair", "reconciler-before-fence",
          "reconciler-orders-scanned"]
SHORT = {"reconciler-after-tail": "after-tail", "reconciler-after-remaining": "after-remaining",
         "reconciler-before-repair": "before-repair", "reconciler-each-repair": "each-repair",
         "reconciler-campaign-after-numbers": "campaign-after-numbers",
         "reconciler-campaign-before-repair": "campaign-before-repair",
         "reconciler-before-fence": "before-fence",
         "reconciler-orders-scanned": "orders-scanned"}
# A voucher's example has no campaign pass: a campaign's point stands for its voucher twin.
VOUCHER_TWIN = {"campaign-after-numbers": "after-remaining",
                "campaign-before-repair": "before-repair"}

# Time, in ms. GRACE is the reconciler's --grace; DELIVERY is the gateway's Kafka delivery
# timeout (an event acknowledged later than this after its script answers 503 instead, as
# the real gateway would have given up): DELIVERY < GRACE, as proto/redis-keys.md requires.
GRACE = int(os.environ.get("EXPLORER_GRACE_MS", "600"))
DELIVERY = int(os.environ.get("EXPLORER_DELIVERY_MS", "450"))
HOLD_LIVE = 120000   # a hold's heldUntil in the future: it stays held through the example
HOLD_PAST = -5000    # a hold already past heldUntil + grace: the reconciler may expire it
HOLD_SHORT = 250     # a hold that can be confirmed now and expires after a wait_grace or two
TTL = {"live": HOLD_LIVE, "past": HOLD_PAST, "short": HOLD_SHORT}
PER_USER = 9         # the per-customer limit never binds: the promises under test are others
ORDERS = 3
CUSTOMERS = 2
# The reconciler's admin endpoint: base port + 15 (the integration tests use + 12 and + 13).
ADMIN_PORT = int(os.environ.get("VOUCHER_PORT_BASE", "15400")) + 15
FAULT_KEYS = ["remaining", "orders", "users"]  # the keys delete_key may lose (--fault-keys)
# A campaign's example loses taken where a voucher's loses remaining (no counter).
CAMPAIGN_KEY = {"remaining": "taken"}
# Which voucher examples run with a replica and WAIT instead of the restart fence, as on a Redis
# Cluster (--replica never|mix|only; README, "Failover under WAIT"): drawn per example.
REPLICA = {"mode": "never"}
REPLICA_DRAW = {"mix": [False, True], "only": [True], "never": [False]}
# The WAIT of the gateway steps and of the reconciler in such an example, in ms: a replica whose
# link is up answers at once (a timeout only bounds the wait, in real time: 20 ms came short on
# a loaded machine with the link up), one whose link is down never.
WAIT_MS = 300
# The scripts after which a gateway step waits for the replica (replicas_short()), as
# gw_reserve_publish.c and gw_holds.c do: a reservation (new or a retry), a confirm, a cancel's
# begin; not a cancel's finish (proto/redis-keys.md, "Redis Cluster"). tests/model/gateway_calls.py
# checks the gateway.
WAITED = ("reserve", "confirm", "release_begin")
# Which examples are of a campaign (--campaign): drawn per example ("mix"), all, or none.
CAMPAIGN = {"mode": "mix"}
# The reconciler's count of the slices of due holds it released from targeted reads (rc_wave.c).
SLICES_METRIC = "voucher_reconciler_expiry_slices_total"
# Which voucher examples run the reconciler with its periodic full read (--targeted): then a
# voucher busy only with events in flight is judged by a targeted read (rc_plan_judge_targeted()),
# a quiet one by its numbers, and only the first pass reads it in full (VOUCHER_RECONCILE_FULL_EVERY
# counts real time, which no step moves: 1 h). The others read it in full every pass.
TARGETED = {"mode": "mix"}
TARGETED_DRAW = {"mix": [False, True], "only": [True], "never": [False]}
CAMPAIGN_DRAW = {"mix": [False, True], "only": [True], "never": [False]}
# Which examples are of a direct voucher (--mode; README, "A direct voucher's example"): drawn
# per example ("mix": one in four, so that the bounded run's time grows by about a minute), all
# of them ("direct") or none ("flash": the vouchers and campaigns decided in Redis).
DIRECT = {"mode": "mix"}
DIRECT_DRAW = {"mix": [False, False, False, True], "direct": [True], "flash": [False]}
# The rules of a direct voucher's example, and those both kinds draw; every other rule is a
# flash voucher's or a campaign's (Redis, the gateway's events, the reconciler daemon).
DIRECT_RULES = {"d_reserve", "d_confirm", "d_cancel", "d_end", "d_expire", "relay_next",
                "relay_crash", "relay_real", "kafka_down", "kafka_up", "d_forge"}
SHARED_RULES = {"writer_apply", "writer_redeliver", "wait_grace"}
# A flash voucher's example with a direct twin (--twin; README, "A direct twin"): a direct
# voucher of the same total whose reservations (d_reserve_twin) name the flash voucher's
# orderIds, so that one orderId meets both modes. Drawn per flash voucher's example ("mix": one
# in three), in all of them ("only") or none ("never"). claim_ignored: the twin's reservation
# goes to dr_reserve under another code's claim (--twin-claim-ignored: the mutant
# direct-claim-ignored, in the explorer's Python).
TWIN = {"mode": "mix", "claim_ignored": False}
TWIN_DRAW = {"mix": [False, False, True], "only": [True], "never": [False]}
# How a twin's dr_reserve ends, as the gateway sees it: answered, committed with no answer back
# (the connection broke after the commit: 503, the claim left), or rolled back (503, the same).
TWIN_END = ["answer", "answer", "lost", "cut"]
# The outbox relay of the model (relay_next()): how many unsent rows a take reads (small, so that
# a crash or Kafka's outage falls inside a voucher's events), and whether it marks them sent
# before Kafka's delivery report (--relay-mark-early: the mutant relay-marks-before-report).
RELAY = {"batch": 2, "mark_early": False}
# The reconciler's own relay (relay_real()): `voucher-reconciler --once`, which relays the outbox
# after its pass, with a grace no hold of an example reaches (its pass expires nothing: the
# model's expiry is d_expire) and the pause point where the explorer kills it between the
# produce and the mark (rc_outbox.c).
RELAY_REAL_GRACE = "24h"
RELAY_PAUSE = "reconciler-outbox-produced"
# dr_expire's slice (VOUCHER_RECONCILER_BATCH): small, so that an expiry may take part of the due.
EXPIRE_BATCH = 2
SAFE32 = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
# The restart fence (proto/redis-keys.md, "The restart fence"): the key holds the run_id of the
# Redis whose state the reconciler last verified; while it differs the gateway refuses (503).
FENCE_KEY = "voucher:fence"
# The order model, as the scripts have it (proto/redis-model.json): the state letters by name
# (S.HELD), the states counted as taken (TAKEN), each script's answers by name
# (A.reserve.NOT_LOADED) and keys in order (script_keys()). Sets of letters are tuples: ""
# (no order) is in no set.
MODEL = redis_model.load()
S, A = MODEL.names()
TAKEN = tuple(MODEL.taken_letters())
HELD_OR_CONFIRMED = (S.HELD, S.CONFIRMED)   # an order that may still be confirmed or replayed
BEGUN = (S.CANCEL_BEGUN, S.EXPIRY_BEGUN)    # a release begun, not finished


def claim_order(r, oid, value, expire_at):
    """The orderId's claim, as gw_reserve_claim.c claim_args() sends it: SET
    voucher-order:{oid} CODE:TOKEN NX GET PXAT expire_at. Returns what it found for value's
    code: "new" (nobody's), "ours" (this code's), "other" (another code's)."""
    prior = r.set("voucher-order:{%s}" % oid, value, nx=True, get=True, pxat=expire_at)
    if prior is None:
        return "new"
    return "ours" if prior.rsplit(":", 1)[0] == value.rsplit(":", 1)[0] else "other"


def claim_value(code, token):
    """A claim's value, CODE:TOKEN, as vc_claim_value() writes it: 32 hex digits of token."""
    return "%s:%032x" % (code, token)


def flash_take(r, scripts, k, code, token, expire_at, customer, oid, held, now):
    """A flash voucher's reservation of a new order, as gw_reserve_claim.c and
    gw_reserve_script.c make it: the claim, reserve.lua "take", then claim.lua keep (a use taken
    under a claim this code had: the claim becomes this request's), forget.lua (a use taken
    under another code's claim, a direct twin's say: given back, 409 ORDER_CONFLICT whatever the
    script said, unclaimed_answered()) or claim.lua release (nothing taken under a new claim).
    Returns (claim, the script's answer, (claim key, claim value)). The caller answers."""
    value = claim_value(code, token)
    key = "voucher-order:{%s}" % oid
    claim = claim_order(r, oid, value, expire_at)
    res = scripts.reserve(k, customer, oid, 100, held, now, 500000)
    if claim == "other":
        if res[0] == A.reserve.TAKEN:
            scripts.forget(k, oid)
    elif res[0] == A.reserve.TAKEN:
        if claim == "ours":
            scripts.claim_keep(key, value, code, expire_at)
    elif res[0] != A.reserve.SAME_ORDER and claim == "new":
        scripts.claim_release(key, value, code, expire_at)
    return claim, res, (key, value)


# dr_reserve's refusals answered with flash mode's status (gw_direct.h GW_DIRECT_ANSWER_MAP).
DR_STATUS = {"RESERVED": 201, "RETRY": 201, "NOT_FOUND": 404, "NOT_ELIGIBLE": 422,
             "NOT_DIRECT": 503}


def twin_take(r, scripts, code, token, expire_at, oid, dr_reserve, fenced=False,
              claim_ignored=False):
    """A direct voucher's reservation of an order the rules let through, as gw_reserve_direct.c
    and gw_reserve_claim.c make it: the claim first (SET NX GET, as flash mode's; fenced, Redis
    refuses it and the request goes on without one, PostgreSQL's unique order_id deciding
    alone); another code's claim is answered 409 ORDER_CONFLICT before dr_reserve
    (gw_reserve_direct_claimed(); claim_ignored: not, the mutant direct-claim-ignored); then
    dr_reserve(), which runs the function and returns its row (answer, discount, amount,
    held_until_ms, remaining), or None when the gateway heard no answer (503: the claim stays,
    a retry is answered from the row). RESERVED under this code's claim keeps it (claim.lua
    keep); a refusal under a new claim releases it (gw_reserve_reject()), except the ones
    answered with gw_reserve_refuse() (an ORDER_CONFLICT with the row's amount, or under this
    code's claim; HOLD_EXPIRED). Returns (claim, answer word or None, HTTP status)."""
    value = claim_value(code, token)
    key = "voucher-order:{%s}" % oid
    claim = "failed" if fenced else claim_order(r, oid, value, expire_at)
    if claim == "other" and not claim_ignored:
        return claim, None, 409
    row = dr_reserve()
    if row is None:
        return claim, None, 503
    word, amount = row[0], row[2]
    if word == "RESERVED" and claim == "ours":
        scripts.claim_keep(key, value, code, expire_at)
    if word in ("RESERVED", "RETRY"):
        return claim, word, 201
    refused = word == "HOLD_EXPIRED" or word == "ORDER_CONFLICT" and (
        amount is not None or claim == "ours")
    if claim == "new" and not refused:
        scripts.claim_release(key, value, code, expire_at)
    return claim, word, DR_STATUS.get(word.split(":")[0], 409)


def script_keys(k, script, n=None):
    """The keys script takes (proto/redis-model.json), in order, as k names them (the first n)."""
    names = [name.rstrip("?") for name in MODEL.scripts[script]["keys"]]
    return [getattr(k, name) for name in names[:n]]
# Whether the gateway steps obey the fence (--no-fence, or a saved case's "fence": false:
# off); the reconciler, the real one, verifies and sets it either way.
FENCE = {"gateway": True}
# Whether the reconciler reads every orders hash in pieces (rc_redis.c, "--orders-scan-above 0"),
# with its pause point between the pieces and their finish (orders-scanned). Off for a saved
# case without "scan": true: those were found with the read at once, and their "next" hops
# stay where they were.
SCAN = {"on": True}
# Every key of an example, for rollback(k)'s snapshots: a voucher's (gw_app_keys(), the
# reconciler's limit and outside, and the gateway's soldout) or a campaign's (proto/campaigns.md), and the
# claims of its orderIds (voucher-order:{ORDERID}).
VOUCHER_SUFFIXES = ["remaining", "users", "orders", "holds", "releasing", "resent", "amounts",
                    "paid", "limit", "outside", "soldout", "leader", "agg"]
CAMPAIGN_SUFFIXES = ["taken", "users", "orders", "holds", "releasing", "resent", "amounts",
                     "paid", "leader", "agg"]


# What Hypothesis raises when an example does not run the same way twice.
HYPOTHESIS_FLAKY = (Flaky, FlakyStrategyDefinition)


class Violation(AssertionError):
    """A broken promise; cls names which of issue 22's races (or what else) broke it."""
    cls = None
    why = None


class Muted(Exception):
    """A broken promise of a kind this run found already (long mode): the example ends quietly,
    so that the search goes on for other kinds instead of finding the first one again."""


# The rules an example may draw (--rules, an aimed search's): None, every rule but those off by
# default (DEFAULT_OFF: pg_drift's docstring says why).
RULES = {"on": None}
DEFAULT_OFF = {"pg_drift"}
# An example's shape: its total_limit and how many orders it uses, drawn from these (--total,
# --orders: an aimed search narrows them). Orders: 1 twice as often (every race of issue 22 needs
# one order, and with fewer the steps meet on it more often).
SHAPE = {"total": [1, 2, 3], "orders": [1, 1, 2, 3]}


def only(name):
    """Every rule: drawn only when the run allows it (--rules), and only in the examples of its
    kind: a direct voucher's rules in a direct voucher's example, the others in the others."""
    def allowed(self):
        if name not in SHARED_RULES and getattr(self, "direct", False) != (name in DIRECT_RULES):
            return False
        return name in RULES["on"] if RULES["on"] is not None else name not in DEFAULT_OFF
    return precondition(allowed)


def guarded(f):
    """Every rule: a no-op once its example is muted; a muted violation ends the example."""

    @functools.wraps(f)
    def run(self, *args, **kwargs):
        if getattr(self, "muted", False):
            return None
        try:
            return f(self, *args, **kwargs)
        except Muted:
            self.muted = True
            return None
    return run


# Failures the current code is known to have, by class: in the bounded run an example that
# breaks a promise of one of these classes ends quietly (it is counted and reported) and the
# seed goes on; any other failure fails the suite. Issue 22's seven races are fixed on main.
KNOWN = {
    # None. rollback-201-released and rollback-answer-after-cancel (a Redis rolled back to before
    # an order forgot its release, the fence did not put it back, and a retry of the orderId was
    # answered 201 and released) were known failures from the first long run with rollbacks
    # until 2b0bbe8 and c4c8aa1 (regressions/rollback-fence-forgets-*.json).
    # The voucher's since the lost orders hash is refused and rebuilt (rebuild.lua,
    # test_orders_loss): "other-answer-after-cancel", "other-undersold" and "other-users"
    # were known failures before it (tests/model/README.md). The campaign's five, found by the
    # campaign mode's first runs (README, "What the campaign mode found"; each has its
    # regressions/campaign-*.json), are fixed too: campaign-users-high (a rebuild after taken
    # was lost sets users), campaign-answer-after-cancel and campaign-hold-stuck (amounts
    # without orders is a loss, campaign_lost.lua), campaign-keys-not-rebuilt (the hold's code
    # read from its orderId's claim, rc_campaign.c) and campaign-taken-orphan (a rebuild after
    # orders was lost frees the codes no order holds, campaign_rebuild.lua).
}

def known(msg, cls=None):
    """Why a failure is a known failure of the current code, or None; by its class (classify()):
    a failure put down to one of issue 22's seven races is never known, they are fixed on main."""
    return None if cls in RACES else KNOWN.get(cls)


class Clock:
    """The explorer's clock (README, "Time"): milliseconds since the epoch that move only when
    a step says so. The reconciler reads it through clock_shim.c (EXPLORER_CLOCK_FILE, a file
    of one int64 mapped by both); the scripts get it as their nowMs argument, as the gateway
    passes its own clock. Each step moves it by 1 ms, a wait by the grace."""

    def __init__(self, path):
        self.path = path
        with open(path, "wb") as f:
            f.write(b"\0" * 8)
        self.f = open(path, "r+b")
        self.map = mmap.mmap(self.f.fileno(), 8)
        self.ms = 0

    def set(self, ms):
        self.ms = int(ms)
        struct.pack_into("=q", self.map, 0, self.ms)

    def advance(self, ms):
        self.set(self.ms + ms)


CLOCK = None


def now_ms():
    return CLOCK.ms


def iso(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def parse_ms(s):
    return int(datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000 + 0.5)


def murmur2(data):
    """Kafka's murmur2 (librdkafka's murmur2_random for a non-empty key)."""
    m, r = 0x5bd1e995, 24
    h = (0x9747b28c ^ len(data)) & 0xffffffff
    n4 = len(data) // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xffffffff
        k ^= k >> r
        k = (k * m) & 0xffffffff
        h = (h * m) & 0xffffffff
        h ^= k
    rest, idx = len(data) % 4, n4 * 4
    if rest == 3:
        h ^= data[idx + 2] << 16
    if rest >= 2:
        h ^= data[idx + 1] << 8
    if rest >= 1:
        h ^= data[idx]
        h = (h * m) & 0xffffffff
    h ^= h >> 13
    h = (h * m) & 0xffffffff
    h ^= h >> 15
    return h


def partition_of(code):
    return (murmur2(code.encode()) & 0x7fffffff) % PARTITIONS


# ---------------------------------------------------------------------------
# The gateway's script calls, per version of the scripts (selectable: --adapter).

class Keys:
    def __init__(self, code):
        self.code = code

    def __getattr__(self, name):
        return MODEL.families["voucher"]["format"] % (self.code, name)


class CampaignKeys:
    """A campaign's keys, all under its hash tag {c<ID>} (proto/campaigns.md, "Redis")."""

    def __init__(self, cid):
        self.cid = cid

    def __getattr__(self, name):
        return MODEL.families["campaign"]["format"] % (self.cid, name)


class CurrentScripts:
    """The scripts as the gateway calls them since the retry change (6 keys, 8 args)."""
    name = "current"
    # Whether the gateway forgets a hold whose VoucherReserved Kafka did not persist. No longer:
    # a confirm may have been acknowledged and its write lost in Redis since
    # (regressions/campaign-offers-held-code-4086371106.json); the hold is kept, as for "lost".
    forget_not_persisted = False

    def __init__(self, r, lua_dir):
        self.r = r
        self.src = {}
        # The build's folder holds each script as the gateway sends it; a source
        # folder (common/lua, with its meson.build) has its includes expanded here, and the
        # model's constants put in where a script names them (embed.py --model).
        model = MODEL if os.path.exists(os.path.join(lua_dir, "meson.build")) else None
        for f in os.listdir(lua_dir):
            if f.endswith(".lua"):
                self.src[f[:-4]] = embed.expand_all([os.path.join(lua_dir, f)], model)[0]

    def ev(self, script, keys, args):
        return self.r.eval(self.src[script], len(keys), *keys, *args)

    def has_fence(self):
        """Whether these scripts (and so, the build's reconciler) know the restart fence."""
        return "fence" in self.src

    def fence_check(self):
        """fence.lua check: (the server's run_id, the fence's value or "")."""
        run_id, fence = self.ev("fence", [FENCE_KEY], ["check"])
        return run_id, fence or ""

    def fence_set(self, run_id):
        """fence.lua set RUN_ID: 1 set, 0 the server's run_id is another."""
        return self.ev("fence", [FENCE_KEY], ["set", run_id])

    # The gateway's id, as its sold-out leases name it (gw_soldout.c): one explorer, one gateway.
    gateway_id = "%032x" % random.SystemRandom().getrandbits(128)

    def reserve(self, k, customer, order_id, discount, held, now, amount):
        """As gw_reserve_script.c sends it (tests/model/gateway_calls.py checks it): seven keys (the
        sold-out leases last), eight arguments and the gateway's id, in "take" mode. The
        explorer takes no sold-out snapshot, so no lease is ever there to wait for."""
        return self.ev("reserve", script_keys(k, "reserve"),
                       [customer, PER_USER, order_id, discount, held, now, amount, "take",
                        self.gateway_id])

    def confirm(self, k, order_id, now):
        """As gw_holds.c run_confirm() sends it: the seven keys (users and remaining tell a lost
        orders hash, -7, or a lost counter, -8, from an unknown order), a confirm without a
        total (no rule is read)."""
        return self.ev("confirm", script_keys(k, "confirm"), [order_id, now])

    def cancel_begin(self, k, order_id, now):
        """As gw_holds.c proceed() sends it: the seven keys, the reason "cancel"."""
        return self.ev("release_begin", script_keys(k, "release_begin"),
                       [order_id, "cancel", now])

    def cancel_finish(self, k, order_id):
        return self.ev("release_finish", script_keys(k, "release_finish"), [order_id])

    def forget(self, k, order_id):
        return self.ev("forget", script_keys(k, "forget"), [order_id])

    def claim_release(self, claim_key, value, code, expire_at=None):
        """claim.lua as gw_reserve_claim.c claim_script() calls it: expire_at (the claim's
        PXAT) as its fourth argument, when the caller knows it (a step of an example does)."""
        return self.ev("claim", [claim_key], ["release", value, code] +
                       ([expire_at] if expire_at is not None else []))

    def claim_keep(self, claim_key, value, code, expire_at=None):
        return self.ev("claim", [claim_key], ["keep", value, code] +
                       ([expire_at] if expire_at is not None else []))

    # A campaign's scripts, called as gw_campaign_redeem.c calls them. The guarded ones:
    # campaign_confirm.lua and campaign_release_begin.lua (campaign_guard.lua, then the
    # voucher's script), campaign_forget.lua and campaign_release_finish.lua (the guard and
    # the voucher's work with the campaign's give-back); the build writes each expanded as
    # campaign_SCRIPT.lua. An older version's folder without the first two gets them
    # concatenated here, as its build did. The caller appends the campaign's users, orders and
    # taken keys, and whether PostgreSQL says Redis had the campaign (campaign_loaded(),
    # set per example) and the code.
    campaign_loaded = staticmethod(lambda: True)

    def cev(self, script, keys, args, k, code):
        name = "campaign_" + script
        if name not in self.src:
            parts = ["campaign_guard", script]
            self.src[name] = "".join(self.src[p] if self.src[p].endswith("\n") else
                                     self.src[p] + "\n" for p in parts)
        loaded = "1" if self.campaign_loaded() else "0"
        return self.ev(name, keys + [k.users, k.orders, k.taken], args + [loaded, code])

    def c_reserve(self, k, customer, limit, order_id, discount, held, now, amount, code,
                  expire_loaded):
        return self.ev("campaign_reserve", script_keys(k, "campaign_reserve"),
                       [customer, limit, order_id, discount, held, now, amount, "take", code,
                        expire_loaded])

    def c_confirm(self, k, order_id, now, code):
        return self.cev("confirm", script_keys(k, "confirm", 5), [order_id, now], k, code)

    def c_cancel_begin(self, k, order_id, now, code):
        """resent too: a release begun before is marked there, so that the WAIT covers it."""
        return self.cev("release_begin", script_keys(k, "release_begin", 4),
                        [order_id, "cancel", now], k, code)

    def c_cancel_finish(self, k, order_id, code):
        return self.cev("release_finish", script_keys(k, "release_finish"), [order_id], k, code)

    def c_forget(self, k, order_id, code):
        return self.cev("forget", script_keys(k, "forget"), [order_id], k, code)


class OldScripts(CurrentScripts):
    """The scripts at ab4b730, before the race fixes: reserve.lua 5 keys and 6 args, confirm.lua
    2 keys, no claim.lua (the claim was released with a plain DEL, never taken over); a
    "not persisted" report forgot the hold."""
    name = "ab4b730"
    forget_not_persisted = True

    def reserve(self, k, customer, order_id, discount, held, now, amount):
        return self.ev("reserve", [k.remaining, k.users, k.orders, k.holds, k.resent],
                       [customer, PER_USER, order_id, discount, held, now])

    def confirm(self, k, order_id, now):
        return self.ev("confirm", [k.orders, k.holds], [order_id, now])

    def claim_release(self, claim_key, value, code, expire_at=None):
        return self.r.delete(claim_key)

    def claim_keep(self, claim_key, value, code, expire_at=None):
        return 1


ADAPTERS = {"current": CurrentScripts, "ab4b730": OldScripts}


# ---------------------------------------------------------------------------
# The world shared by every example: connections, the reconciler binary, settings.

class World:
    def __init__(self, build, lua_dir, adapter, shim):
        global CLOCK
        self.build = build
        self.bin_reconciler = os.path.join(build, "reconciler", "voucher-reconciler")
        if not os.access(self.bin_reconciler, os.X_OK):
            sys.exit("explorer: no reconciler at %s (build first)" % self.bin_reconciler)
        # Every orders hash read in pieces (rc_redis.c), so that the gateway steps can land
        # between the pieces and their finish (orders-scanned): a build from before has no
        # such setting, and reads at once.
        usage = subprocess.run([self.bin_reconciler, "--help"], capture_output=True,
                               text=True).stdout
        self.scan_flags = ["--orders-scan-above", "0"] if "--orders-scan-above" in usage else []
        # A wave of holds due released in slices (rc_wave.c): slices of 1 in every other
        # targeted example, so that each due hold is a slice of its own and the gateway steps
        # land between them (each-repair); a build from before has no such setting.
        self.wave_slices = "--expiry-slice" in usage
        self.shim = shim
        if not os.access(shim, os.R_OK):
            sys.exit("explorer: no clock shim at %s (meson compile builds it: tests/model/"
                     "libexplorer_clock.so)" % shim)
        self.pg = psycopg2.connect(os.environ["VOUCHER_PG_DSN"])
        self.pg.autocommit = True
        url = os.environ["VOUCHER_REDIS_URL"]
        self.r = redis.Redis.from_url(url, decode_responses=True)
        self.rb = redis.Redis.from_url(url)   # DUMP and RESTORE (rollback()): bytes
        # The gateway steps' script calls, their claims and their WAITs go on one connection, as
        # a gateway's on one node: WAIT counts the writes of the connection it is sent on.
        self.gw = redis.Redis.from_url(url, decode_responses=True, single_connection_client=True)
        self.scripts = ADAPTERS[adapter](self.gw, lua_dir)
        self.replica = None
        brokers = os.environ["VOUCHER_KAFKA_BROKERS"]
        self.producer = Producer({"bootstrap.servers": brokers, "partitioner": "murmur2_random",
                                  "enable.idempotence": True, "acks": "all", "linger.ms": 0})
        self.consumer = Consumer({"bootstrap.servers": brokers, "group.id": GROUP,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "enable.partition.eof": True, "fetch.wait.max.ms": 5})
        self.admin = AdminClient({"bootstrap.servers": brokers})
        self.topic_refusing = True
        self.topic_writable(True)   # a run that died during an outage left it refusing
        atexit.register(self.topic_writable, True)
        self.scratch = tempfile.mkdtemp(prefix="voucher-explorer.")
        CLOCK = Clock(os.path.join(self.scratch, "clock"))
        CLOCK.set(time.time() * 1000)
        self.seq = 0
        self.pairs = set()
        self.triples = set()
        self.targeting = False      # target() is called only inside Hypothesis's examples
        self.mute_found = False     # long mode: a kind found already ends an example quietly
        self.found_classes = {}     # class -> (seed, seconds into the run) of its first find
        self.muted_examples = collections.Counter()
        self.rules = collections.Counter()
        self.repairs = collections.Counter()  # the reconciler's effects, by kind (coverage)
        # The scripts the reconciler sent, by name (coverage): its each-repair pause names the
        # text it is about to send (VC_PAUSE_WITH in rc_redis_eval()), which is the build's
        # expanded script of that name.
        self.scripts_run = collections.Counter()
        self.lost_answers = collections.Counter()  # confirms' and cancels' -7 and -8 (coverage)
        self.first_violation = None  # (Violation, steps, story) of the seed's first find
        self.flaky_seeds = []        # seeds that ended on an example run differently twice
        self.thawed = collections.Counter()  # frozen leaders' scripts: refused, or ran (coverage)
        self.waits = collections.Counter()   # the gateway steps' WAITs: met, short (coverage)
        # Examples run with the periodic full read (TARGETED), their passes, and the vouchers
        # those passes judged by a targeted read, not in full (coverage).
        self.targeted_examples = self.targeted_passes = self.targeted_reads = 0
        self.wave_slices_run = 0  # slices of due holds released from targeted reads (coverage)
        self.failovers = 0
        # Whether the build's reconciler fences its writes (the leader's token: rc_ scripts).
        self.fencing = "rc_restore" in self.scripts.src
        self.script_names = {text: name for name, text in self.scripts.src.items()}
        self.phases = set()
        self.steps = 0
        self.examples = 0
        self.campaign_examples = 0
        self.fenced = 0             # gateway steps answered 503 by the fence
        self.last_story = []
        self.last_steps = []
        # A direct voucher's calls run as the roles that make them (the gateway's dr_reserve,
        # dr_confirm, dr_cancel; the reconciler's dr_expire and the outbox's two), each in a
        # transaction on a connection of its own (DCall), kept idle between calls.
        self.direct_dsn = {"gw": os.environ.get("VOUCHER_GATEWAY_PG_DSN", os.environ[
            "VOUCHER_PG_DSN"]), "rc": os.environ.get("VOUCHER_RECONCILER_PG_DSN", os.environ[
                "VOUCHER_PG_DSN"])}
        self.idle = {"gw": [], "rc": []}
        self.direct_examples = 0
        self.twin_examples = 0      # flash voucher's examples with a direct twin
        self.twin_calls = collections.Counter()   # the twin's reservations, by claim and answer
        # A direct voucher's examples (coverage): each function's answers, the calls that waited
        # on a lock, were cut or lost their answer, the events the relay sent again.
        self.direct = collections.Counter()
        self.isolate()

    def dconn(self, who):
        """A connection as who ("gw" or "rc") for one direct call, not in autocommit: the call's
        transaction ends when a step commits or rolls it back. Given back with dconn_back()."""
        if self.idle[who]:
            return self.idle[who].pop()
        return psycopg2.connect(self.direct_dsn[who])

    def dconn_back(self, who, conn):
        """Takes back a connection dconn() gave; one not idle (a call cut while it waited) is
        closed instead."""
        if not conn.closed and conn.get_transaction_status() == \
                psycopg2.extensions.TRANSACTION_STATUS_IDLE:
            self.idle[who].append(conn)
        else:
            conn.close()

    def start_replica(self):
        """A replica of the stack's Redis, for the examples under WAIT (--replica): a
        redis-server of the explorer's own (port base + 19, no persistence), followed until the
        link is up. Stopped at exit."""
        import urllib.parse
        u = urllib.parse.urlparse(os.environ["VOUCHER_REDIS_URL"])
        port = int(os.environ.get("VOUCHER_PORT_BASE", "15400")) + 19
        d = os.path.join(self.scratch, "replica")
        os.makedirs(d)
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                "--save", "", "--appendonly", "no", "--replicaof", u.hostname, str(u.port)]
        if u.password:
            args += ["--masterauth", u.password] + (["--masteruser", u.username]
                                                    if u.username else [])
        self.replica_master = (u.hostname, u.port)
        # A full sync starts at once, not after the 5 s the master waits for more replicas by
        # default: a failover re-attaches the replica in every such example.
        self.r.config_set("repl-diskless-sync-delay", 0)
        self.replica_log = open(os.path.join(d, "replica.log"), "w")
        self.replica_proc = subprocess.Popen(args, stdout=self.replica_log,
                                             stderr=subprocess.STDOUT)
        LIVE.add(self.replica_proc)
        self.replica = redis.Redis(host="127.0.0.1", port=port)
        self.replica_attach()

    def replica_attach(self):
        """The replica follows the stack's Redis again (a full sync), until its link is up and
        a WAIT on the master counts it."""
        deadline = time.time() + 30
        while True:
            try:
                self.replica.execute_command("REPLICAOF", *self.replica_master)
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        while time.time() < deadline:
            info = self.replica.info("replication")
            if info.get("master_link_status") == "up" and \
                    self.gw.execute_command("WAIT", 1, 100) >= 1:
                return
            time.sleep(0.01)
        raise RuntimeError("the replica did not follow the stack's Redis in 30 s")

    def end_lock_sessions(self):
        """Ends the PostgreSQL sessions holding the reconciler's advisory lock (as the superuser:
        the reconciler's role's sessions are not the owner's to end), waiting for them to end.
        Returns how many ended."""
        dsn = os.environ["VOUCHER_PG_DSN"] + " user=postgres"
        with psycopg2.connect(dsn) as pg, pg.cursor() as c:
            c.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 20000)) FROM"
                      " pg_locks WHERE locktype = 'advisory' AND objid = x'7461736b'::bigint::oid")
            return c.fetchone()[0]

    def script_at(self, pause_file):
        """The name of the script the reconciler stands before at its each-repair pause (the pause
        file holds its pid, the first key, then the text: VC_PAUSE_WITH in rc_redis_eval()),
        "campaign-read" for a campaign's full read, "?" for a text the build's scripts do not
        have, None for a build from before. A reconciler's write is its rc_ script (the leader's
        token in front: common/lua/leader.lua), counted under the script's own name."""
        try:
            with open(pause_file) as f:
                detail = f.read().split("\n", 2)[2]
        except (OSError, IndexError):
            return None
        if not detail:
            return None
        if detail in ("campaign-read", "confirm-read"):
            return detail
        name = self.script_names.get(detail, "?")
        return name[3:] if name.startswith("rc_") else name

    def sql(self, q, args=None):
        with self.pg.cursor() as c:
            c.execute(q, args)
            return c.fetchall() if c.description else None

    def isolate(self):
        """The explorer owns the stack: every other voucher leaves the reconciler's active window,
        every campaign the reconciler's passes (state FAILED: a pass reads ACTIVE and INACTIVE
        ones), the writer group starts at the end of every partition (no stale tail), and the
        outbox holds nothing to relay (the rows other runs left unsent, which the acting
        reconciler of any example would otherwise publish into the explorer's partitions)."""
        self.sql("UPDATE event_outbox SET sent_at = now() WHERE sent_at IS NULL")
        self.sql("UPDATE voucher SET starts_at = least(starts_at, now() - interval '3 days'),"
                 " ends_at = now() - interval '2 days' WHERE ends_at > now() - interval '1 day'")
        self.sql("UPDATE campaign SET state = 'FAILED' WHERE state IN ('ACTIVE', 'INACTIVE')")
        tps = []
        for p in range(PARTITIONS):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10,
                                                          cached=False)
            tps.append(TopicPartition(TOPIC, p, high))
        self.consumer.commit(offsets=tps, asynchronous=False)

    def topic_writable(self, writable):
        """Kafka down as the producers see it (kafka_down, kafka_up): the topic's
        max.message.bytes set to 1, so that the broker refuses every produce at once
        (MSG_SIZE_TOO_LARGE, a permanent error: the reconciler's relay hears a failed delivery
        report, no retry waits out a timeout), or taken back to the broker's default. Reads
        go on (the writer, the reconciler's pass), as they would not with the broker stopped;
        the reconciler's Kafka address stays the real one, since a refused address fails its
        pass before its relay runs. Waits until the broker describes the new value."""
        if self.topic_refusing == (not writable):
            return
        op = AlterConfigOpType.DELETE if writable else AlterConfigOpType.SET
        res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry("max.message.bytes", None if writable else "1",
                        incremental_operation=op)])
        for f in self.admin.incremental_alter_configs([res]).values():
            f.result(10)
        deadline = time.time() + 20
        while True:
            got = list(self.admin.describe_configs(
                [ConfigResource(ConfigResource.Type.TOPIC, TOPIC)]).values())[0].result(10)
            if (got["max.message.bytes"].value == "1") != writable:
                break
            if time.time() > deadline:
                raise RuntimeError("the topic's max.message.bytes did not change in 20 s")
            time.sleep(0.01)   # polled: the broker applies the change from its metadata log
        self.topic_refusing = not writable

    def produce(self, key, event):
        got = {}

        def cb(err, msg):
            got["err"], got["p"], got["o"] = err, msg.partition(), msg.offset()
        self.producer.produce(TOPIC, key=key.encode(), value=json.dumps(event).encode(),
                              on_delivery=cb)
        self.producer.flush(10)
        if got.get("err") is not None or "o" not in got:
            raise RuntimeError("producing failed: %s" % got.get("err"))
        if got["p"] != partition_of(key):
            raise RuntimeError("partition %d, expected %d" % (got["p"], partition_of(key)))
        return got["o"]

    def produce_raw(self, key, payload):
        """produce() of a text as it is (an outbox row's payload): the relay sends what the
        transaction stored, byte for byte."""
        got = {}

        def cb(err, msg):
            got["err"], got["o"] = err, msg.offset()
        self.producer.produce(TOPIC, key=key.encode(), value=payload.encode(), on_delivery=cb)
        self.producer.flush(10)
        if got.get("err") is not None or "o" not in got:
            raise RuntimeError("producing failed: %s" % got.get("err"))
        return got["o"]

    def high(self, p):
        return self.consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10,
                                                   cached=False)[1]

    def read(self, p, start, end):
        """The messages of partition p at offsets [start, end)."""
        out = []
        if start >= end:
            return out
        self.consumer.assign([TopicPartition(TOPIC, p, start)])
        deadline = time.time() + 10
        while len(out) < end - start and time.time() < deadline:
            for m in self.consumer.consume(end - start - len(out), timeout=1):
                if m.error() is None and start <= m.offset() < end:
                    out.append((m.offset(), m.key().decode() if m.key() else "",
                                json.loads(m.value())))
        self.consumer.unassign()
        if len(out) != end - start:
            raise RuntimeError("read %d of %d messages" % (len(out), end - start))
        return sorted(out, key=lambda x: x[0])

    def commit(self, p, offset):
        self.consumer.commit(offsets=[TopicPartition(TOPIC, p, offset)], asynchronous=False)


WORLD = None
LIVE = set()  # the reconciler daemons this process started and has not stopped yet


def kill_live():
    """At exit (also on SIGTERM): no daemon of ours outlives the explorer."""
    for p in list(LIVE):
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(kill_live)


def on_term(*_):
    kill_live()
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)


# ---------------------------------------------------------------------------

TYPES = {"VoucherReserved": 1, "VoucherConfirmed": 2, "VoucherReleased": 3}
RANK = {None: 0, "RESERVED": 1, "CONFIRMED": 2, "RELEASED": 3}


class Call:
    """A gateway request whose script ran and whose event waits for Kafka's report."""

    def __init__(self, kind, order, event, claim=None):
        self.kind, self.order, self.event, self.claim = kind, order, event, claim
        self.t0 = now_ms()
        self.seq = 0  # the step whose script made it (set by queue())

    def __repr__(self):
        return "%s %s" % (self.kind, self.order)


class DCall:
    """A direct voucher's function call (dr_reserve, dr_confirm, dr_cancel, dr_expire): one
    transaction on a connection of its own (World.dconn()), run in a thread so that it may wait
    on a lock another open call holds, as the second request of one orderId waits on the first's
    insert. Its rows or its error are known once done is set; it commits or rolls back only when
    a step ends it (Explorer.d_finish()). Owns conn until then."""

    def __init__(self, kind, o, who, conn, sql, args, event=None):
        self.kind, self.o, self.who, self.conn, self.event = kind, o, who, conn, event
        self.rows = self.error = None
        self.pid = conn.get_backend_pid()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(sql, args), daemon=True)
        self.thread.start()

    def run(self, sql, args):
        try:
            with self.conn.cursor() as c:
                c.execute(sql, args)
                self.rows = c.fetchall()
        except psycopg2.Error as e:
            self.error = e
        finally:
            self.done.set()

    def answer(self):
        """The function's answer word (its first column), "ERROR" when it raised."""
        if self.error is not None:
            return "ERROR"
        return self.rows[0][0] if self.rows and self.kind != "expire" else ""

    def __repr__(self):
        return self.kind if self.o is None else "%s o%d" % (self.kind, self.o)


# The writer's batch statement, word for word as writer/wr_pg.c prepares it (apply_sql).
APPLY_SQL = ("SELECT wr_apply_batch($1::smallint[], $2::text[], $3::bigint[], $4::text[],"
             " $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[],"
             " $11::bigint[])")
CODE_RE = re.compile(r"[A-Z0-9_-]{1,32}")
AT_KEYS = {"VoucherReserved": "reservedAt", "VoucherConfirmed": "confirmedAt",
           "VoucherReleased": "releasedAt"}
OUT_CONFLICT = 5   # wr_apply_batch()'s outcome: the orderId is another voucher's (WR_OUT_CONFLICT)
OUT_MISMATCH = 7   # a direct voucher's event its row does not bear out (WR_OUT_MISMATCH)


def malformed(e):
    """Why vc_event_decode() refuses event e (a dead letter of class "malformed", never sent to
    PostgreSQL), or None: its checks of a decoded JSON value, in words of its own (the class is
    what counts), not the JSON parser's limits. The writer calls check (writer_calls.py) holds
    it to the real decoder on the malformed events it sends."""
    def has_int(k):
        return isinstance(e.get(k), int) and not isinstance(e.get(k), bool)

    def time_ms(k):
        try:
            return parse_ms(e[k]) if isinstance(e.get(k), str) else None
        except ValueError:
            return None
    if not isinstance(e, dict):
        return "not a JSON object"
    if e.get("type") not in TYPES:
        return "unknown event type %r" % e.get("type")
    if not has_int("version") or e["version"] != 1:
        return "unsupported event version %r" % e.get("version")
    for k in ("code", "orderId"):
        if not isinstance(e.get(k), str):
            return "field %r is missing or not a string" % k
    if not has_int("customerId") or time_ms(AT_KEYS[e["type"]]) is None:
        return "field customerId or %s is missing or wrong" % AT_KEYS[e["type"]]
    amounts = e["type"] == "VoucherReserved" or (
        e["type"] == "VoucherConfirmed" and ("discountAmount" in e or "orderAmount" in e))
    if amounts and not (has_int("discountAmount") and has_int("orderAmount")):
        return "field discountAmount or orderAmount is missing or not an integer"
    if e["type"] == "VoucherReserved" and "heldUntil" in e and time_ms("heldUntil") is None:
        return "field heldUntil is not a time"
    if e["type"] == "VoucherReleased" and not (isinstance(e.get("reason"), str) and
                                               len(e["reason"].encode()) <= 16):
        return "field reason is missing, not a string or longer than 16 bytes"
    if "campaignId" in e and (not has_int("campaignId") or e["campaignId"] < 1):
        return "field campaignId must be a positive integer"
    if not CODE_RE.fullmatch(e["code"]):
        return "field code must match [A-Z0-9_-]{1,32}"
    if not 1 <= len(e["orderId"]) <= 64 or any(
            not 0x21 <= ord(c) <= 0x7e or c in "/?#%" for c in e["orderId"]):
        return "field orderId must be 1..64 printable characters"
    if e["customerId"] <= 0:
        return "field customerId must be a positive integer"
    if amounts and (e["discountAmount"] < 0 or e["orderAmount"] < 0):
        return "amounts must not be negative"
    if e["type"] == "VoucherReleased" and not e["reason"]:
        return "field reason is required for VoucherReleased"
    return None


def batch_params(evs):
    """The statement's eleven array literals for evs, as writer/wr_pg.c params_build() writes
    them: a confirm without figures passes NULL amounts (text_amount()), an event's texts quoted
    with " and \\ escaped (text_quoted()), heldUntil of a reservation only, the reason of a
    release only, no replayed letter, campaignId 0 for a voucher's event."""
    def quoted(s):
        return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')

    def amount(e, k):
        none = e["type"] == "VoucherConfirmed" and "discountAmount" not in e and \
            "orderAmount" not in e
        return "NULL" if none else str(e.get(k, 0) if e["type"] != "VoucherReleased" else 0)
    cols = ([str(TYPES[e["type"]]) for e in evs], [quoted(e["code"]) for e in evs],
            [str(e["customerId"]) for e in evs], [quoted(e["orderId"]) for e in evs],
            [amount(e, "discountAmount") for e in evs], [amount(e, "orderAmount") for e in evs],
            [str(parse_ms(e[AT_KEYS[e["type"]]])) for e in evs],
            [str(parse_ms(e["heldUntil"]) if e["type"] == "VoucherReserved" and "heldUntil" in e
                 else 0) for e in evs],
            [quoted(e["reason"] if e["type"] == "VoucherReleased" else "") for e in evs],
            [quoted("") for e in evs], [str(e.get("campaignId", 0)) for e in evs])
    return ["{%s}" % ",".join(c) for c in cols]


def dlt_class(sqlstate):
    """writer/wr_pg.c wr_pg_dlt_class(): a refused event's class by its SQLSTATE."""
    if sqlstate == "23503":
        return "unknown-voucher"
    return "constraint" if sqlstate.startswith("23") else "rejected"


class Writer:
    """The writer's batch, in Python around the writer's real SQL, on a psycopg2 connection in
    autocommit (pg). apply() mirrors writer/wr_writer.c send_batch() and finish_batch() with
    writer/wr_pg.c wr_pg_send() and wr_pg_finish(): the decodable events of the batch in one
    statement, wr_apply_batch() with the eleven arrays (APPLY_SQL, batch_params()), a
    transaction of its own; when PostgreSQL refuses it for the data (SQLSTATE class 22 or 23:
    apply_error_class()), after_first(): BEGIN, wr_batch.c wr_bisect() over the batch with
    try_range() (each range under SAVEPOINT wr_range, undone with ROLLBACK TO and RELEASE when
    refused; a single event refused is poison, dead-lettered with wr_pg_dlt_class()'s class),
    COMMIT. An event whose outcome is OUT_CONFLICT is dead-lettered as "order-conflict", one
    whose outcome is OUT_MISMATCH (a direct voucher's, proto/direct-mode.md) as
    "direct-mismatch" (read_outcomes()), a malformed one as "malformed" (wr_msg_decode()). Any
    other error is raised: the writer would try the batch again later. Parking the letters
    (wr_pg_park()) is left out. sent, when a list, records each statement as (text, array
    literals or None)."""

    def __init__(self, pg, sent=None):
        self.pg, self.sent = pg, sent

    def execute(self, sql, params=None):
        if self.sent is not None:
            self.sent.append((sql, params))
        with self.pg.cursor() as cur:
            if params is None:
                cur.execute(sql)
                return None
            cur.execute(re.sub(r"\$\d+", "%s", sql), params)
            return cur.fetchone()[0]

    def apply(self, events):
        """Applies the batch events (dicts, in order); returns its dead letters as (index in
        events, class, error)."""
        dead = [(i, "malformed", malformed(e)) for i, e in enumerate(events) if malformed(e)]
        sql = [i for i, e in enumerate(events) if not malformed(e)]
        if not sql:
            return dead
        outcomes = {}
        try:
            self.apply_range(events, sql, outcomes)
        except psycopg2.Error as err:
            if not (err.pgcode or "").startswith(("22", "23")):
                raise
            self.after_first(events, sql, outcomes, dead)
        for i in sql:
            if outcomes.get(i) == OUT_CONFLICT:
                e = events[i]
                dead.append((i, "order-conflict", "%s for order %s of voucher %s: the order is"
                             " redeemed on another voucher" % (e["type"], e["orderId"],
                                                               e["code"])))
            elif outcomes.get(i) == OUT_MISMATCH:
                e = events[i]
                dead.append((i, "direct-mismatch", "%s for order %s of direct voucher %s: its row"
                             " does not bear it out (no row, another state, or other figures)"
                             % (e["type"], e["orderId"], e["code"])))
        return sorted(dead)

    def apply_range(self, events, idx, outcomes):
        """wr_pg.c apply_range(): one statement over events idx, their outcomes recorded."""
        got = self.execute(APPLY_SQL, batch_params([events[i] for i in idx]))
        outcomes.update(zip(idx, got))

    def after_first(self, events, sql, outcomes, dead):
        """wr_pg.c after_first(): the poison isolated under savepoints, the rest committed."""
        self.execute("BEGIN")
        try:
            self.bisect(events, sql, outcomes, dead)
            self.execute("COMMIT")
        except Exception:
            self.execute("ROLLBACK")   # vc_pg_rollback(): the batch is tried again later
            raise

    def bisect(self, events, idx, outcomes, dead):
        """wr_batch.c bisect() with wr_pg.c try_range() and mark_poison()."""
        if not idx:
            return
        self.execute("SAVEPOINT wr_range")
        try:
            self.apply_range(events, idx, outcomes)
            self.execute("RELEASE SAVEPOINT wr_range")
            return
        except psycopg2.Error as err:
            if not (err.pgcode or "").startswith(("22", "23")):
                raise
            error = "%s: %s" % (err.pgcode, err.diag.message_primary)
        self.execute("ROLLBACK TO SAVEPOINT wr_range")
        self.execute("RELEASE SAVEPOINT wr_range")
        if len(idx) == 1:
            dead.append((idx[0], dlt_class(error[:5]), error))
            return
        mid = len(idx) // 2
        self.bisect(events, idx[:mid], outcomes, dead)
        self.bisect(events, idx[mid:], outcomes, dead)


class Explorer(RuleBasedStateMachine):
    """One example: one voucher, a few orders, the real scripts, writer SQL and reconciler."""

    def __init__(self):
        super().__init__()
        self.w = WORLD
        self.ready = False
        self.muted = False

    # ---- set-up and the record of what happened

    @initialize(total=st.deferred(lambda: st.sampled_from(SHAPE["total"])),
                orders=st.deferred(lambda: st.sampled_from(SHAPE["orders"])),
                campaign=st.deferred(lambda: st.sampled_from(CAMPAIGN_DRAW[CAMPAIGN["mode"]])),
                limit=st.integers(1, 2),
                replicated=st.deferred(lambda: st.sampled_from(REPLICA_DRAW[REPLICA["mode"]])),
                targeted=st.deferred(lambda: st.sampled_from(TARGETED_DRAW[TARGETED["mode"]])),
                # Read at each draw, not once (st.deferred() keeps its first strategy for the
                # whole process): an aim's --mode holds after the seeds ran in another.
                direct=st.integers(0, 11).map(
                    lambda i: DIRECT_DRAW[DIRECT["mode"]][i % len(DIRECT_DRAW[DIRECT["mode"]])]),
                twin=st.integers(0, 11).map(
                    lambda i: TWIN_DRAW[TWIN["mode"]][i % len(TWIN_DRAW[TWIN["mode"]])]))
    def init_voucher(self, total, orders=ORDERS, campaign=False, limit=PER_USER,
                     replicated=False, targeted=False, one_hold_slices=None, direct=False,
                     twin=False):
        """orders: how many of o0..o2 this example uses (every race of issue 22 needs only one
        order; fewer orders make the steps of one sequence meet on the same order more often).
        A step's o is taken modulo it. campaign: the example is a one-time code campaign of
        max(total, 2) codes and perCustomerLimit limit instead of a voucher (README, "A
        campaign's example"). direct: a direct voucher's example instead (init_direct()).
        twin: a flash voucher's example (no campaign, no replica) also has a direct twin
        (README, "A direct twin")."""
        self.direct = bool(direct)
        if self.direct:
            return self.init_direct(total, orders)
        w = self.w
        self.n_orders = orders
        w.seq += 1
        w.examples += 1
        CLOCK.set(time.time() * 1000)  # each example starts at the wall clock; a daemon of its own
        self.code = "MX%d_%d_%d" % (os.getpid() % 10000, int(time.time()) % 100000, w.seq)
        self.camp = bool(campaign)
        self.limit = limit if self.camp else PER_USER
        # Under WAIT with a replica, the restart fence off, as on a Redis Cluster (voucher
        # examples only): README, "Failover under WAIT".
        self.replicated = bool(replicated) and not self.camp
        # A voucher's example on one Redis: the reconciler reads it in full only on its first
        # pass (TARGETED). Redis's own faults (delete_key, lose_confirm, rollback) are off in it:
        # the drift they leave can cancel out in the counts, which only the periodic full read
        # finds, and no step moves the real time it waits for.
        self.targeted = bool(targeted) and not self.camp and not self.replicated
        if self.targeted:
            w.targeted_examples += 1
        # Slices of one due hold in every other targeted example (a saved case says which).
        if one_hold_slices is None:
            one_hold_slices = w.targeted_examples % 2 == 1
        self.one_hold_slices = self.targeted and w.wave_slices and bool(one_hold_slices)
        if self.replicated and w.replica is None:
            w.start_replica()    # a saved case under WAIT, replayed without --replica
        self.link_broken = False
        # A direct twin: a direct voucher whose reservations name this example's orderIds.
        self.twin = bool(twin) and not self.camp and not self.replicated
        self.twin_code = None
        self.twin_acked = {}   # order -> the step its twin reservation was answered 201
        # The claims' PXAT: the voucher's endsAt (a day ahead) and a day's retention, roughly.
        self.claim_expire = int(time.time() * 1000) + 2 * 86400 * 1000
        self.took = {}         # order -> the code of its last hold taken (a campaign's)
        if self.camp:
            w.campaign_examples += 1
            total = max(total, 2)
            self.cid, self.codes = self.make_campaign(total, self.limit)
            self.code = "CP%d" % self.cid   # the orderIds' prefix and the story's name
            self.k = CampaignKeys(self.cid)
            cid, w = self.cid, self.w
            w.scripts.campaign_loaded = lambda: w.sql(
                "SELECT redis_loaded_at IS NOT NULL FROM campaign WHERE id = %s", (cid,))[0][0]
            self.key = "campaign:%d" % self.cid   # every event of the campaign: one partition
        else:
            self.k = Keys(self.code)
            self.key = self.code
        self.total = total
        self.part = partition_of(self.key)
        self.start = self.committed = self.pos = w.high(self.part)
        w.commit(self.part, self.start)
        self.log = []          # (offset, key, event) of the partition since the start
        self.mine = set()      # offsets of the events the explorer produced (the rest: reconciler)
        self.pending = []      # Calls waiting for Kafka's report
        self.finishable = []   # cancels whose VoucherReleased Kafka acknowledged
        self.acked = {}        # order -> heldUntil of each hold answered 201
        self.replayed = {}     # order -> heldUntil of each hold a retry was answered 201 for
        self.fresh = {}        # order -> heldUntil of each hold its first request's 201 answered
        self.created = {}      # order -> {heldUntil: the step its hold was taken}
        self.forgotten = {}    # order -> steps at which a hold of it was forgotten (forget.lua)
        self.paid = set()      # orders a confirm answered 200
        self.paid_at = {}      # order -> the step its first 200 was given
        self.owner_cancel = set()  # orders their owner asked to cancel (a DELETE ran its script)
        self.cancelled = {}        # order -> the step its cancel was answered 200 (released)
        self.dlt = []          # events the writer refused
        self.effects = []      # (step, kind, info): what each reconciler hop did to Redis
        self.window_writes = 0  # Redis changes by other steps inside this pass's window
        self.stale = 0         # repairs that acted after such changes (the target() metric)
        self.story = []
        self.steps = []
        self.prev = self.prev2 = "start"
        self.token = 0
        self.history = []      # the example's keys after each step that wrote to Redis (rollback)
        self.rollbacks = []    # the steps at which Redis lost its last writes
        self.drifts = []       # the reconciler's pass count at each pg_drift (a use without a row)
        self.failovers = []    # the steps at which a replica was promoted (failover)
        self.fence_known = w.scripts.has_fence()
        self.fence_seen = None   # fenced(), as last read
        if self.fence_known:
            # Each example starts on a Redis the reconciler verified: the explorer owns the stack,
            # and an example that ended fenced (a failure) must not fence the next one.
            w.scripts.fence_set(w.scripts.fence_check()[0])
        if not self.camp:
            w.sql("INSERT INTO voucher (code, mode, discount_amount, min_order_amount,"
                  " total_limit, per_user_limit, starts_at, ends_at) VALUES (%s, 'flash', 100, 0, %s, %s,"
                  " now() - interval '1 hour', now() + interval '1 day')",
                  (self.code, total, PER_USER))
            w.r.set(self.k.remaining, total, nx=True)
            w.sql("UPDATE voucher SET redis_loaded_at = now() WHERE code = %s", (self.code,))
        if self.twin:
            w.twin_examples += 1
            self.twin_code = "MT" + self.code[2:]
            w.sql("INSERT INTO voucher (code, mode, discount_amount, min_order_amount,"
                  " total_limit, per_user_limit, starts_at, ends_at) VALUES (%s, 'direct', 100,"
                  " 0, %s, %s, now() - interval '1 hour', now() + interval '1 day')",
                  (self.twin_code, total, PER_USER))
        self.frozen = None     # a leader frozen before a script (freeze_leader), while another acts
        self.leaders = 0       # the reconciler daemons this example started
        self.pass_clock = []   # the clock at which each pass began (its snapshot): pass i at i - 1
        self.judged_clock = {}  # pass -> the clock when it stood judged (before-repair)
        self.unsent_seen = {}  # (orderId, value) held in Redis, unknown downstream -> passes then
        self.start_rc()
        self.rc_at = None
        self.rc_script = None   # at each-repair: the script the reconciler is about to send
        self.hop_script = None  # the script the last hop from each-repair ran
        self.passes = 0
        self.ready = True
        self.rc_wait()
        self.last_redis = self.redis_state()
        if self.camp:
            self.record("campaign %d, codes %s, perCustomerLimit %d, %d order(s) (partition %d)"
                        % (self.cid, " ".join("k%d=%s" % x for x in enumerate(self.codes)),
                           self.limit, orders, self.part), "init_voucher",
                        {"total": total, "orders": orders, "campaign": True, "limit": self.limit})
        else:
            self.record("voucher %s, total %d, %d order(s) (partition %d)%s%s%s" % (
                self.code, total, orders, self.part,
                ", with a replica and WAIT, no fence" if self.replicated else "",
                ", the periodic full read (targeted reads)" if self.targeted else "",
                ", a direct twin %s" % self.twin_code if self.twin else ""),
                "init_voucher",
                dict({"total": total, "orders": orders},
                     **({"replicated": True} if self.replicated else {}),
                     **({"twin": True} if self.twin else {}),
                     **({"targeted": True} if self.targeted else {}),
                     **({"one_hold_slices": True} if self.one_hold_slices else {})))

    def make_campaign(self, n, limit):
        """A campaign as vc_campaign_generate() leaves it (the admin API's POST /campaigns and
        voucher-admin alike): its row, ACTIVE with every code generated, and n unbound codes of
        12 safe32 symbols. Nothing goes to Redis: the gateway loads nothing per code up front;
        the first take creates the keys and marks campaign.redis_loaded_at (reserve())."""
        w = self.w
        cid = w.sql("INSERT INTO campaign (name, state, alphabet, code_length, total_count,"
                    " generated_count, discount_amount, per_customer_limit, starts_at, ends_at)"
                    " VALUES (%s, 'ACTIVE', 'safe32', 12, %s, %s, 100, %s,"
                    " now() - interval '1 hour', now() + interval '1 day') RETURNING id",
                    ("explorer " + self.code, n, n, limit))[0][0]
        rnd = random.SystemRandom()
        codes = ["".join(rnd.choice(SAFE32) for _ in range(12)) for _ in range(n)]
        for i, c in enumerate(codes):
            w.sql("INSERT INTO campaign_code (code, campaign_id, seq) VALUES (%s, %s, %s)",
                  (c, cid, i + 1))
        return cid, codes

    def teardown(self):
        if not self.ready:
            return
        if self.direct:
            try:
                if not getattr(self, "failed", False) and not self.muted:
                    self.quiesce_direct()
            except Muted:
                self.muted = True
            finally:
                self.stop()
            return
        if os.environ.get("EXPLORER_TRACE"):
            with open(os.environ["EXPLORER_TRACE"], "a") as f:
                f.write(" ".join("%s%s" % (n, "(%s)" % ",".join(str(v) for v in a.values())
                                           if a else "") for n, a in self.steps) + "\n")
        try:
            if not getattr(self, "failed", False) and not self.muted and self.rc_at:
                try:
                    self.quiesce()
                except Muted:
                    self.muted = True
            if self.w.targeting:
                # Hypothesis climbs towards examples where repairs acted on a Redis that other
                # steps changed after the pass read it: where the races live.
                target(float(self.stale), label="repairs after a change inside their window")
        finally:
            self.stop()

    def start_rc(self):
        """Starts a reconciler daemon of this example, stopped at every pause point (a pause folder
        of its own), on the explorer's clock: self.rc, self.rc_logf, self.pause_dir. The second
        one (freeze_leader) takes the next admin port."""
        w = self.w
        name = self.code + ("" if not self.leaders else ".%d" % self.leaders)
        self.pause_dir = os.path.join(w.scratch, name)
        os.makedirs(self.pause_dir)
        env = dict(os.environ, VOUCHER_PAUSE=",".join(PAUSES), VOUCHER_PAUSE_DIR=self.pause_dir,
                   VOUCHER_LOG_LEVEL="info", LD_PRELOAD=w.shim, EXPLORER_CLOCK_FILE=CLOCK.path,
                   EXPLORER_FAST_INTERVAL="1")
        if self.replicated:
            # As on a Redis Cluster: no fence; a WAIT after each repair script (rc_redis.c).
            env["VOUCHER_REDIS_WAIT_REPLICAS"] = "1"
            env["VOUCHER_REDIS_WAIT_TIMEOUT"] = "%dms" % WAIT_MS
        elif self.fence_known:
            # The reconciler keeps the fence only when told (VOUCHER_REDIS_FENCE, as the
            # gateways); it is the real one either way, with the gateway steps' fence on or off.
            env["VOUCHER_REDIS_FENCE"] = "true"
        self.rc_logf = open(os.path.join(w.scratch, name + ".log"), "w")
        self.rc = subprocess.Popen(
            [w.bin_reconciler, "--interval", "100ms", "--grace", "%dms" % GRACE,
             "--restore-delay", "%dms" % GRACE, "--full-every", "1h" if self.targeted else "0",
             "--timeout", "3s",
             "--admin-addr", "127.0.0.1:%d" % (ADMIN_PORT + self.leaders % 2)] +
            (w.scan_flags if SCAN["on"] else []) +
            (["--expiry-slice", "1"] if self.one_hold_slices else []),
            env=env, stdout=self.rc_logf, stderr=subprocess.STDOUT)
        LIVE.add(self.rc)
        self.leaders += 1

    def targeted_reads(self, name="voucher_reconciler_targeted_reads_total"):
        """The targeted reads of this example's acting reconciler (its /metrics), 0 if none; or
        another counter of it by name (its slices of due holds)."""
        port = ADMIN_PORT + (self.leaders - 1) % 2
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith(name):
                        return int(float(line.split()[-1]))
        except (OSError, ValueError):
            pass
        return 0

    def stop(self):
        self.ready = False
        if getattr(self, "targeted", False) and self.rc is not None and self.rc.poll() is None:
            self.w.targeted_reads += self.targeted_reads()
            self.w.wave_slices_run += self.targeted_reads(SLICES_METRIC)
            self.w.targeted_passes += self.passes
        if getattr(self, "link_broken", False):
            self.w.replica_attach()   # the next example starts with a replica that follows
            self.link_broken = False
        for call in getattr(self, "dcalls", []):
            # A direct call left open by a failure: cut (rolled back), its connection closed.
            if not call.done.is_set():
                call.conn.cancel()
                call.done.wait(20)
            call.conn.close()
        self.dcalls = []
        self.w.topic_writable(True)   # an example that ended during an outage
        procs = ([(self.rc, self.rc_logf)] if self.rc is not None else []) + \
            ([self.frozen[:2]] if self.frozen else [])
        for proc, logf in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            LIVE.discard(proc)
            logf.close()
        self.frozen = None
        if self.camp:
            # Out of the next examples' reconciler passes (which read ACTIVE and INACTIVE).
            self.w.sql("UPDATE campaign SET state = 'FAILED' WHERE id = %s", (self.cid,))
        else:
            self.w.sql("UPDATE voucher SET starts_at = now() - interval '3 days',"
                       " ends_at = now() - interval '2 days' WHERE code = ANY(%s)",
                       ([self.code] + ([self.twin_code] if getattr(self, "twin_code", None)
                                       else []),))
        self.w.commit(self.part, self.w.high(self.part))

    def record(self, text, name, args):
        """One line of the story (the step and the state after it), and the step for a replay."""
        if self.direct:
            return self.note(text, name, args, self.direct_line())
        redis_now = self.redis_state()
        if name not in ("rc_step", "rc_pass", "rc_to") and redis_now != self.last_redis and \
                self.rc_at:
            self.window_writes += 1   # the pass read Redis before this change, or will read it
        self.last_redis = redis_now
        if name not in ("writer_apply", "writer_redeliver", "wait_grace") and not (
                name == "deliver" and not self.w.scripts.forget_not_persisted):
            # Steps that can write to Redis (the others touch only Kafka, PostgreSQL, the clock).
            snap = self.dump()
            if not self.history or {k: v[0] for k, v in snap.items()} != \
                    {k: v[0] for k, v in self.history[-1].items()}:
                self.history.append(snap)   # this step wrote to Redis (the first: the start)
        self.note(text, name, args, self.state_line(redis_now))

    def note(self, text, name, args, state):
        """record()'s story line, the step kept for a replay, the coverage, the clock's tick."""
        self.story.append("%3d. %-58s | %s" % (len(self.story), text, state))
        self.steps.append([name, args])
        self.w.last_story = self.story
        self.w.last_steps = self.steps
        self.w.steps += 1
        phase = SHORT.get(self.rc_at, "between-passes") if self.rc_at else "running"
        kind = name if name not in ("rc_step", "rc_to") else "rc->" + phase
        self.w.pairs.add((self.prev, kind))
        self.w.triples.add((self.prev2, self.prev, kind))
        self.w.phases.add((name, phase))
        self.w.rules[name] += 1
        self.prev2, self.prev = self.prev, kind
        CLOCK.advance(1)

    def example_keys(self):
        """Every Redis key of this example: its voucher's or campaign's, and its orders' claims."""
        keys = [getattr(self.k, s) for s in (CAMPAIGN_SUFFIXES if self.camp else
                                             VOUCHER_SUFFIXES)]
        return keys + ["voucher-order:{%s}" % self.oid(o) for o in range(ORDERS)]

    def dump(self):
        """The example's keys at one moment (MULTI): key -> (DUMP, PTTL), the keys that exist."""
        keys = self.example_keys()
        p = self.w.rb.pipeline(transaction=True)
        for key in keys:
            p.dump(key)
            p.pttl(key)
        out = p.execute()
        return {key: (out[2 * i], out[2 * i + 1]) for i, key in enumerate(keys)
                if out[2 * i] is not None}

    def fenced(self):
        """Whether the reconciler has not verified this Redis (fence.lua check: the fence is not
        the run_id): nobody may trust its state, and a gateway with the fence on refuses."""
        if not self.fence_known:
            return False
        if self.fence_seen is None:
            # Only rollback() and the reconciler's hops change the fence (the daemon runs only
            # between its pause points): each forgets what was seen.
            run_id, fence = self.w.scripts.fence_check()
            self.fence_seen = fence != run_id
        return self.fence_seen

    def untrusted(self):
        """Whether nobody trusts Redis's state now: it is fenced and the gateway obeys the fence.
        Its comparisons with Kafka and PostgreSQL are skipped then; with the fence off
        (--no-fence) the gateway trusts it, and so do the promises."""
        return FENCE["gateway"] and not self.replicated and self.fenced()

    def refused_by_fence(self):
        """The gateway's fence (VOUCHER_REDIS_FENCE): while Redis is not verified, every command
        is refused before it is sent, and the request answered 503. Checked at every step, as
        if each connected anew: a restart (what rollback() stands for) breaks every connection."""
        if FENCE["gateway"] and not self.replicated and self.fenced():
            self.w.fenced += 1
            return True
        return False

    def replicas_short(self):
        """A gateway step's WAIT for a replica, after a script that wrote, under WAIT
        (VOUCHER_REDIS_WAIT_REPLICAS=1): True when none acknowledged in time (the gateway then
        answers 503, the outcome unknown, and publishes nothing)."""
        if not self.replicated:
            return False
        short = self.w.gw.execute_command("WAIT", 1, WAIT_MS) < 1
        self.w.waits["short" if short else "met"] += 1
        return short

    def redis_state(self):
        """(remaining, orders, users); a campaign's: (taken or None when missing, orders, users)."""
        r, k = self.w.r, self.k
        p = r.pipeline(transaction=False)
        if self.camp:
            p.hgetall(k.taken)
            p.hgetall(k.orders)
            p.hgetall(k.users)
            taken, orders, users = p.execute()
            return (taken or None, orders, users)
        p.get(k.remaining)
        p.hgetall(k.orders)
        p.hgetall(k.users)
        rem, orders, users = p.execute()
        return (None if rem is None else int(rem), orders, users)

    def pg_state(self):
        if self.camp:
            used = self.w.sql("SELECT used_count FROM campaign WHERE id = %s", (self.cid,))[0][0]
            rows = dict(self.w.sql("SELECT order_id, status FROM campaign_redemption"
                                   " WHERE campaign_id = %s", (self.cid,)))
            return used, rows
        used = self.w.sql("SELECT used_count FROM voucher WHERE code = %s", (self.code,))[0][0]
        rows = dict(self.w.sql("SELECT order_id, status FROM voucher_redemption"
                               " WHERE voucher_code = %s", (self.code,)))
        return used, rows

    def short(self, o):
        return o.rsplit("-", 1)[1]

    def kname(self, code):
        """A campaign's code in the story: k0, k1, k2 (init_voucher's line names them)."""
        return "k%d" % self.codes.index(code) if code in self.codes else code

    def state_line(self, redis_now=None):
        rem, orders, users = redis_now or self.redis_state()
        used, rows = self.pg_state()
        o = " ".join("%s:%s" % (self.short(x), v.split(":")[3]) for x, v in sorted(orders.items()))
        u = ",".join("%s=%s" % kv for kv in sorted(users.items()))
        p = " ".join("%s:%s" % (self.short(x), s[:3]) for x, s in sorted(rows.items()))
        if self.camp:
            rem = "-" if rem is None else "{%s}" % ",".join(
                "%s=%s" % (self.kname(c), self.short(x) if x != "0" else x)
                for c, x in sorted(rem.items()))
        return "redis %s=%s [%s] users{%s}%s | pg used=%d [%s] | kafka %d/%d rc@%s" % (
            "taken" if self.camp else "rem", "-" if rem is None else rem, o, u,
            " FENCED" if self.fenced() else "", used, p,
            self.pos - self.start,
            len(self.log), SHORT.get(self.rc_at, self.rc_at))

    # ---- the gateway

    def queue(self, call):
        call.seq = len(self.story)
        self.pending.append(call)

    def oid(self, o):
        return "%s-o%d" % (self.code, o)

    def customer(self, o):
        """o0 and o2 are customer 1's, o1 customer 2's; in a campaign's example o0 and o1 are
        customer 1's, so that perCustomerLimit binds with two orders already."""
        if self.camp:
            return 1 if o < 2 else 2
        return o % CUSTOMERS + 1

    def reserved_event(self, o, order_value, at, code=None):
        customer, discount, held, _ = order_value.split(":")
        return self.event({"type": "VoucherReserved", "version": 1, "code": code or self.code,
                           "customerId": int(customer), "orderId": self.oid(o),
                           "discountAmount": int(discount), "orderAmount": 500000,
                           "reservedAt": iso(at), "heldUntil": iso(int(held))})

    def event(self, e):
        """A campaign's events carry campaignId (proto/campaigns.md, "Events")."""
        if self.camp:
            e["campaignId"] = self.cid
        return e

    def mine_event(self, e):
        """An event of this example's voucher or campaign."""
        if self.camp:
            return e.get("campaignId") == self.cid
        return e.get("code") == self.code and not e.get("campaignId")

    def order_code(self, o):
        """The code a client names for order o (the path's code): the one its last hold took,
        else the first of the campaign's."""
        return self.took.get(o, self.codes[0]) if self.camp else self.code

    @only("reserve")
    @rule(o=st.integers(0, ORDERS - 1), ttl=st.sampled_from(["live", "past", "short"]),
          c=st.integers(0, 2))
    @guarded
    def reserve(self, o, ttl, c=0):
        """POST reservations: the claim (SET NX GET), reserve.lua, the event queued. c: a
        campaign's code (taken modulo the codes; a voucher's example ignores it)."""
        if self.camp:
            return self.redeem(o, ttl, c)
        o %= self.n_orders
        if self.refused_by_fence():
            return self.record("reserve o%d (%s): fenced, 503" % (o, ttl), "reserve",
                               {"o": o, "ttl": ttl})
        w, oid, now = self.w, self.oid(o), now_ms()
        self.token += 1
        held = now + TTL[ttl]
        claim, res, (claim_key, claim_value) = flash_take(
            w.gw, w.scripts, self.k, self.code, self.token, self.claim_expire, self.customer(o),
            oid, held, now)
        status, value = res[0], res[1] if len(res) > 1 else None
        if self.twin:
            w.twin_calls["flash claim %s" % claim] += 1
        what = "reserve o%d (%s): status %d" % (o, ttl, status)
        if claim == "other":
            # The orderId is another code's (the direct twin's): a use taken is given back.
            what += ", claimed with another code%s: 409 ORDER_CONFLICT" % (
                ": forgotten" if status == A.reserve.TAKEN else "")
        elif status == A.reserve.TAKEN:
            self.created.setdefault(o, {})[held] = len(self.story)
            if self.replicas_short():
                what += ", WAIT short: 503, the hold kept, no event"
            else:
                self.queue(Call("reserve", o, self.reserved_event(o, value, now),
                                (claim, claim_key, claim_value)))
                what += ", event queued"
        elif status == A.reserve.SAME_ORDER:
            state = value.split(":")[3]
            if state in HELD_OR_CONFIRMED and self.replicas_short():
                what += " (a retry of %s), WAIT short: 503, no event" % state
            elif state in HELD_OR_CONFIRMED:
                self.queue(Call("replay", o, self.reserved_event(o, value, now), None))
                what += " (a retry of %s), event queued" % state
            else:
                what += " (%s): 409 HOLD_EXPIRED" % state
        else:
            what += ": refused (%s)" % {A.reserve.OUT_OF_STOCK: "409 OUT_OF_STOCK",
                                        A.reserve.ALREADY_USED: "409 ALREADY_USED",
                                        A.reserve.NOT_LOADED: "503 being restored",
                                        A.reserve.OTHER_CUSTOMER: "409 ORDER_CONFLICT",
                                        A.reserve.OTHER_AMOUNT: "409 ORDER_CONFLICT",
                                        A.reserve.COUNTS_LOST: "503 being restored"
                                        }.get(status, "?")
        self.record(what, "reserve", {"o": o, "ttl": ttl})

    def redeem(self, o, ttl, c):
        """A campaign's POST reservations (gw_reserve_*.c on a campaign's code): the lookup's
        redis_loaded_at, the claim with the stored code, campaign_reserve.lua with perCustomerLimit
        and "expireAtMs:loaded", the first take marking the campaign loaded; a use taken under
        another code's claim is forgotten and answered 409 ORDER_CONFLICT."""
        o %= self.n_orders
        w, oid, now = self.w, self.oid(o), now_ms()
        code = self.codes[c % len(self.codes)]
        if self.refused_by_fence():
            return self.record("reserve o%d %s (%s): fenced, 503" % (o, self.kname(code), ttl),
                               "reserve", {"o": o, "ttl": ttl, "c": c})
        loaded = w.sql("SELECT redis_loaded_at IS NOT NULL FROM campaign WHERE id = %s",
                       (self.cid,))[0][0]
        self.token += 1
        claim_key, claim_value = "voucher-order:{%s}" % oid, "%s:%d" % (code, self.token)
        prior = w.gw.set(claim_key, claim_value, nx=True, get=True)
        claim = "new" if prior is None else "ours" if prior.split(":")[0] == code else "other"
        held = now + TTL[ttl]
        expire = int(time.time() * 1000) + 2 * 86400 * 1000   # endsAt + retention, roughly
        res = w.scripts.c_reserve(self.k, self.customer(o), self.limit, oid, 100, held, now,
                                  500000, code, "%d:%d" % (expire, 1 if loaded else 0))
        status, value = res[0], res[1] if len(res) > 1 else None
        what = "reserve o%d %s (%s): status %d" % (o, self.kname(code), ttl, status)
        if status == A.reserve.TAKEN and claim == "other":
            f = w.scripts.c_forget(self.k, oid, code)
            what += ", claimed with another code: forget status %d, 409 ORDER_CONFLICT" % f[0]
        elif status == A.reserve.TAKEN:
            if claim == "ours":
                w.scripts.claim_keep(claim_key, claim_value, code)
            if not loaded:
                # The gateway's mark after the first take (reserved_cb(), not awaited there).
                w.sql("UPDATE campaign SET redis_loaded_at = now() WHERE id = %s"
                      " AND redis_loaded_at IS NULL", (self.cid,))
            self.took[o] = code
            self.created.setdefault(o, {})[held] = len(self.story)
            self.queue(Call("reserve", o, self.reserved_event(o, value, now, code),
                            (claim, claim_key, claim_value)))
            what += ", event queued"
        elif status == A.reserve.SAME_ORDER:
            state = value.split(":")[3]
            if state in HELD_OR_CONFIRMED:
                self.queue(Call("replay", o, self.reserved_event(o, value, now, code), None))
                what += " (a retry of %s), event queued" % state
            else:
                what += " (%s): 409 HOLD_EXPIRED" % state
        else:
            if claim == "new":
                w.scripts.claim_release(claim_key, claim_value, code)
            what += ": refused (%s)" % {A.reserve.ALREADY_USED: "409 ALREADY_USED",
                                        A.reserve.OTHER_CUSTOMER: "409 ORDER_CONFLICT",
                                        A.reserve.OTHER_AMOUNT: "409 ORDER_CONFLICT",
                                        A.reserve.COUNTS_LOST: "503 keys lost"}.get(status, "?")
        self.record(what, "reserve", {"o": o, "ttl": ttl, "c": c})

    @only("confirm")
    @precondition(lambda self: self.created)
    @rule(o=st.integers(0, ORDERS - 1))
    @guarded
    def confirm(self, o):
        o %= self.n_orders
        if self.refused_by_fence():
            return self.record("confirm o%d: fenced, 503" % o, "confirm", {"o": o})
        code = self.order_code(o)
        if self.camp:
            res = self.w.scripts.c_confirm(self.k, self.oid(o), now_ms(), code)
        else:
            res = self.w.scripts.confirm(self.k, self.oid(o), now_ms())
        status = res[0]
        what = "confirm o%d: status %d" % (o, status) + self.lost_answer(status)
        done = (A.confirm.CONFIRMED, A.confirm.ALREADY_CONFIRMED)
        if status in done and self.replicas_short():
            what += ", WAIT short: 503, no event"
        elif status in done:
            c = self.customer(o)
            self.queue(Call("confirm", o, self.event({
                "type": "VoucherConfirmed", "version": 1, "code": code, "customerId": c,
                "orderId": self.oid(o), "confirmedAt": iso(now_ms())})))
            what += ", event queued"
        self.record(what, "confirm", {"o": o})

    @only("cancel")
    @precondition(lambda self: self.created)
    @rule(o=st.integers(0, ORDERS - 1))
    @guarded
    def cancel(self, o):
        o %= self.n_orders
        if self.refused_by_fence():
            return self.record("cancel o%d: fenced, 503" % o, "cancel", {"o": o})
        code = self.order_code(o)
        if self.camp:
            res = self.w.scripts.c_cancel_begin(self.k, self.oid(o), now_ms(), code)
        else:
            res = self.w.scripts.cancel_begin(self.k, self.oid(o), now_ms())
        status = res[0]
        what = "cancel o%d: status %d" % (o, status) + self.lost_answer(status)
        begun = (A.release_begin.BEGUN, A.release_begin.ALREADY_BEGUN)
        if status in begun and self.replicas_short():
            self.owner_cancel.add(o)
            what += ", WAIT short: 503, no event"
        elif status in begun:
            self.owner_cancel.add(o)
            customer = int(res[1].split(":")[0])
            self.queue(Call("cancel", o, self.event({
                "type": "VoucherReleased", "version": 1, "code": code,
                "customerId": customer, "orderId": self.oid(o), "releasedAt": iso(now_ms()),
                "reason": "CANCELLED"})))
            what += ", event queued"
        self.record(what, "cancel", {"o": o})

    @only("cancel_finish")
    @precondition(lambda self: self.finishable)
    @rule(i=st.integers(0, 3))
    @guarded
    def cancel_finish(self, i):
        o, code = self.finishable.pop(i % len(self.finishable))
        if self.refused_by_fence():
            # The event is stored; the order stays X until a retry or the reconciler finishes.
            return self.record("cancel o%d finish: fenced, 503" % o, "cancel_finish", {"i": i})
        if self.camp:
            res = self.w.scripts.c_cancel_finish(self.k, self.oid(o), code)
        else:
            res = self.w.scripts.cancel_finish(self.k, self.oid(o))
        if res[0] in (A.release_finish.GIVEN_BACK, A.release_finish.ALREADY_RELEASED):
            self.cancelled.setdefault(o, len(self.story))
            what = "cancel o%d finish: status %d, 200" % (o, res[0])
        else:
            # gw_holds.c finished_cb(): -7 (keys lost) 503; not releasing (-1, -2) an error:
            # no 200, the order stays as Redis has it.
            what = "cancel o%d finish: status %d, %s" % (o, res[0],
                                                          "503" if res[0] == A.lookup.KEYS_LOST
                                                          else "500")
        self.record(what, "cancel_finish", {"i": i})

    def lost_answer(self, status):
        """gw_holds.c script_cb()'s answer to a confirm's or a cancel's -7 (the orders hash, or a
        campaign's keys, lost: 503) and -8 (no order and no counter: 503 when PostgreSQL says the
        voucher's keys were in Redis, its redis_loaded_at, else 404), and to -1 (404)."""
        if status in (A.lookup.KEYS_LOST, A.lookup.COUNTER_LOST):
            self.w.lost_answers[status] += 1
        if status == A.lookup.KEYS_LOST:
            return ": 503 (keys lost)"
        if status == A.lookup.COUNTER_LOST:
            loaded = self.w.sql("SELECT redis_loaded_at IS NOT NULL FROM voucher WHERE code = %s",
                                (self.code,))
            return ": 503 (keys lost)" if loaded and loaded[0][0] else ": 404"
        if status == A.lookup.NO_ORDER:
            return ": 404"
        return ""

    # ---- shorthands: a call and Kafka's report on it with nothing in between (one interleaving
    # among the others, but a frequent one: it makes the states worth exploring more likely)

    @only("reserve_now")
    @rule(o=st.integers(0, ORDERS - 1), ttl=st.sampled_from(["live", "past", "short"]),
          outcome=st.sampled_from(["ack", "ack", "lost", "not_persisted"]), c=st.integers(0, 2))
    @guarded
    def reserve_now(self, o, ttl, outcome, c=0):
        n = len(self.pending)
        self.reserve(o, ttl, c)
        if len(self.pending) > n:
            self.deliver(len(self.pending) - 1, outcome)

    def reserve_ok(self, o, ttl):
        """(saved cases) reserve_now with an ack."""
        self.reserve_now(o, ttl, "ack")

    @only("confirm_now")
    @precondition(lambda self: self.created)
    @rule(o=st.integers(0, ORDERS - 1), outcome=st.sampled_from(["ack", "ack", "possibly",
                                                                 "lost"]))
    @guarded
    def confirm_now(self, o, outcome):
        n = len(self.pending)
        self.confirm(o)
        if len(self.pending) > n:
            self.deliver(len(self.pending) - 1, outcome)

    def confirm_ok(self, o):
        """(saved cases) confirm_now with an ack."""
        self.confirm_now(o, "ack")

    @only("cancel_ok")
    @precondition(lambda self: self.created)
    @rule(o=st.integers(0, ORDERS - 1))
    @guarded
    def cancel_ok(self, o):
        n = len(self.pending)
        self.cancel(o)
        if len(self.pending) > n:
            self.deliver(len(self.pending) - 1, "ack")
            if self.finishable:
                self.cancel_finish(len(self.finishable) - 1)

    @guarded
    def writer_all(self):
        """(saved cases, quiescence) the writer applies everything in the partition."""
        self.refresh_log()
        self.writer_apply(len(self.log) + 1, True)

    # ---- Kafka's report on a queued event

    @only("deliver")
    @precondition(lambda self: self.pending)
    @rule(i=st.integers(0, 3), outcome=st.sampled_from(["ack", "ack", "not_persisted",
                                                         "possibly", "lost"]))
    @guarded
    def deliver(self, i, outcome):
        c = self.pending.pop(i % len(self.pending))
        late = now_ms() - c.t0 > DELIVERY
        if outcome in ("ack", "possibly") and late:
            outcome = "lost"   # the gateway gave up at its delivery timeout: 503, nothing stored
        what = "deliver %s o%d: %s" % (c.kind, c.order, outcome)
        if outcome in ("ack", "possibly"):
            self.mine.add(self.w.produce(self.key, c.event))
        if outcome == "ack":
            # A request made after the cancel was answered (not one in flight meanwhile).
            if c.kind != "cancel" and self.cancelled.get(c.order, 1 << 30) < c.seq:
                self.record(what, "deliver", {"i": i, "outcome": outcome})
                self.fail("o%d was answered %s after its cancel was answered 200 (released)"
                          % (c.order, "200 CONFIRMED" if c.kind == "confirm" else "201"))
            if c.kind in ("reserve", "replay"):
                held = parse_ms(c.event["heldUntil"])
                self.acked.setdefault(c.order, set()).add(held)
                (self.replayed if c.kind == "replay" else self.fresh).setdefault(
                    c.order, set()).add(held)
                what += ", 201"
            elif c.kind == "confirm":
                self.paid.add(c.order)
                self.paid_at.setdefault(c.order, len(self.story))
                what += ", 200"
            else:
                self.finishable.append((c.order, c.event["code"]))
        elif c.kind == "confirm":
            what += ", 503"
        elif outcome == "not_persisted" and c.kind == "reserve" and not \
                self.w.scripts.forget_not_persisted:
            # gw_reserve_publish.c delivered_cb(): not stored is answered as possibly stored.
            what += ", hold kept, 503"
        elif outcome == "not_persisted" and c.kind == "reserve":
            if self.camp:
                res = self.w.scripts.c_forget(self.k, self.oid(c.order), c.event["code"])
            else:
                res = self.w.scripts.forget(self.k, self.oid(c.order))
            what += ", forget status %d" % res[0]
            if res[0] == A.forget.FORGOTTEN:
                self.forgotten.setdefault(c.order, []).append(len(self.story))
                if c.claim and c.claim[0] == "new":
                    self.w.scripts.claim_release(c.claim[1], c.claim[2], c.event["code"])
            what += ", 503"
        else:
            what += ", 503"
        self.record(what, "deliver", {"i": i, "outcome": outcome})

    # ---- the writer

    def refresh_log(self):
        high = self.w.high(self.part)
        have = self.start + len(self.log)
        if high > have:
            self.log.extend(self.w.read(self.part, have, high))

    def apply(self, events):
        """The example's events of one batch through the writer's batch (Writer: one statement in
        a transaction of its own; a refused batch bisected under savepoints, as the writer does);
        what it dead-letters is kept in self.dlt as (event, class, error)."""
        mine = [e for e in events if self.mine_event(e)]
        before = self.direct_rows() if self.direct else None
        for i, cls, err in Writer(self.w.pg).apply(mine):
            self.dlt.append((mine[i], cls, err))
        if self.direct and self.direct_rows() != before:
            self.fail("the writer changed a direct voucher's rows: %s, then %s" % (
                before, self.direct_rows()))

    @only("writer_apply")
    @precondition(lambda self: self.created)
    @rule(n=st.integers(1, 4), commit=st.booleans())
    @guarded
    def writer_apply(self, n, commit):
        self.refresh_log()
        end = min(self.pos + n, self.start + len(self.log))
        batch = [e for off, _, e in self.log[self.pos - self.start:end - self.start]]
        self.apply(batch)
        what = "writer applies %d events" % len(batch)
        if commit:
            self.pos = end
            self.committed = end
            self.w.commit(self.part, end)
            what += " and commits"
        else:
            self.pos = self.committed   # it crashed before the commit: they come again
            what += ", crashes before the commit"
        self.record(what, "writer_apply", {"n": n, "commit": commit})

    @only("writer_redeliver")
    @precondition(lambda self: self.committed > self.start)
    @rule(k=st.integers(1, 3))
    @guarded
    def writer_redeliver(self, k):
        lo = max(self.start, self.committed - k)
        batch = [e for off, _, e in self.log[lo - self.start:self.committed - self.start]]
        self.apply(batch)
        self.record("writer gets the last %d applied events again" % len(batch),
                    "writer_redeliver", {"k": k})

    # ---- the reconciler

    def rc_wait(self):
        """Until the daemon stops at a pause point (it was let go, or just started)."""
        deadline = time.time() + 20
        while time.time() < deadline:
            for p in PAUSES:
                if os.path.exists(os.path.join(self.pause_dir, p)):
                    self.rc_at = p
                    if p == "reconciler-each-repair":
                        self.rc_script = self.w.script_at(os.path.join(self.pause_dir, p))
                    if p == "reconciler-after-tail":
                        self.passes += 1
                        self.window_writes = 0   # a new pass: its reads are ahead of it
                        self.pass_clock.append(now_ms())
                    if p == "reconciler-before-repair":
                        self.judged_clock.setdefault(self.passes, now_ms())
                    return
            if self.rc.poll() is not None:
                raise RuntimeError("the reconciler exited (%s)" % self.rc.returncode)
            time.sleep(0.001)
        raise RuntimeError("the reconciler did not reach a pause point")

    def rc_go(self):
        """One hop: the daemon runs from its pause point to the next. Between two each-repair
        points exactly one repair script runs, so what changed in Redis meanwhile is that
        script's doing (nothing else runs during a hop): it is kept in self.effects."""
        before = self.redis_state()
        fenced0 = self.fenced()
        self.refresh_log()
        live0, n0 = self.kafka_live(), len(self.log)
        was = self.rc_at
        os.unlink(os.path.join(self.pause_dir, self.rc_at))
        if was == "reconciler-each-repair" and self.rc_script:
            # The script it stood before runs now (unless its connection is gone: a rollback).
            self.w.scripts_run[self.rc_script] += 1
        # restore_finish.lua ends a restore in slices (the counter lost, the orders kept).
        self.hop_script = self.rc_script if was == "reconciler-each-repair" else None
        self.rc_at = self.rc_script = None
        self.fence_seen = None
        windows = self.window_writes
        self.rc_wait()
        after = self.last_redis = self.redis_state()
        self.refresh_log()
        published = [e for off, _, e in self.log[n0:] if off not in self.mine]
        effects = self.effects_of(before, after, published, live0)
        if fenced0 and not self.fenced():
            effects.append(("fence", {}))   # fence.lua set: the gateways may write again
        for kind, info in effects:
            self.effects.append((len(self.story), kind, info))
            self.w.repairs[kind] += 1
            if info.get("in_steps"):
                self.w.repairs[kind + "_in_steps"] += 1
            if info.get("in_slices"):
                self.w.repairs[kind + "_in_slices"] += 1
        if effects and windows:
            self.stale += windows
        return effects

    def effects_of(self, before, after, published, live0):
        """What a reconciler hop did to the voucher in Redis, by kind: restore (a counter appeared;
        which orders Redis held before and not after), retake (an order not taken became H or C),
        lower (the counter went down and no order was taken), release begun/finished, repaired to
        C, and the releases published (with their reason). A retake or lower is marked
        made_undersell when the counter was not above the truth before it (remaining plus the
        orders taken in Redis or live in Kafka did not exceed total_limit)."""
        rem0, ord0, _ = before
        rem1, ord1, _ = after
        out = []

        def st_(orders, o):
            return orders.get(o, "")[-1:]
        taken0 = {o for o, v in ord0.items() if v[-1] in TAKEN}
        correct = not self.camp and rem0 is not None and rem0 + len(taken0 | live0) <= self.total
        if self.camp:
            # campaign_rebuild.lua: taken (rem here), users or orders written again. With the
            # orders kept (and --orders-scan-above 0), in slices: scan_begin.lua, each
            # campaign_rebuild_slice.lua (which writes the orders Redis lacks), then
            # campaign_rebuild_finish.lua, which puts taken and users in place.
            if (rem0 is None and rem1 is not None) or (not before[2] and after[2]) or \
                    (set(ord1) - set(ord0)):
                out.append(("rebuild", {"orders": sorted(self.short(o) for o in ord1),
                                        "remaining": (len(rem0 or {}), len(rem1 or {})),
                                        "in_slices": self.hop_script
                                        == "campaign_rebuild_finish"}))
        elif rem0 is None and rem1 is not None:
            dropped = sorted(self.short(o) for o in taken0 if st_(ord1, o) not in TAKEN)
            demoted = sorted(self.short(o) for o in ord0
                             if st_(ord0, o) == S.CONFIRMED and st_(ord1, o) == S.HELD)
            # With the orders hash lost too (and --orders-scan-above 0), the reconciler
            # restores in steps: restore_stage.lua, then restore_swap.lua (a rebuild the same,
            # then rebuild_swap.lua).
            # With the orders kept (and --orders-scan-above 0), in slices: scan_begin.lua,
            # restore_slice.lua, then restore_finish.lua, which sets the counter.
            out.append(("restore", {"dropped": dropped, "c_to_h": demoted, "remaining": rem1,
                                    "in_steps": not ord0 and bool(ord1),
                                    "in_slices": self.hop_script
                                    == "restore_finish"}))
        elif rem0 is not None and rem1 is not None and not ord0 and (ord1 or rem1 > rem0):
            # rebuild.lua: the orders hash lost, written again from the snapshot (released
            # orders too), the counter set to the rule's bound (raised as well as lowered).
            out.append(("rebuild", {"orders": sorted(self.short(o) for o in ord1),
                                    "remaining": (rem0, rem1), "in_steps": bool(ord1)}))
        else:
            revived = sorted(o for o in ord1
                             if st_(ord1, o) in HELD_OR_CONFIRMED and o not in taken0)
            # With the users hash lost and the orders kept (and --orders-scan-above 0), the
            # retake goes in slices: scan_begin.lua, each retake_slice.lua (which writes the
            # orders Redis lacks), then retake_finish.lua, which puts users in place.
            sliced = self.hop_script == "retake_finish" and not before[2] and bool(after[2])
            if revived or sliced:
                out.append(("retake", {"orders": [self.short(o) for o in revived],
                                       "was": [st_(ord0, o) or "-" for o in revived],
                                       "remaining": (rem0, rem1),
                                       "made_undersell": bool(correct and rem1 is not None
                                                              and rem1 < rem0),
                                       "in_slices": sliced}))
            elif rem0 is not None and rem1 is not None and rem1 < rem0:
                # With the orders kept (and --orders-scan-above 0), in slices: scan_begin.lua,
                # each lower_slice.lua (which only reads), then lower_finish.lua, which lowers.
                out.append(("lower", {"remaining": (rem0, rem1), "made_undersell": correct,
                                      "in_slices": self.hop_script == "lower_finish"}))
        begun = sorted(self.short(o) for o in ord1 if st_(ord1, o) in BEGUN and
                       st_(ord0, o) in HELD_OR_CONFIRMED)
        if begun:
            out.append(("release_begin", {"orders": begun}))
        finished = sorted(self.short(o) for o in ord1 if st_(ord1, o) == S.RELEASED and
                          st_(ord0, o) in BEGUN)
        if finished:
            out.append(("release_finish", {"orders": finished}))
        to_c = sorted(self.short(o) for o in ord1
                      if st_(ord1, o) == S.CONFIRMED and st_(ord0, o) == S.HELD)
        if to_c and not (rem0 is None and rem1 is not None):
            out.append(("repair_to_c", {"orders": to_c}))
        for e in published:
            if e.get("type") == "VoucherReleased" and self.mine_event(e):
                out.append(("release", {"order": self.short(e["orderId"]),
                                        "reason": e.get("reason")}))
        return out

    def effects_text(self, effects):
        parts = []
        for kind, info in effects:
            if kind == "release":
                parts.append("publishes release %s %s" % (info["order"], info["reason"]))
            elif kind == "fence":
                parts.append("FENCE set (Redis verified)")
            elif kind == "restore":
                parts.append("RESTORE rem=%s%s%s" % (
                    info["remaining"], " dropped " + ",".join(info["dropped"])
                    if info["dropped"] else "", " C->H " + ",".join(info["c_to_h"])
                    if info["c_to_h"] else ""))
            elif kind == "retake":
                parts.append("RETAKE %s (was %s) rem %s->%s%s" % (
                    ",".join(info["orders"]), ",".join(info["was"]), *info["remaining"],
                    " users in slices" if info.get("in_slices") else ""))
            elif kind == "lower":
                parts.append("LOWER rem %s->%s%s" % (*info["remaining"], " in slices"
                                                     if info.get("in_slices") else ""))
            elif kind == "rebuild":
                parts.append("REBUILD %s %s %s->%s" % (
                    ",".join(info["orders"]) or "nothing", "taken" if self.camp else "rem",
                    *info["remaining"]))
            else:
                parts.append("%s %s" % (kind.replace("_", " "), ",".join(info["orders"])))
        return ("; " + "; ".join(parts)) if parts else ""

    def rc_step(self):
        """(saved cases) rc_to("next")."""
        self.rc_to("next")

    def rc_pass(self):
        """(saved cases) rc_to("after-tail"): the rest of this pass, to the next pass's first
        pause."""
        self.rc_to("after-tail")

    @only("rc_to")
    @rule(point=st.sampled_from(["next", "next", "after-tail", "after-remaining",
                                 "before-repair", "each-repair", "campaign-after-numbers",
                                 "campaign-before-repair", "before-fence", "orders-scanned"]))
    @guarded
    def rc_to(self, point):
        """The reconciler runs to its next pause point ("next"), or on to the named one: at most
        one pass further (a pass with no repair has no each-repair point). A voucher's example
        has no campaign pass: a campaign's point is its voucher twin there."""
        if not self.camp:
            point = VOUCHER_TWIN.get(point, point)
        was, effects, hops, crossed = SHORT[self.rc_at], [], 0, 0
        while True:
            effects += self.rc_go()
            hops += 1
            at = SHORT[self.rc_at]
            crossed += at == "after-tail"
            if point == "next" or at == point or crossed >= 2:
                break
        what = ("reconciler: %s -> %s" % (was, at) if point == "next" else
                "reconciler runs to %s (%d hops)" % (at, hops))
        self.record(what + self.effects_text(effects), "rc_to", {"point": point})

    @only("wait_grace")
    @precondition(lambda self: self.created)
    @rule()
    @guarded
    def wait_grace(self):
        CLOCK.advance(GRACE + 50)
        self.record("the clock moves past the grace (%d ms)" % GRACE, "wait_grace", {})

    # ---- faults

    @only("pg_drift")
    @precondition(lambda self: not self.camp and not self.drifts)
    @rule()
    @guarded
    def pg_drift(self):
        """FAULT: PostgreSQL counts a use no row stands for: an operator's hand edit of used_count
        (a use granted outside the service), a row deleted by hand. The reconciler's verdict is
        used-without-rows and its remaining rule keeps that use out of Redis (lower.lua, or a
        retake's lower): the repair this fault reaches. Once a full pass that began after the
        edit has ended, Redis must offer no more than total - uncounted - taken. Before, Redis
        may still offer that use, and a new reservation of it would be refused by PostgreSQL's
        CHECK: the edit's own damage, not the service's. So the rule is off in the general search
        (DEFAULT_OFF) and on only in aims whose examples take no new use meanwhile (one order,
        already held: tests/model/bases/held-drift.json)."""
        what = "FAULT: PostgreSQL counts a use without a row (used_count by hand)"
        rem = self.redis_state()[0]
        if not rem or rem <= 0:
            # The edit grants a use no order holds: one Redis still has free. Without one it
            # would sell beyond the limit by itself (orders holding every use, and one more).
            self.record(what + " (no use free in Redis: nothing)", "pg_drift", {})
            return
        got = self.w.sql("UPDATE voucher SET used_count = used_count + 1 WHERE code = %s"
                         " AND used_count < total_limit RETURNING used_count", (self.code,))
        if got:
            self.drifts.append(self.passes)
        else:
            what += " (used_count at the limit: nothing)"
        self.record(what, "pg_drift", {})

    def drift_settled(self):
        """The uses PostgreSQL counts without rows that the reconciler had a full pass to see."""
        return sum(1 for p in self.drifts if self.passes >= p + 2)

    @only("delete_key")
    @precondition(lambda self: self.created and not self.targeted)
    @rule(key=st.deferred(lambda: st.sampled_from(FAULT_KEYS)))
    @guarded
    def delete_key(self, key):
        if self.camp:
            key = CAMPAIGN_KEY.get(key, key)
        self.w.r.delete(getattr(self.k, key))
        self.record("FAULT: Redis loses %s" % key, "delete_key", {"key": key})

    @only("lose_confirm")
    @precondition(lambda self: self.created and not self.targeted)
    @rule(i=st.integers(0, 2))
    @guarded
    def lose_confirm(self, i=0, o=None):
        """Redis loses a confirm's write (a crash under appendfsync everysec): C back to H. The
        i-th confirmed order (saved cases may name the order: o)."""
        if o is None:
            conf = sorted(x for x, v in self.w.r.hgetall(self.k.orders).items()
                          if v.endswith(":" + S.CONFIRMED))
            o = int(conf[i % len(conf)].rsplit("-o", 1)[1]) if conf else 0
        v = self.w.r.hget(self.k.orders, self.oid(o))
        what = "FAULT: Redis loses o%d's confirm" % o
        if v and v.endswith(":" + S.CONFIRMED):
            # The whole confirm is lost, its aggregate's move (orders_write.lua) with it.
            tail = int(v.split(":")[0][-6:])
            p = self.w.r.pipeline(transaction=True)
            p.hset(self.k.orders, self.oid(o), v[:-1] + S.HELD)
            p.zadd(self.k.holds, {self.oid(o): int(v.split(":")[2])})
            p.hincrby(self.k.agg, S.CONFIRMED, -1)
            p.hincrby(self.k.agg, S.CONFIRMED + "_customers", -tail)
            p.hincrby(self.k.agg, S.HELD, 1)
            p.hincrby(self.k.agg, S.HELD + "_customers", tail)
            p.execute()
        else:
            what += " (not confirmed: nothing)"
        self.record(what, "lose_confirm", {"o": o})

    @only("d_reserve_twin")
    @precondition(lambda self: getattr(self, "twin", False) and self.created)
    @rule(o=st.integers(0, ORDERS - 1), end=st.sampled_from(TWIN_END))
    @guarded
    def d_reserve_twin(self, o, end):
        """POST reservations of the direct twin with o's orderId, as the C gateway makes it
        (twin_take(): the claim, then dr_reserve as the gateway's role in a transaction of its
        own, the claim kept or released after it). end: how the call ends as the gateway sees it
        (TWIN_END): answered; committed and no answer heard; rolled back. The twin's holds are
        live (two minutes): the reconciler daemon's direct pass does not expire them."""
        o %= self.n_orders
        w, oid, now = self.w, self.oid(o), now_ms()
        self.token += 1
        held = now + HOLD_LIVE
        event = {"type": "VoucherReserved", "version": 1, "code": self.twin_code,
                 "customerId": self.customer(o), "orderId": oid, "discountAmount": 100,
                 "orderAmount": 500000, "reservedAt": iso(now), "heldUntil": iso(held)}

        def dr_reserve():
            conn = w.dconn("gw")
            try:
                with conn.cursor() as c:
                    c.execute("SELECT * FROM dr_reserve(%s, %s, %s, %s, %s, %s, %s, %s)",
                              (self.twin_code, oid, str(self.customer(o)), 500000, 100, now,
                               held, json.dumps(event)))
                    row = c.fetchone()
            except psycopg2.Error as e:
                conn.rollback()
                w.dconn_back("gw", conn)
                self.fail("a direct call raised: the twin's dr_reserve of o%d failed with %s (%s)"
                          " where its function answers a word" % (
                              o, e.pgcode, e.diag.message_primary))
            if end == "cut":
                conn.rollback()
            else:
                conn.commit()
            w.dconn_back("gw", conn)
            return None if end != "answer" else row

        claim, word, status = twin_take(w.gw, w.scripts, self.twin_code, self.token,
                                        self.claim_expire, oid, dr_reserve,
                                        fenced=self.refused_by_fence(),
                                        claim_ignored=TWIN["claim_ignored"])
        w.twin_calls["claim %s, %s" % (claim, word or status)] += 1
        if status == 201:
            self.twin_acked.setdefault(o, len(self.story))
        self.record("twin reserve o%d (%s): claim %s, %s%d%s" % (
            o, end, claim, "dr_reserve %s, " % word if word else
            "no dr_reserve, " if claim == "other" and not TWIN["claim_ignored"] else "",
            status, " ORDER_CONFLICT (another voucher code)" if word is None and status == 409
            else ""), "d_reserve_twin", {"o": o, "end": end})

    def check_twin(self, orders, rows, live):
        """One orderId, one use across the two modes (proto/direct-mode.md, "The orderId across
        modes"; README, "A direct twin"): no orderId holds a use on the flash voucher (taken in
        Redis, a live row in PostgreSQL, live in Kafka, or its reservation's report awaited)
        and a live row on the direct twin at once. orders, rows, live: the flash voucher's
        orders hash, rows and orders live in Kafka, as check_promises() read them."""
        twin = {x for x, in self.w.sql(
            "SELECT order_id FROM voucher_redemption WHERE voucher_code = %s"
            " AND status <> 'RELEASED'", (self.twin_code,))}
        if not twin:
            return
        redis_taken = {x for x, v in orders.items() if v[-1] in TAKEN}
        pg_live = {x for x, st_ in rows.items() if st_ != "RELEASED"}
        waiting = {self.oid(c.order) for c in self.pending if c.kind in ("reserve", "replay")}
        both = sorted(twin & (redis_taken | pg_live | live | waiting))
        if both:
            x = both[0]
            where = [name for name, held in (("taken in redis (%s)" % orders.get(x, ""),
                                              redis_taken), ("live in postgresql", pg_live),
                                             ("live in kafka", live),
                                             ("its report awaited", waiting)) if x in held]
            self.fail("one orderId, two uses: %s holds a use on the flash voucher (%s) and a live"
                      " row on its direct twin %s" % (self.short(x), ", ".join(where),
                                                      self.twin_code))

    @only("rollback")
    @precondition(lambda self: self.created and not self.replicated and not self.targeted and
                  not getattr(self, "twin", False))
    @rule(k=st.integers(1, 3))
    @guarded
    def rollback(self, k):
        """Redis loses the example's last k writes (a crash under appendfsync everysec, a restore
        from an older copy): every key of the example is put back as it was after the k-th
        writing step from the end (RESTORE ... REPLACE; DEL of the keys that did not exist
        then), and voucher:fence is deleted, standing in for the new run_id of the restarted
        Redis. A restart breaks every connection, so the reconciler's are killed too (its pass
        fails at its next command). What the gateway holds in memory (events queued and not
        yet reported, cancels to finish) is kept: it lives in the gateway, not in Redis."""
        lost = min(k, len(self.history) - 1)
        r = self.w.rb
        p = r.pipeline(transaction=True)
        if lost:
            snap = self.history[-1 - lost]
            del self.history[len(self.history) - lost:]
            for key in self.example_keys():
                if key in snap:
                    dump, pttl = snap[key]
                    p.restore(key, max(pttl, 0), dump, replace=True)
                else:
                    p.delete(key)
        p.delete(FENCE_KEY)
        p.execute()
        self.fence_seen = None
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        self.w.r.connection_pool.disconnect()   # the explorer's other connections: killed too
        self.w.gw.connection.disconnect()
        self.rollbacks.append(len(self.story))
        self.record("FAULT: Redis restarts without its last %d writes%s" % (
            lost, "" if lost == k else " (of %d asked)" % k), "rollback", {"k": k})

    # ---- a replica and WAIT (README, "Failover under WAIT")

    @only("link_down")
    @precondition(lambda self: self.replicated and not self.link_broken)
    @rule()
    @guarded
    def link_down(self):
        """FAULT: the replica stops getting the master's writes (its link breaks: REPLICAOF NO
        ONE, so it keeps what it had): every WAIT from now on comes short, in the gateway steps
        and in the reconciler alike, until failover or link_up."""
        self.w.replica.execute_command("REPLICAOF", "NO", "ONE")
        self.link_broken = True
        self.record("FAULT: the replica's link breaks (it keeps what it had)", "link_down", {})

    @only("failover")
    @precondition(lambda self: self.replicated and self.link_broken)
    @rule()
    @guarded
    def failover(self):
        """FAULT: the master dies and the replica is promoted: every key of the example is put
        back as the replica has it (what the master wrote since the link broke is lost: the
        writes no WAIT was met for), and every other connection to Redis is broken, as a
        failover breaks them (the reconciler's pass fails and the next one connects anew). The
        replica then follows the new master (the stack's Redis) again."""
        rep, r = self.w.replica, self.w.rb
        keys = self.example_keys()
        p = rep.pipeline(transaction=True)
        for key in keys:
            p.dump(key)
            p.pttl(key)
        out = p.execute()
        p = r.pipeline(transaction=True)
        for i, key in enumerate(keys):
            dump, pttl = out[2 * i], out[2 * i + 1]
            if dump is None:
                p.delete(key)
            else:
                p.restore(key, max(pttl, 0), dump, replace=True)
        p.execute()
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        self.w.r.connection_pool.disconnect()
        self.w.gw.connection.disconnect()
        self.w.replica_attach()
        self.link_broken = False
        self.failovers.append(len(self.story))
        self.w.failovers += 1
        self.record("FAULT: failover: the replica, promoted, has what it had when its link broke",
                    "failover", {})

    @only("link_up")
    @precondition(lambda self: self.replicated and self.link_broken)
    @rule()
    @guarded
    def link_up(self):
        """The replica's link is back before any failover: it follows the master again."""
        self.w.replica_attach()
        self.link_broken = False
        self.record("the replica's link is back (a full sync)", "link_up", {})

    # ---- two leaders: one frozen before a script, another acting meanwhile

    @only("freeze_leader")
    @precondition(lambda self: self.rc_at == "reconciler-each-repair" and not self.frozen and
                  self.w.fencing)
    @rule()
    @guarded
    def freeze_leader(self):
        """FAULT: the acting reconciler freezes (a stall, SIGSTOP, a slow disk) before the script
        it stands at, after its proof of the lock, and its PostgreSQL session ends meanwhile
        (TCP keepalives, pg_terminate_backend): the lock is free, and another reconciler takes it,
        with a newer generation (proto/redis-keys.md, "Leadership and fencing"). The explorer
        steps the new one from now on; thaw_leader lets the frozen one go."""
        self.frozen = (self.rc, self.rc_logf, self.pause_dir, self.rc_script)
        ended = self.w.end_lock_sessions()
        self.start_rc()
        self.rc_at = self.rc_script = None
        self.fence_seen = None
        self.rc_wait()
        self.record("FAULT: the reconciler freezes before its %s; its session ended (%d), another"
                    " takes the lock" % (self.frozen[3] or "script", ended), "freeze_leader", {})

    @only("thaw_leader")
    @precondition(lambda self: self.frozen)
    @rule()
    @guarded
    def thaw_leader(self):
        """The frozen reconciler wakes and sends the script it stood before, with its old
        generation: a newer leader marked the voucher, so the script must refuse it
        (common/lua/leader.lua) and write nothing; the reconciler then stops acting. It is
        stopped at its next pause point (or once it exits)."""
        proc, logf, pdir, script = self.frozen
        before = self.redis_state()
        self.refresh_log()
        live0, n0 = self.kafka_live(), len(self.log)
        # It runs on to the end of its pass (a restore in steps has a second script), stopped at
        # the next pass's first point, the fence's, its exit, or once it stands by (a pass that
        # failed, and the lock another's: "standby", rc_pass.c).
        os.unlink(os.path.join(pdir, "reconciler-each-repair"))
        deadline = time.time() + 20
        while time.time() < deadline and proc.poll() is None:
            at = [p for p in PAUSES if os.path.exists(os.path.join(pdir, p))]
            if at and at[0] in ("reconciler-after-tail", "reconciler-before-fence"):
                break
            if at:
                os.unlink(os.path.join(pdir, at[0]))
            with open(logf.name) as f:
                if "standby: another replica acts" in f.read():
                    break
            time.sleep(0.001)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        LIVE.discard(proc)
        logf.close()
        self.frozen = None
        with open(logf.name) as f:
            refused = "a newer reconciler holds the lock" in f.read()
        after = self.last_redis = self.redis_state()
        self.refresh_log()
        published = [e for off, _, e in self.log[n0:] if off not in self.mine]
        effects = self.effects_of(before, after, published, live0)
        for kind, info in effects:
            self.effects.append((len(self.story), kind, info))
            self.w.repairs[kind] += 1
        self.w.thawed["refused" if refused else "ran"] += 1
        self.fence_seen = None
        self.record("the frozen reconciler wakes: its %s %s%s" % (
            script or "script", "refused (a newer leader's generation)" if refused else "ran",
            self.effects_text(effects)), "thaw_leader", {})

    # ---- the promises

    # ---- a direct voucher (issue 46, proto/direct-mode.md): PostgreSQL decides alone

    def init_direct(self, total, orders):
        """A direct voucher's example: the voucher row (mode 'direct', as POST /vouchers makes
        it), nothing in Redis, no reconciler daemon (its direct pass is dr_expire and the relay,
        steps of their own here). The outbox and the expiry are global, so what an earlier
        example left (one that failed before its quiescence) is put out of reach first: its
        unsent rows marked sent, its holds moved past any expiry."""
        w = self.w
        w.seq += 1
        w.examples += 1
        w.direct_examples += 1
        CLOCK.set(time.time() * 1000)
        self.n_orders = orders
        self.code = "MD%d_%d_%d" % (os.getpid() % 10000, int(time.time()) % 100000, w.seq)
        self.camp = self.replicated = self.targeted = self.link_broken = self.twin = False
        self.twin_code = None
        self.limit = PER_USER
        self.k = Keys(self.code)
        self.key = self.code
        self.total = total
        self.part = partition_of(self.key)
        self.start = self.committed = self.pos = w.high(self.part)
        w.commit(self.part, self.start)
        w.sql("UPDATE event_outbox SET sent_at = now() WHERE sent_at IS NULL")
        w.sql("UPDATE voucher_redemption SET held_until = 'infinity' WHERE status = 'RESERVED'"
              " AND held_until <> 'infinity' AND voucher_code IN"
              " (SELECT code FROM voucher WHERE mode = 'direct')")
        w.sql("INSERT INTO voucher (code, discount_amount, min_order_amount, total_limit,"
              " per_user_limit, starts_at, ends_at, mode) VALUES (%s, 100, 0, %s, %s,"
              " now() - interval '1 hour', now() + interval '1 day', 'direct')",
              (self.code, total, PER_USER))
        self.log, self.mine, self.pending, self.finishable = [], set(), [], []
        self.acked, self.created, self.paid, self.owner_cancel = {}, {}, set(), set()
        self.cancelled, self.dlt, self.effects, self.story, self.steps = {}, [], [], [], []
        self.took, self.replayed, self.fresh, self.forgotten, self.paid_at = {}, {}, {}, {}, {}
        self.history, self.rollbacks, self.drifts, self.failovers = [], [], [], []
        self.window_writes = self.stale = self.token = self.leaders = self.passes = 0
        self.prev = self.prev2 = "start"
        self.fence_known, self.fence_seen, self.frozen = False, None, None
        self.rc = self.rc_at = self.rc_script = self.hop_script = None
        self.dcalls = []       # DCalls open: run, not yet committed or rolled back
        self.changes = []      # (type, orderId) of every committed change, in commit order
        self.relay = {"stage": "take", "batch": [], "stored": False}
        self.kafka_is_down = False
        self.outages = 0       # Kafka's outages (kafka_down): two an example at most
        self.forged = []       # events d_forge() produced: the writer must dead-letter each
        self.expired_at = {}   # order -> the clock of the dr_expire that released it
        self.ready = True
        self.note("direct voucher %s, total %d, %d order(s) (partition %d)" % (
            self.code, total, orders, self.part), "init_voucher",
            {"total": total, "orders": orders, "direct": True}, self.direct_line())

    def direct_rows(self):
        """(used_count, {orderId: (status, release_reason, heldUntil ms, updated ms)})."""
        used = self.w.sql("SELECT used_count FROM voucher WHERE code = %s", (self.code,))[0][0]
        rows = {r[0]: tuple(r[1:]) for r in self.w.sql(
            "SELECT order_id, status, release_reason, dr_ms(held_until), dr_ms(updated_at)"
            " FROM voucher_redemption WHERE voucher_code = %s", (self.code,))}
        return used, rows

    def outbox(self):
        """This voucher's outbox rows in id order: (id, event, sent)."""
        return [(i, json.loads(p), sent) for i, p, sent in self.w.sql(
            "SELECT id, payload, sent_at IS NOT NULL FROM event_outbox WHERE event_key = %s"
            " ORDER BY id", (self.code,))]

    def direct_line(self):
        self.refresh_log()
        used, rows = self.direct_rows()
        ob = self.outbox()
        p = " ".join("%s:%s" % (self.short(x), r[0][:3]) for x, r in sorted(rows.items()))
        return "pg used=%d [%s] | outbox %d/%d sent | kafka %d/%d | relay@%s%s%s" % (
            used, p, sum(1 for x in ob if x[2]), len(ob), self.pos - self.start, len(self.log),
            self.relay["stage"], " KAFKA DOWN" if self.kafka_is_down else "",
            "".join(" | open %s%s" % (c, "" if c.done.is_set() else " (waits)")
                    for c in self.dcalls))

    def d_wait(self, call):
        """Until call is done or waits on a lock (pg_blocking_pids()): a condition, never a fixed
        sleep. Returns whether it is done."""
        deadline = time.time() + 20
        while not call.done.wait(0.002):
            if self.w.sql("SELECT cardinality(pg_blocking_pids(%s)) > 0", (call.pid,))[0][0]:
                return False
            if time.time() > deadline:
                raise RuntimeError("%r neither done nor waiting after 20 s" % call)
        return True

    def d_start(self, kind, o, who, sql, args, event=None):
        call = DCall(kind, o, who, self.w.dconn(who), sql, args, event)
        call.step = len(self.story)   # a 201 or 200 counts against a cancel answered before it
        self.dcalls.append(call)
        self.d_wait(call)
        return call

    def d_finish(self, call, how):
        """Ends an open call: "answer" (committed, the client reads the answer), "lost"
        (committed, the answer lost: the client saw 503 and retries later), "cut" (rolled back
        before the commit: the function never ran, 503). A call waiting on a lock can only be
        cut (the gateway's statement timeout cancels it). Every other call that waited is
        waited for again. Returns the story's words."""
        waited = not call.done.is_set()
        if waited:
            call.conn.cancel()
            call.done.wait(20)
            how = "cut"
        self.dcalls.remove(call)
        answer = call.answer()
        self.w.direct["%s %s" % (call.kind, "waited, cut" if waited else how)] += 1
        if not waited and call.kind != "expire":
            self.w.direct["%s %s" % (call.kind, answer.split(":")[0])] += 1
        if call.error is not None and not (waited and call.error.pgcode == "57014"):
            call.conn.rollback()
            self.w.dconn_back(call.who, call.conn)
            self.fail("a direct call raised: %r failed with %s (%s) where its function answers"
                      " a word" % (call, call.error.pgcode,
                                   call.error.diag.message_primary))
        if how == "cut":
            call.conn.rollback()
            text = ("cut while it waited on a lock (the statement timeout): 503" if waited else
                    "cut before its commit (it had found %s): 503" % (answer or "its rows"))
        else:
            call.conn.commit()
            text = self.d_committed(call, how == "answer")
        self.w.dconn_back(call.who, call.conn)
        for other in self.dcalls:
            if not other.done.is_set():
                self.d_wait(other)
        return text

    def d_committed(self, call, answered):
        """What a committed call changed and answered, kept for the promises: the changes in
        commit order (each must have one outbox row), the 201s and 200s the client read."""
        o, word, rows = call.o, call.answer(), call.rows
        status = {"reserve": {"RESERVED": 201, "RETRY": 201},
                  "confirm": {"CONFIRMED": 200, "RETRY": 200},
                  "cancel": {"RELEASED": 200, "RETRY": 200}}.get(call.kind, {}).get(word)
        if call.kind == "expire":
            mine = [r for r in rows if r[0] == self.code]
            for r in mine:
                x = int(r[1].rsplit("-o", 1)[1])
                self.changes.append(("VoucherReleased", r[1]))
                self.expired_at[x] = now_ms()
            return "committed: %d released (%s)" % (
                len(mine), " ".join(self.short(r[1]) for r in mine) or "none due")
        change = {"reserve": "RESERVED", "confirm": "CONFIRMED", "cancel": "RELEASED"}[call.kind]
        if word == change:
            self.changes.append((call.event["type"], self.oid(o)))
            if call.kind == "reserve":
                self.created.setdefault(o, {})[rows[0][3]] = len(self.story)
        if call.kind == "cancel" and word == "RELEASED":
            self.owner_cancel.add(o)
        if not answered:
            return "committed (%s), the answer lost: 503" % word
        if status is not None and call.kind != "cancel" and \
                self.cancelled.get(o, len(self.story)) < call.step:
            self.fail("o%d was answered %d %s after its cancel was answered 200" % (
                o, status, word))
        if call.kind == "reserve" and status:
            self.acked[o] = rows[0][3]
        elif call.kind == "confirm" and status:
            self.paid.add(o)
        elif call.kind == "cancel" and status:
            self.cancelled[o] = len(self.story)
        return "%s %s" % (status or {"ORDER_CONFLICT": 409, "HOLD_EXPIRED": 409,
                                     "OUT_OF_STOCK": 409, "ALREADY_USED": 409,
                                     "ALREADY_CONFIRMED": 409, "NOT_FOUND": 404}.get(
                                         word.split(":")[0], 422), word)

    def d_call(self, call, end, what, name, args):
        """A call's step: its transaction ends as end says, or stays open ("open", or while it
        waits on a lock: a request waits, and a later d_end() ends it)."""
        if not call.done.is_set():
            text = "waits on a lock (open)"
        elif end == "open":
            text = "open (found %s, not committed)" % (call.answer() or "%d due" % len(call.rows))
        else:
            text = self.d_finish(call, end)
        self.record("%s: %s" % (what, text), name, args)

    D_END = ["answer", "answer", "answer", "lost", "cut", "open"]

    @only("d_reserve")
    @rule(o=st.integers(0, ORDERS - 1), ttl=st.sampled_from(["live", "past", "short"]),
          end=st.sampled_from(D_END))
    @guarded
    def d_reserve(self, o, ttl, end):
        """POST reservations of a direct voucher: dr_reserve as the gateway calls it
        (gw_reserve_direct.c), with the VoucherReserved it stores in the outbox; end says how
        its transaction ends (d_finish()), or "open" leaves it running."""
        o %= self.n_orders
        now = now_ms()
        held = now + TTL[ttl]
        event = {"type": "VoucherReserved", "version": 1, "code": self.code,
                 "customerId": self.customer(o), "orderId": self.oid(o), "discountAmount": 100,
                 "orderAmount": 500000, "reservedAt": iso(now), "heldUntil": iso(held)}
        call = self.d_start("reserve", o, "gw", "SELECT * FROM dr_reserve(%s, %s, %s, %s, %s,"
                            " %s, %s, %s)", (self.code, self.oid(o), str(self.customer(o)),
                                             500000, 100, now, held, json.dumps(event)), event)
        self.d_call(call, end, "reserve o%d (%s)" % (o, ttl), "d_reserve",
                    {"o": o, "ttl": ttl, "end": end})

    @only("d_confirm")
    @precondition(lambda self: self.created)
    @rule(o=st.integers(0, ORDERS - 1), total=st.sampled_from(["none", "same", "other"]),
          end=st.sampled_from(D_END))
    @guarded
    def d_confirm(self, o, total, end):
        """POST .../confirm of a direct voucher: dr_confirm without a final total, with the
        reservation's, or with another (its discount by the voucher's rules: 100)."""
        o %= self.n_orders
        now = now_ms()
        final = {"none": None, "same": 500000, "other": 400000}[total]
        event = {"type": "VoucherConfirmed", "version": 1, "code": self.code,
                 "customerId": self.customer(o), "orderId": self.oid(o),
                 "confirmedAt": iso(now)}
        if final is not None:
            event.update(discountAmount=100, orderAmount=final)
        call = self.d_start("confirm", o, "gw", "SELECT * FROM dr_confirm(%s, %s, %s, %s, %s,"
                            " %s)", (self.code, self.oid(o), final,
                                     None if final is None else 100, now, json.dumps(event)),
                            event)
        self.d_call(call, end, "confirm o%d (total %s)" % (o, total), "d_confirm",
                    {"o": o, "total": total, "end": end})

    @only("d_cancel")
    @precondition(lambda self: self.created)
    @rule(o=st.integers(0, ORDERS - 1), end=st.sampled_from(D_END))
    @guarded
    def d_cancel(self, o, end):
        """DELETE reservations/{orderId} of a direct voucher: dr_cancel."""
        o %= self.n_orders
        now = now_ms()
        event = {"type": "VoucherReleased", "version": 1, "code": self.code,
                 "customerId": self.customer(o), "orderId": self.oid(o),
                 "releasedAt": iso(now), "reason": "CANCELLED"}
        call = self.d_start("cancel", o, "gw", "SELECT * FROM dr_cancel(%s, %s, %s, %s)",
                            (self.code, self.oid(o), now, json.dumps(event)), event)
        self.d_call(call, end, "cancel o%d" % o, "d_cancel", {"o": o, "end": end})

    @only("d_end")
    @precondition(lambda self: getattr(self, "dcalls", None))
    @rule(i=st.integers(0, 2), how=st.sampled_from(["answer", "answer", "lost", "cut"]))
    @guarded
    def d_end(self, i, how):
        """An open call's transaction ends (d_finish()): a call that is done, the i-th of them;
        only a cut may end a call that waits on a lock (when no call is done, one is cut)."""
        done = [c for c in self.dcalls if c.done.is_set()]
        if how == "cut" or not done:
            call = self.dcalls[i % len(self.dcalls)]
        else:
            call = done[i % len(done)]
        what = "%r ends" % call
        self.record("%s: %s" % (what, self.d_finish(call, how)), "d_end", {"i": i, "how": how})

    @only("d_expire")
    @precondition(lambda self: self.created)
    @rule(end=st.sampled_from(["answer", "answer", "cut", "open"]))
    @guarded
    def d_expire(self, end):
        """The reconciler's expiry of a direct voucher's holds: dr_expire (a slice of
        EXPIRE_BATCH, the grace) in a transaction of its own, as the reconciler's role."""
        call = self.d_start("expire", None, "rc", "SELECT * FROM dr_expire(%s, %s, %s)",
                            (EXPIRE_BATCH, now_ms(), GRACE))
        self.d_call(call, end, "expiry (dr_expire)", "d_expire", {"end": end})

    @only("relay_next")
    @precondition(lambda self: getattr(self, "changes", None))
    @rule()
    @guarded
    def relay_next(self):
        """The outbox relay (the acting reconciler's, proto/direct-mode.md "The outbox") one
        step on: take (dr_outbox_take: the unsent rows in id order), produce (each keyed by its
        code; nothing is stored while Kafka is down), the delivery report (all stored, or the
        batch dropped and its rows left unsent), mark (dr_outbox_sent). With --relay-mark-early
        (a mutant) the mark comes with the produce, before the report."""
        r, w = self.relay, self.w
        stage = r["stage"]
        if stage == "take":
            r["batch"] = w.sql("SELECT * FROM dr_outbox_take(%s)", (RELAY["batch"],))
            r["stage"] = "produce" if r["batch"] else "take"
            what = "relay takes %s" % (" ".join(str(x[0]) for x in r["batch"]) or "nothing")
        elif stage == "produce":
            if RELAY["mark_early"]:
                w.sql("SELECT dr_outbox_sent(%s)", ([x[0] for x in r["batch"]],))
            r["stored"] = not self.kafka_is_down
            if r["stored"]:
                for _, key, payload in r["batch"]:
                    w.produce_raw(key, payload)
            r["stage"] = "report"
            what = "relay produces %d%s" % (len(r["batch"]), "" if r["stored"] else
                                             ": Kafka is down, nothing stored")
        elif stage == "report":
            r["stage"] = "mark" if r["stored"] else "take"
            self.w.direct["relay report " + ("ok" if r["stored"] else "failed")] += 1
            what = "relay: delivery report %s" % ("ok" if r["stored"] else
                                                   "failed, the rows stay unsent")
        else:
            n = 0 if RELAY["mark_early"] else w.sql(
                "SELECT dr_outbox_sent(%s)", ([x[0] for x in r["batch"]],))[0][0]
            r["stage"], r["batch"] = "take", []
            what = "relay marks %d sent" % n
        self.record(what, "relay_next", {})

    @only("relay_crash")
    @precondition(lambda self: getattr(self, "relay", {}).get("stage", "take") != "take")
    @rule()
    @guarded
    def relay_crash(self):
        """FAULT: the relay dies and starts again: what it took and heard is forgotten; the rows
        it had not marked are taken again (at least once)."""
        stage = self.relay["stage"]
        self.w.direct["relay crash before its " + stage] += 1
        self.relay = {"stage": "take", "batch": [], "stored": False}
        self.record("FAULT: the relay crashes before its %s" % stage, "relay_crash", {})

    @only("relay_real")
    @precondition(lambda self: getattr(self, "changes", None))
    @rule(crash=st.sampled_from([False, False, True]))
    @guarded
    def relay_real(self, crash):
        """The reconciler's relay (rc_outbox.c), the real one: `voucher-reconciler --once`,
        which relays the outbox after its pass (rounds of RELAY["batch"] rows: take, produce,
        the delivery reports, mark the acknowledged prefix). While Kafka is down the topic
        refuses its produce. crash: it stops at its pause point between the delivery reports
        and the mark (RELAY_PAUSE) and is killed there, its rows produced and not marked; a
        relay with nothing to take exits without reaching it. Its pass expires nothing (a
        grace of RELAY_REAL_GRACE): the model's expiry is d_expire."""
        w = self.w
        env = dict(os.environ, VOUCHER_LOG_LEVEL="warn", LD_PRELOAD=w.shim,
                   EXPLORER_CLOCK_FILE=CLOCK.path)
        args = [w.bin_reconciler, "--once", "--grace", RELAY_REAL_GRACE, "--timeout", "3s",
                "--outbox-batch", str(RELAY["batch"]), "--outbox-retention", "0"]
        if crash:
            pause_dir = os.path.join(w.scratch, self.code + ".relay")
            os.makedirs(pause_dir, exist_ok=True)
            env.update(VOUCHER_PAUSE=RELAY_PAUSE, VOUCHER_PAUSE_DIR=pause_dir)
        for _ in range(50):
            proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            LIVE.add(proc)
            paused = False
            if crash:
                mark = os.path.join(pause_dir, RELAY_PAUSE)
                deadline = time.time() + 30
                while proc.poll() is None and not os.path.exists(mark):
                    if time.time() > deadline:
                        raise RuntimeError("the reconciler's relay neither paused nor ended")
                    time.sleep(0.002)   # polled: the pause file or the exit
                if os.path.exists(mark) and proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    paused = True
            out = proc.communicate(timeout=60)[0]
            LIVE.discard(proc)
            if crash and os.path.exists(mark):
                os.unlink(mark)
            if paused or "outbox:" in out:
                break
            if "another reconciler holds the lock" not in out:
                raise RuntimeError("voucher-reconciler --once did not relay: %s" % out)
            # The daemon of the example before lets its lock go as its session ends: again.
            time.sleep(0.05)
        else:
            raise RuntimeError("voucher-reconciler --once never took the lock: %s" % out)
        if paused:
            what = "the reconciler's relay produces and is killed before its mark"
            w.direct["real relay killed before its mark"] += 1
        else:
            line = [x for x in out.splitlines() if x.startswith("outbox:")][0]
            what = "the reconciler's relay: " + line.split(" left")[0][len("outbox: "):]
            w.direct["real relay %s" % ("refused" if self.kafka_is_down else "ran")] += 1
        self.record(what, "relay_real", {"crash": crash})

    @only("kafka_down")
    @precondition(lambda self: not getattr(self, "kafka_is_down", True) and
                  getattr(self, "outages", 2) < 2)
    @rule()
    @guarded
    def kafka_down(self):
        """FAULT: Kafka stops (as the relay sees it: its produce stores nothing). The gateway's
        calls go on: they never wait for Kafka."""
        self.kafka_is_down = True
        self.outages += 1
        self.w.topic_writable(False)
        self.record("FAULT: Kafka is down", "kafka_down", {})

    @only("kafka_up")
    @precondition(lambda self: getattr(self, "kafka_is_down", False))
    @rule()
    @guarded
    def kafka_up(self):
        self.kafka_is_down = False
        self.w.topic_writable(True)
        self.record("Kafka is back", "kafka_up", {})

    @only("d_forge")
    @precondition(lambda self: getattr(self, "forged", None) == [] and
                  not getattr(self, "kafka_is_down", True))
    @rule(o=st.integers(0, ORDERS - 1))
    @guarded
    def d_forge(self, o):
        """FAULT: an event of the voucher no transaction wrote (a VoucherReserved of o at an
        amount no request names) reaches the topic: the writer must dead-letter it
        (direct-mismatch) and change nothing."""
        o %= self.n_orders
        event = {"type": "VoucherReserved", "version": 1, "code": self.code,
                 "customerId": self.customer(o), "orderId": self.oid(o), "discountAmount": 1,
                 "orderAmount": 1, "reservedAt": iso(now_ms()), "heldUntil": iso(now_ms())}
        self.w.produce(self.code, event)
        self.forged.append(event)
        self.record("FAULT: a forged VoucherReserved of o%d in the topic" % o, "d_forge",
                    {"o": o})

    def check_direct(self, final=False):
        """A direct voucher's promises (README, "A direct voucher's example"), after every step;
        final: at quiescence, where nothing may be left in flight."""
        used, rows = self.direct_rows()
        live = sorted(x for x, r in rows.items() if r[0] in ("RESERVED", "CONFIRMED"))
        if used > self.total or len(live) > self.total:
            self.fail("OVERSOLD: used_count %d, live rows %d (%s), total %d" % (
                used, len(live), live, self.total))
        if used != len(live):
            self.fail("%s: used_count %d, live rows %d (%s)" % (
                "undersold" if used > len(live) else "OVERSOLD", used, len(live), live))
        for o, held in self.acked.items():
            r = rows.get(self.oid(o))
            if r is None:
                self.fail("o%d was answered 201 and has no row" % o)
            if r[0] != "RELEASED":
                continue
            if r[1] == "CANCELLED" and o not in self.owner_cancel:
                self.fail("o%d, answered 201, was released as CANCELLED with no cancel" % o)
            if r[1] == "EXPIRED" and not r[3] > r[2] + GRACE:
                self.fail("o%d, answered 201, was released before its heldUntil and the grace"
                          " (%s)" % (o, r))
        for o in self.paid:
            r = rows.get(self.oid(o))
            if r is None or r[0] != "CONFIRMED" and not (r[1] == "CANCELLED" and
                                                         o in self.owner_cancel):
                self.fail("a paid order was released by someone else than its owner: o%d (%s)"
                          % (o, r))
        ob = self.outbox()
        stored = [(e["type"], e["orderId"]) for _, e, _ in ob]
        if sorted(stored) != sorted(self.changes):
            self.fail("outbox: the committed changes %s, the outbox rows %s (each change has"
                      " exactly one)" % (self.changes, stored))
        topic = [e for _, _, e in self.log if self.mine_event(e) and e not in self.forged]
        for _, e, sent in ob:
            if sent and e not in topic:
                self.fail("relay: an outbox row marked sent is not in the topic: %s" % e)
        for e in topic:
            if e not in [x for _, x, _ in ob]:
                self.fail("relay: an event in the topic no outbox row holds: %s" % e)
        for x in {o for _, o in self.changes}:
            want = [t for t, o in self.changes if o == x]
            seen = []
            for e in topic:
                if e["orderId"] == x and e not in seen:
                    seen.append(e)
            got = [e["type"] for e in seen]
            if got != want[:len(got)] or final and got != want:
                self.fail("relay: %s's events in the topic %s, committed %s (each at least once,"
                          " in commit order)" % (self.short(x), got, want))
        for e, cls, err in self.dlt:
            if e not in self.forged:
                self.fail("writer: dead-lettered a direct voucher's event its row bears out:"
                          " %s (%s: %s)" % (e, cls, err))
        if final:
            unsent = [e for _, e, sent in ob if not sent]
            if unsent:
                self.fail("relay: outbox rows never sent: %s" % unsent)
            missed = [e for e in self.forged if e not in [x for x, _, _ in self.dlt]]
            if missed:
                self.fail("writer: a forged event was not dead-lettered: %s" % missed)

    def quiesce_direct(self):
        """Every open call ends (answered), Kafka comes back, the relay drains the outbox, the
        clock passes every heldUntil and the grace, the expiry runs until nothing is due, the
        relay drains again, the writer catches up: then every promise, with nothing excused."""
        self.story.append("     --- quiescence: the calls end, the relay drains, holds expire,"
                          " the writer catches up ---")
        while self.dcalls and not self.muted:
            done = [c for c in self.dcalls if c.done.is_set()]
            self.d_end(self.dcalls.index(done[0]) if done else 0, "answer" if done else "cut")
        if self.kafka_is_down and not self.muted:
            self.kafka_up()
        self.drain()
        used, rows = self.direct_rows()
        held = [r[2] for r in rows.values() if r[0] == "RESERVED"]
        if held and not self.muted:
            self.story.append("     --- the clock moves past every heldUntil: holds expire ---")
            CLOCK.set(max(max(held) + GRACE + 50, now_ms()))
        for _ in range(len(rows) + 1):
            if self.muted or not any(r[0] == "RESERVED" for r in self.direct_rows()[1].values()):
                break
            self.d_expire("answer")
        self.drain()
        if self.muted:
            return
        self.refresh_log()
        self.writer_apply(len(self.log) + 1, True)
        if not self.muted:
            self.check_direct(final=True)

    def drain(self):
        """The model's relay finishes the batch it holds, then the reconciler's real relay
        (relay_real) publishes what is left: every row, in id order, since Kafka is up. Where
        the rules leave the real relay out (--rules), the model's relay drains the outbox."""
        real = RULES["on"] is None or "relay_real" in RULES["on"]
        for _ in range(4 * (len(self.outbox()) + 2)):
            if self.muted or self.relay["stage"] == "take" and (real or not any(
                    not s for _, _, s in self.outbox())):
                break
            self.relay_next()
        for _ in range(len(self.outbox()) // (10 * RELAY["batch"]) + 2):
            if not real or self.muted or all(s for _, _, s in self.outbox()):
                break
            self.relay_real(False)   # ten rounds of RELAY["batch"] rows at most per run

    def kafka_live(self):
        """Orders the writer will count once it applied everything in Kafka: a VoucherReserved
        or VoucherConfirmed and no VoucherReleased (the row's status only moves forward)."""
        return set(self.kafka_live_info())

    def kafka_live_info(self):
        """kafka_live() with each order's code and customer (from its events)."""
        best, info = {}, {}
        for _, _, e in self.log:
            if self.mine_event(e):
                t = TYPES[e["type"]]
                best[e["orderId"]] = max(best.get(e["orderId"], 0), t)
                info.setdefault(e["orderId"], (e["code"], e["customerId"]))
        return {o: info[o] for o, t in best.items() if t in (1, 2)}

    def fail(self, msg):
        cls, why = self.classify(msg)
        if self.w.mute_found and cls in self.w.found_classes:
            self.w.muted_examples[cls] += 1
            raise Muted(cls)
        self.failed = True
        v = Violation(msg)
        v.cls, v.why = cls, why
        # Kept as found: Hypothesis runs a failing example again before it reports it, and a
        # step whose outcome follows real time (a WAIT, a frozen leader's proof of its lock) can
        # make that run differ (its Flaky errors): the find is this one (main(), flaky_find()).
        self.w.first_violation = (v, list(self.steps), list(self.story))
        raise v

    def campaign_disagreement(self, taken, orders, users, used):
        """At quiescence: taken maps exactly the codes of PostgreSQL's live rows to their orders,
        used_count counts them, and every customer's count in users is their live rows."""
        live = self.w.sql("SELECT order_id, code, customer_id FROM campaign_redemption"
                          " WHERE campaign_id = %s AND status <> 'RELEASED'", (self.cid,))
        if len(live) != used:
            return "used_count %d, %d live rows" % (used, len(live))
        if taken is None:
            if live or orders:
                return "Redis has no taken (%d live rows): the campaign refuses new orders" % \
                    len(live)
            return None
        if not users and (live or orders):
            return "Redis has no users: the campaign refuses new orders"
        want = {code: x for x, code, _ in live}
        have = {c: x for c, x in taken.items() if c != "!"}
        for c, x in sorted(have.items()):
            if want.get(c) is None and orders.get(x, S.RELEASED)[-1] not in TAKEN:
                return "taken keeps %s for %s, which holds nothing (no live row, %s in Redis):" \
                    " the code is never offered again" % (self.kname(c), self.short(x),
                                                         (orders.get(x) or "no order")[-1:] if x in orders else "no order")
        rows = {x: (st_, code) for x, st_, code in self.w.sql(
            "SELECT order_id, status, code FROM campaign_redemption WHERE campaign_id = %s",
            (self.cid,))}
        for c, x in sorted(have.items()):
            if want.get(c) is None and x in rows:
                return "Redis holds %s for %s (%s), PostgreSQL has %s %s with %s: no pass" \
                    " releases it (the guard finds the row's code not taken by it)" % (
                        self.kname(c), self.short(x), orders.get(x, "-")[-1:],
                        self.short(x), rows[x][0], self.kname(rows[x][1]))
        if want != have:
            return "taken %s, PostgreSQL's live codes %s" % (
                {self.kname(c): self.short(x) for c, x in have.items()},
                {self.kname(c): self.short(x) for c, x in want.items()})
        per = collections.Counter(str(cu) for _, _, cu in live)
        for cu in set(per) | {c for c in users if c != "!"}:
            if int(users.get(cu, 0)) != per.get(cu, 0):
                return "customer %s: users says %s, PostgreSQL %d live rows (%s)" % (
                    cu, users.get(cu), per[cu], "counted too high: refused below the limit"
                    if int(users.get(cu, 0)) > per.get(cu, 0) else "counted too low")
        return None

    def classify(self, msg):
        """Which of issue 22's seven races (or what else) broke the promise: by the promise and
        by what the reconciler's hops did in this example (self.effects). Returns (class, why).
        A campaign's failure is never one of the seven (they are the voucher's): its class is
        campaign-<promise> (CAMPAIGN_CLASSES)."""
        if self.direct:
            for needle, cls in DIRECT_CLASSES:
                if needle in msg:
                    return cls, msg.split(":")[0]
            return "direct-other", msg.split(":")[0]
        if "one orderId, two uses" in msg:
            return "twin-order-twice", "an orderId took a use on a flash voucher and on its" \
                " direct twin"
        if "Redis not verified" in msg:
            return "fence-stuck", "the reconciler did not verify Redis again after it lost writes"
        if "aggregate is not a recount" in msg:
            return "aggregate", "an aggregate (proto/redis-keys.md, \"Aggregates\") that does" \
                " not count what it sits beside"
        if self.camp:
            kinds = sorted({k for _, k, _ in self.effects})
            for needle, cls in CAMPAIGN_CLASSES:
                if needle in msg:
                    return cls, "%s (the reconciler's effects: %s)" % (
                        cls, ", ".join(kinds) or "none")
            return "campaign-other", msg.split(":")[0]
        m = re.search(r"\bo(\d)\b", msg)
        o = int(m.group(1)) if m else None

        def other(kind):
            # None of the seven: put down to a rollback (Redis lost its last writes) when the
            # example had one, else to something else.
            return ("rollback-" if self.rollbacks else "other-") + kind
        so = "o%d" % o if o is not None else None
        eff = self.effects

        def reasons(order, after=-1):
            return {i["reason"] for s, k, i in eff if k == "release" and i["order"] == order
                    and s > after}

        def revived_cancel():
            # A retake of an order after its owner's cancel was answered 200.
            return [(s, i) for s, k, i in eff if k == "retake" and
                    any(self.cancelled.get(int(x[1:]), 1 << 30) < s for x in i["orders"])]
        if "paid order was released" in msg:
            if "EXPIRED" in reasons(so, self.paid_at.get(o, 1 << 30)):
                return "race2", "the reconciler expired a hold whose confirm was answered 200"
            return other("paid-released"), "a paid order released (%s)" % sorted(reasons(so))
        if "was released by the reconciler" in msg:
            held = int(re.search(r":(\d+):[A-Z]\)", msg).group(1)) if \
                re.search(r":(\d+):[A-Z]\)", msg) else None
            if "UNDELIVERED" in reasons(so):
                made = self.created.get(o, {}).get(held)
                if made is not None and any(f < made for f in self.forgotten.get(o, [])):
                    return "race4", ("a new hold under an orderId forgotten before was released"
                                     " as undelivered")
                if held in self.replayed.get(o, set()) and held not in self.fresh.get(o, set()):
                    # Its first request got no 201 (its event lost, or not known stored): the
                    # hold was stranded, and only a retry answered 201.
                    return "race3", ("a stranded hold, answered 201 by a retry, was released as"
                                     " undelivered")
                return "race3-variant", ("a new hold answered 201 after the pass read the tail"
                                         " was released as undelivered")
            return other("201-released"), "a 201'd hold released (%s)" % sorted(reasons(so))
        if "after its cancel was answered" in msg:
            if revived_cancel():
                return "race7", "a retake revived a cancelled order"
            return other("answer-after-cancel"), "an answer after a cancel's 200"
        drops = [(s, i) for s, k, i in eff if k == "restore" and i["dropped"]]
        if "OVERSOLD" in msg or "Redis offers a use that is counted" in msg or \
                "refused events" in msg:
            if drops:
                return "race1", "a restore dropped orders Redis held (%s)" % drops[0][1]["dropped"]
            if revived_cancel():
                return "race7", "a retake revived a cancelled order"
            return other("oversell"), "an oversell with no restore drop nor revived cancel"
        under = [(s, k) for s, k, i in eff if k in ("retake", "lower") and i["made_undersell"]]
        if under:
            s, k = under[0]
            if k == "retake":
                return "race5", "a retake took a use the counter already counted (step %d)" % s
            return "race6", "a lower lowered a counter that was right (step %d)" % s
        if revived_cancel():
            return "race7", "a retake revived a cancelled order"
        if drops:
            return "race1", "a restore dropped orders Redis held (%s)" % drops[0][1]["dropped"]
        if "users says" in msg:
            return other("users"), "a customer's count in users disagrees with the orders"
        if re.search(r": Redis C, PostgreSQL RESERVED$", msg):
            return other("confirm-lost"), ("a confirm answered 503 that Redis ran: its"
                                           " VoucherConfirmed never published")
        if "undersold" in msg:
            return other("undersold"), "undersold at quiescence, no repair made it"
        return ("rollback" if self.rollbacks else "other"), msg.split(":")[0]

    @invariant()
    def promises(self):
        if not self.ready or self.muted:
            return
        try:
            self.check_promises()
        except Muted:
            self.muted = True

    def check_promises(self):
        self.refresh_log()
        if self.direct:
            return self.check_direct()
        if self.camp:
            return self.check_campaign()
        rem, orders, _ = self.redis_state()
        used, rows = self.pg_state()
        redis_taken = {o for o, v in orders.items() if v[-1] in TAKEN}
        live = self.kafka_live()
        if len(live) > self.total:
            self.fail("OVERSOLD: %d orders live in Kafka (%s) for a total of %d"
                      % (len(live), sorted(live), self.total))
        # While fenced nobody trusts Redis (its state is not compared with Kafka's): the harm a
        # rolled-back Redis does shows in the answers, which are checked always. The promise kept
        # meanwhile: no answer comes from an unverified Redis (the gateway's fence refuses), so
        # what it offers sells nothing (tests/integration/test_redis_rollback.sh, its on-mode).
        if rem is not None and not self.untrusted() and \
                rem + len(redis_taken | live) > self.total:
            self.fail("Redis offers a use that is counted: remaining %d + taken %d (%s) > total %d"
                      % (rem, len(redis_taken | live), sorted(redis_taken | live), self.total))
        drift = self.drift_settled()
        if drift and rem is not None and not self.untrusted() and \
                rem + len(redis_taken | live) + drift > self.total:
            self.fail("Redis offers a use that is counted: remaining %d + taken %d (%s) + %d used"
                      " without rows > total %d" % (rem, len(redis_taken | live),
                                                    sorted(redis_taken | live), drift, self.total))
        if self.dlt:
            self.fail("the writer refused events: %s" % self.dlt)
        self.check_aggregates(orders)
        self.check_answers(orders, rows)
        if self.targeted:
            self.check_unsent(orders)
        if self.twin:
            self.check_twin(orders, rows, live)

    def check_aggregates(self, orders):
        """The aggregates (proto/redis-keys.md, "Aggregates") at every step: Redis's (agg) is a
        recount of the orders hash beside it whenever that hash exists (a hash lost without a
        script leaves it stale until the next write or repair: the reconciler reads it as
        unsound then), and PostgreSQL's (voucher_aggregate's row, a campaign's
        campaign_aggregate's) a recount of its rows."""
        if orders:
            want = {}
            for v in orders.values():
                parts = v.split(":")
                state = parts[3] if len(parts) == 4 and parts[3] in TAKEN + (S.RELEASED,) else "?"
                want[state] = want.get(state, 0) + 1
                if state != "?":
                    f = state + "_customers"
                    want[f] = want.get(f, 0) + int(parts[0][-6:])
            got = {f: int(n) for f, n in self.w.r.hgetall(self.k.agg).items()}
            got = {f: n for f, n in got.items() if n}
            want = {f: n for f, n in want.items() if n}
            if got != want:
                self.fail("Redis's aggregate is not a recount of its orders: agg %s, orders %s"
                          % (sorted(got.items()), sorted(want.items())))
        # The voucher's or the campaign's row, its aggregate's row, its rows' column.
        owner, agg, rows, key = (
            ("campaign o", "campaign_aggregate a ON a.campaign_id = o.id", "campaign_redemption",
             "campaign_id = o.id") if self.camp else
            ("voucher o", "voucher_aggregate a ON a.code = o.code", "voucher_redemption",
             "voucher_code = o.code"))
        kept, counted = self.w.sql(
            # No row yet (no redemption changed so far): nothing counted, all 0.
            "SELECT ARRAY[coalesce(a.agg_reserved, 0), coalesce(a.agg_confirmed, 0),"
            " coalesce(a.agg_released, 0), coalesce(a.agg_reserved_customers, 0),"
            " coalesce(a.agg_confirmed_customers, 0),"
            " coalesce(a.agg_released_customers, 0)]::bigint[],"
            " (SELECT ARRAY[count(*) FILTER (WHERE r.status = 'RESERVED'),"
            "  count(*) FILTER (WHERE r.status = 'CONFIRMED'),"
            "  count(*) FILTER (WHERE r.status = 'RELEASED'),"
            "  coalesce(sum(right(r.customer_id::text, 6)::bigint)"
            "   FILTER (WHERE r.status = 'RESERVED'), 0),"
            "  coalesce(sum(right(r.customer_id::text, 6)::bigint)"
            "   FILTER (WHERE r.status = 'CONFIRMED'), 0),"
            "  coalesce(sum(right(r.customer_id::text, 6)::bigint)"
            "   FILTER (WHERE r.status = 'RELEASED'), 0)]::bigint[]"
            "  FROM " + rows + " r WHERE r." + key + ")"
            " FROM " + owner + " LEFT JOIN " + agg +
            (" WHERE o.id = %s" if self.camp else " WHERE o.code = %s"),
            (self.cid if self.camp else self.code,))[0]
        if list(kept) != list(counted):
            self.fail("PostgreSQL's aggregate is not a recount of its rows: agg %s, rows %s"
                      % (list(kept), list(counted)))

    def check_unsent(self, orders):
        """A hold Redis took whose event never reaches Kafka is given back once a grace has passed
        since a pass judged it, whatever else is in flight: the pass that began a grace after the
        first pass to see it judged it releases it (rc_model_release(), UNDELIVERED), by a full
        read if a targeted one would settle the voucher instead. Checked in the examples with
        the periodic full read (TARGETED), where a busy voucher is not read in full every pass;
        not while another reconciler acts (freeze_leader) or nobody trusts Redis."""
        if self.leaders > 1 or self.frozen or self.untrusted():
            self.unsent_seen = {}
            return
        logged = {e.get("orderId") for _, _, e in self.log}
        waiting = {self.oid(c.order) for c in self.pending}
        seen = {}
        for oid, v in orders.items():
            if v[-1] != S.HELD or oid in logged or oid in waiting:
                continue
            first = seen[(oid, v)] = self.unsent_seen.get((oid, v), self.passes)
            judged = self.judged_clock.get(first + 1)  # the first pass that began after it
            if judged is None:
                continue
            late = [i for i, c in enumerate(self.pass_clock, 1)
                    if i > first + 1 and c >= judged + GRACE + 50]
            if late and self.passes > late[0]:
                self.fail("undersold: %s is held in Redis (%s) and no event of it ever reached"
                          " Kafka; pass %d began %d ms after pass %d judged it and gave nothing"
                          " back" % (self.short(oid), v, late[0],
                                     self.pass_clock[late[0] - 1] - judged, first + 1))
        self.unsent_seen = seen

    def check_answers(self, orders, rows):
        """A paid order released only by its owner; a 201 not released before its heldUntil."""
        now = now_ms()
        for o in range(ORDERS):
            oid = self.oid(o)
            v = orders.get(oid)
            if o in self.paid and o not in self.owner_cancel:
                if rows.get(oid) == "RELEASED" or (v and v[-1] in (S.EXPIRY_BEGUN, S.RELEASED)):
                    self.fail("a paid order was released by someone else than its owner: o%d"
                              " (redis %s, pg %s)" % (o, v, rows.get(oid)))
            if v and v[-1] in (S.EXPIRY_BEGUN, S.RELEASED) and o not in self.owner_cancel:
                held = int(v.split(":")[2])
                if held in self.acked.get(o, ()) and held > now:
                    self.fail("o%d, answered 201 with heldUntil in the future, was released by"
                              " the reconciler (%s)" % (o, v))

    def holders(self, taken, orders):
        """A campaign's orders holding a use, as (source, order, code): live in Kafka (the rows
        PostgreSQL will count) and H, C, X or E in Redis (the code from taken, else the code of
        the order's last hold)."""
        by_order = {x: c for c, x in (taken or {}).items() if c != "!"}
        out = [("kafka", o, code) for o, (code, _) in self.kafka_live_info().items()]
        for x, v in orders.items():
            if v[-1] in TAKEN:
                o = int(x.rsplit("-o", 1)[1])
                out.append(("redis", x, by_order.get(x) or self.took.get(o)))
        return out

    def check_campaign(self):
        """A campaign's promises (README, "A campaign's example"): a code held or used by one
        order at most, in Kafka and in Redis, and never offered while an order holds it; each
        customer within perCustomerLimit in Kafka and in Redis; no event refused by PostgreSQL;
        a paid order released only by its owner; a 201 not released before its heldUntil."""
        taken, orders, _ = self.redis_state()
        used, rows = self.pg_state()
        hold = self.holders(taken, orders)
        fenced = self.untrusted()   # Redis not verified: its state is not compared (voucher's)
        if fenced:
            hold = [h for h in hold if h[0] != "redis"]
        for src in ("kafka",) if fenced else ("kafka", "redis"):
            by_code, by_customer = collections.defaultdict(set), collections.defaultdict(set)
            for s_, x, code in hold:
                if s_ == src:
                    by_code[code].add(x)
            live = self.kafka_live_info()
            for x, (code, customer) in live.items():
                if src == "kafka":
                    by_customer[customer].add(x)
            for x, v in orders.items():
                if src == "redis" and v[-1] in TAKEN:
                    by_customer[int(v.split(":")[0])].add(x)
            for code, xs in by_code.items():
                if len(xs) > 1:
                    self.fail("a code used by two orders: %s holds %s in %s" % (
                        self.kname(code), sorted(self.short(x) for x in xs), src))
            for cu, xs in by_customer.items():
                if len(xs) > self.limit:
                    self.fail("customer %d beyond perCustomerLimit %d in %s: %s" % (
                        cu, self.limit, src, sorted(self.short(x) for x in xs)))
        if taken is not None and not fenced:
            for s_, x, code in hold:
                if code and taken.get(code) != x:
                    self.fail("Redis offers a code that is held: %s (%s in %s), taken says %s" % (
                        self.kname(code), self.short(x), s_, taken.get(code)))
        if used > self.total:
            self.fail("OVERSOLD: campaign used_count %d > %d codes" % (used, self.total))
        if self.dlt:
            answered = {self.oid(o) for o in self.acked}
            self.fail("the writer refused events%s: %s" % (
                " answered 201" if any(e["orderId"] in answered for e, _, _ in self.dlt) else "",
                [(e["type"], self.short(e["orderId"]), self.kname(e["code"]), cls, err)
                 for e, cls, err in self.dlt]))
        self.check_aggregates(orders)
        self.check_answers(orders, rows)

    def quiesce(self):
        """Every queued event delivered, the writer caught up, passes past the grace: then Redis
        and PostgreSQL agree, every 201 has its row, and no undersell remains."""
        if self.frozen and not self.muted:
            self.thaw_leader()   # a frozen leader wakes some time: its script meets the newer one
        if self.link_broken and not self.muted:
            self.link_up()       # and a replica's link comes back (else every WAIT comes short)
        self.story.append("     --- quiescence: every report, the writer, passes a grace apart ---")
        while self.pending and not self.muted:
            c = self.pending[0]
            self.deliver(0, "ack" if now_ms() - c.t0 <= DELIVERY else "lost")
            self.check_promises()
        while self.finishable and not self.muted:
            self.cancel_finish(0)
        # Then time goes on past every heldUntil: unpaid holds expire, and what was left in
        # Redis (a paid order held as H, say) meets the reconciler's expiry. Only then must
        # Redis and PostgreSQL agree.
        # C too: a confirm answered 503 whose event was lost leaves C in Redis and RESERVED in
        # PostgreSQL, and the reconciler publishes the confirm once heldUntil and a grace have
        # passed (proto/redis-keys.md, "A confirm answered 503"): no promise is excused.
        later = [int(v.split(":")[2]) for v in self.redis_state()[1].values()
                 if v[-1] in HELD_OR_CONFIRMED]
        if later and max(later) + GRACE >= now_ms():
            self.settle(final=False)
            if self.muted:
                return
            self.story.append("     --- the clock moves past every heldUntil: holds expire ---")
            CLOCK.set(max(later) + GRACE + 50)
        if self.targeted and not self.muted:
            self.full_read_due()
        self.settle()

    def full_read_due(self):
        """Targeted examples, at quiescence: the periodic full read comes due. It counts real time
        (VOUCHER_RECONCILE_FULL_EVERY), which no step moves, so the daemon is started again: a new
        one reads every voucher in full on its first pass, as the periodic read would. Without it,
        what only a full read finds (a confirm answered 503 after Redis ran it: C in Redis and
        RESERVED in PostgreSQL, the counts agreeing) would wait past the example."""
        self.w.targeted_reads += self.targeted_reads()
        self.w.wave_slices_run += self.targeted_reads(SLICES_METRIC)
        if self.rc.poll() is None:
            self.rc.send_signal(signal.SIGKILL)
            self.rc.wait()
        LIVE.discard(self.rc)
        self.rc_logf.close()
        self.story.append("     --- the periodic full read comes due: the reconciler starts again ---")
        self.start_rc()
        self.rc_at = self.rc_script = None
        self.rc_wait()

    def settle(self, final=True):
        """The writer catches up and the reconciler runs passes a grace apart (two at least, six at
        most) until Redis and PostgreSQL agree; then they must."""
        for i in range(6):
            if self.muted:
                return
            self.refresh_log()
            self.writer_apply(len(self.log) + 1, True)
            if i >= 2 and not self.disagreement():
                break   # two passes, one of them a grace after the other, found nothing to do
            if i > 0:
                CLOCK.advance(GRACE + 50)
            self.rc_to("after-tail")
            self.check_promises()
        if self.muted or not final:
            return
        self.check_promises()
        bad = self.disagreement()
        if bad:
            self.fail("at quiescence: " + bad)

    def disagreement(self):
        rem, orders, users = self.redis_state()
        used, rows = self.pg_state()
        for o, held in self.acked.items():
            if self.oid(o) not in rows:
                return "o%d was answered 201 and has no row" % o
        if self.fence_known:
            run_id, fence = self.w.scripts.fence_check()
            if fence != run_id:
                return ("Redis not verified: the fence is %s, the run_id %s (a gateway with the"
                        " fence refuses every request)" % (fence or "missing", run_id))
        if self.camp:
            bad = self.campaign_disagreement(rem, orders, users, used)
            if bad:
                return bad
            rem, used = 0, 0   # a campaign has no counter: its codes were compared above
        if rem is None:
            return "Redis has no counter"
        if not self.camp and rem != self.total - used:
            return ("Redis offers %d, PostgreSQL %d (%s)" %
                    (rem, self.total - used,
                     "undersold" if rem < self.total - used else "oversold"))
        want = {"RESERVED": S.HELD, "CONFIRMED": S.CONFIRMED, "RELEASED": S.RELEASED}
        for oid in set(rows) | set(orders):
            s = orders.get(oid, "")[-1:] or None
            p = rows.get(oid)
            if not (want.get(p) == s or (p in (None, "RELEASED") and s is None)):
                return "%s: Redis %s, PostgreSQL %s" % (self.short(oid), s, p)
        count = collections.Counter(v.split(":")[0] for v in orders.values() if v[-1] in TAKEN)
        for c in set(count) | set(users):
            if int(users.get(c, 0)) != count.get(c, 0):
                return "customer %s: users says %s, orders hold %d" % (c, users.get(c), count[c])
        return None


# The rules of the state machine, by name (--rules, an aim's --rules).
RULE_NAMES = sorted(n for n, f in vars(Explorer).items()
                    if getattr(f, "hypothesis_stateful_rule", None) is not None)

# ---------------------------------------------------------------------------
# Running: the bounded mode, the long mode, the replays.

# A direct voucher's broken promise, by the first phrase of its message found (classify()).
DIRECT_CLASSES = [("OVERSOLD", "direct-oversell"), ("undersold", "direct-undersold"),
                  ("answered 201 and has no row", "direct-201-lost"),
                  ("answered 201, was released", "direct-201-released"),
                  ("paid order was released", "direct-paid-released"),
                  ("after its cancel was answered", "direct-answer-after-cancel"),
                  ("outbox:", "direct-outbox"), ("relay:", "direct-relay"),
                  ("writer", "direct-writer"), ("raised", "direct-error")]

# A campaign's broken promise, by the first phrase of its message found (classify()).
CAMPAIGN_CLASSES = [("a code used by two orders", "campaign-code-twice"),
                    ("beyond perCustomerLimit", "campaign-customer-limit"),
                    ("Redis offers a code", "campaign-offers-held-code"),
                    ("OVERSOLD", "campaign-oversell"),
                    ("refused events", "campaign-refused"),
                    ("paid order was released", "campaign-paid-released"),
                    ("was released by the reconciler", "campaign-201-released"),
                    ("after its cancel was answered", "campaign-answer-after-cancel"),
                    ("has no row", "campaign-201-no-row"),
                    ("Redis has no", "campaign-keys-not-rebuilt"),
                    ("which holds nothing", "campaign-taken-orphan"),
                    ("no pass releases it", "campaign-hold-stuck"),
                    ("counted too high", "campaign-users-high"),
                    ("users says", "campaign-users"),
                    ("at quiescence", "campaign-disagreement")]

RACES = {"race1": "restore wipes orders still in Redis, and oversells",
         "race2": "a confirmed order is released as expired",
         "race3": "a retry's 201 is followed by the reconciler releasing the hold",
         "race4": "a new hold under a reused orderId is released within the grace",
         "race5": "retake counts uses twice when only the orders hash is lost",
         "race6": "lowering the counter hits an A-B-A",
         "race7": "retake revives a cancelled order"}


def print_story(title, story):
    print("\n==== %s" % title)
    for line in story:
        print(line)
    sys.stdout.flush()


def save_replay(path, steps, error, note, cls=None, adapter=None, xfail=None):
    case = {"issue": note, "error": error, "class": cls, "grace_ms": GRACE,
            "delivery_ms": DELIVERY, "steps": steps}
    if adapter and adapter != "current":
        case["adapter"] = adapter
    if not FENCE["gateway"]:
        case["fence"] = False
    if SCAN["on"] and WORLD.scan_flags:
        case["scan"] = True
    if xfail:
        case["xfail"] = xfail
    with open(path, "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")


def replay_steps(steps):
    """Runs a sequence of steps without Hypothesis; returns (error or None, class, why, story)."""
    m = Explorer()
    err = cls = why = None
    try:
        for name, args in steps:
            if (name == "deliver" and not m.pending) or (name == "cancel_finish"
                                                         and not m.finishable):
                continue  # the call it reported on took another turn this time: nothing queued
            getattr(m, name)(**args)
            if name == "init_voucher":
                continue
            m.promises()
        m.teardown()
    except Violation as e:
        err, cls, why = str(e), e.cls, e.why
    finally:
        if m.ready:
            m.stop()
    return err, cls, why, m.story


# The gateway's and the faults' single actions a window sweep puts inside a reconciler's window,
# by name: each a function of the order (0..orders-1) giving the steps to run there.
SWEEP_ACTIONS = {
    "retry": lambda o: [["reserve_now", {"o": o, "ttl": "live", "outcome": "ack", "c": 0}]],
    "retry_lost": lambda o: [["reserve_now", {"o": o, "ttl": "live", "outcome": "lost", "c": 0}]],
    "reserve": lambda o: [["reserve", {"o": o, "ttl": "live", "c": 0}]],
    "confirm": lambda o: [["confirm_now", {"o": o, "outcome": "ack"}]],
    "confirm_503": lambda o: [["confirm_now", {"o": o, "outcome": "possibly"}]],
    "confirm_lost": lambda o: [["confirm_now", {"o": o, "outcome": "lost"}]],
    "cancel": lambda o: [["cancel_ok", {"o": o}]],
    "cancel_begin": lambda o: [["cancel", {"o": o}]],
    "deliver": lambda o: [["deliver", {"i": 0, "outcome": "ack"}]],
    # A queued event acknowledged (its 201) and then the clock past the grace, both inside the
    # window: a pass that waits between its reads and its repairs (a restore's delay).
    "deliver_wait": lambda o: [["deliver", {"i": 0, "outcome": "ack"}], ["wait_grace", {}]],
    "writer": lambda o: [["writer_apply", {"n": 4, "commit": True}]],
    "wait": lambda o: [["wait_grace", {}]],
    "lose_confirm": lambda o: [["lose_confirm", {"o": o}]],
    "rollback": lambda o: [["rollback", {"k": 1}]],
    "drift": lambda o: [["pg_drift", {}]],
    "lose_counter": lambda o: [["delete_key", {"key": "remaining"}]],   # a campaign's taken
    "lose_orders": lambda o: [["delete_key", {"key": "orders"}]],
    "lose_users": lambda o: [["delete_key", {"key": "users"}]],
    # A voucher's orders, users and amounts lost together, the counter kept: only the counter
    # against its limit key less the outside key tells the loss (orders_lost.lua).
    "lose_orders_all": lambda o: [["delete_key", {"key": k}] for k in ("orders", "users",
                                                                         "amounts")],
    "thaw": lambda o: [["thaw_leader", {}]],
    "link_down": lambda o: [["link_down", {}]],
    "failover": lambda o: [["failover", {}]],
    "link_up": lambda o: [["link_up", {}]],
}


def sweep_hops(base, passes):
    """Replays base, then steps the reconciler one pause point at a time through the pass it
    stands in and the passes - 1 after it: the points it stood at (index 0: where base left it),
    with the script at each-repair. Returns
    (hops, error or None, class, story); the base with nothing put in must keep every promise."""
    m = Explorer()
    hops = []
    err = cls = None
    try:
        for name, args in base:
            if (name == "deliver" and not m.pending) or (name == "cancel_finish"
                                                         and not m.finishable):
                continue
            getattr(m, name)(**args)
            if name != "init_voucher":
                m.promises()
        crossed = 0
        while crossed < passes:
            hops.append((SHORT[m.rc_at], m.rc_script))
            m.rc_to("next")
            m.promises()
            crossed += m.rc_at == "reconciler-after-tail"
        m.teardown()
    except Violation as e:
        err, cls = str(e), e.cls
    finally:
        if m.ready:
            m.stop()
    return hops, err, cls, m.story


def sweep(path, windows, actions, passes, after=()):
    """A window sweep (an aim's --sweep): from the base saved at path (a sequence that leaves a
    repair to do), for every pause point the reconciler reaches in the next passes that windows
    names, and every action there on every order, replays base + the hops to that point + the
    action, then (with after: the rest of that pass, its repairs done, and the actions after on
    the same order, a client's next request: what a repair's harm shows in) quiescence. Yields
    (label, error or None, class, why, story) for each, the base alone first. Deterministic:
    replays run on the explorer's clock."""
    case = json.load(open(path))
    base = case["steps"]
    n_orders = base[0][1].get("orders", 1)
    was, scan = FENCE["gateway"], SCAN["on"]
    FENCE["gateway"] = was and case.get("fence", True)
    SCAN["on"] = case.get("scan", True)
    try:
        hops, err, cls, story = sweep_hops(base, passes)
        yield "the base alone (%d hops)" % len(hops), err, cls, None, story
        if err:
            return
        for i, (point, script) in enumerate(hops):
            if point not in windows:
                continue
            for act in actions:
                for o in range(n_orders):
                    steps = base + [["rc_to", {"point": "next"}]] * i + SWEEP_ACTIONS[act](o)
                    if after:
                        steps = steps + [["rc_to", {"point": "after-tail"}]] + [
                            st_ for a in after for st_ in SWEEP_ACTIONS[a](o)]
                    err, cls, why, story = replay_steps(steps)
                    yield ("hop %d (%s%s), %s o%d" % (i, point, " before " + script if script else
                                                      "", act, o), err, cls, why, story)
                    if err:
                        return
    finally:
        FENCE["gateway"], SCAN["on"] = was, scan


def replay(path):
    """Runs a saved sequence step by step; returns (error or None, class, why, story). A case
    with "fence": false runs with the gateway's fence off (as --no-fence)."""
    case = json.load(open(path))
    was, scan = FENCE["gateway"], SCAN["on"]
    FENCE["gateway"] = was and case.get("fence", True)
    SCAN["on"] = case.get("scan", False)
    try:
        return replay_steps(case["steps"])
    finally:
        FENCE["gateway"], SCAN["on"] = was, scan


def shrink(steps, cls, minutes):
    """Delta debugging on the step list, by replays: drops runs of steps (8, 4, 2, then 1 long)
    while the sequence still breaks a promise of the same class; then tries each rc_to on a
    nearer point and each argument on a smaller value. Ends after `minutes` at the latest
    (it keeps the shortest sequence found so far). Hypothesis's own shrinker is not used in
    the long mode: its 5-minute limit was reached on every find, and it may slip to another
    bug; this one keeps the class, and replays are deterministic on the explorer's clock."""
    deadline = time.time() + minutes * 60
    best = list(steps)
    tries = 0

    def still(cand):
        nonlocal tries
        tries += 1
        err, c, _, _ = replay_steps(cand)
        return err is not None and c == cls

    changed = True
    while changed and time.time() < deadline:
        changed = False
        for size in (8, 4, 2, 1):
            i = 1
            while i < len(best) and time.time() < deadline:
                cand = best[:i] + best[i + size:]
                if len(cand) < len(best) and still(cand):
                    best, changed = cand, True
                else:
                    i += 1
    # Simpler arguments: a nearer reconciler point, a smaller total.
    simpler = {"rc_to": [{"point": "next"}]}
    for i in range(len(best)):
        if time.time() >= deadline:
            break
        name, args = best[i]
        for alt in simpler.get(name, []):
            if alt != args:
                cand = best[:i] + [[name, alt]] + best[i + 1:]
                if still(cand):
                    best = cand
                    break
    return best, tries


def run_replays(folder, adapter, first=(), stop=False):
    """Replays every case saved for this adapter, the ones named in first first. A case marked
    xfail (a known bug, with its issue) must still fail; any other case must pass. stop: return
    at the first that does not."""
    bad = 0
    names = sorted(os.listdir(folder))
    for f in [x for x in first if x in names] + [x for x in names if x not in first]:
        if bad and stop:
            break
        if not f.endswith(".json"):
            continue
        case = json.load(open(os.path.join(folder, f)))
        if case.get("adapter", "current") != adapter:
            continue
        err, cls, why, story = replay(os.path.join(folder, f))
        xfail = case.get("xfail")
        if err and xfail:
            print("replay %s: xfail (%s): %s [%s]" % (f, xfail, err, cls))
        elif err:
            bad += 1
            print("replay %s: FAILED [%s: %s]: %s" % (f, cls, why, err))
            print_story(f, story)
        elif xfail:
            bad += 1
            print("replay %s: XPASS: the known failure (%s) no longer shows: update the case" %
                  (f, xfail))
        else:
            print("replay %s: ok" % f)
        sys.stdout.flush()
    return bad


def main():
    global WORLD, GRACE, DELIVERY
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("VOUCHER_BUILD_DIR", "build"))
    ap.add_argument("--shim", default=os.path.join(HERE, "..", "..", "build", "tests", "model",
                                                   "libexplorer_clock.so"),
                    help="the explorer's clock, preloaded into the reconciler (clock_shim.c)")
    ap.add_argument("--lua", default=None,
                    help="the Redis scripts: BUILD/common/lua by default (as the daemons send "
                         "them), or another version's common/lua")
    ap.add_argument("--adapter", choices=sorted(ADAPTERS), default="current")
    ap.add_argument("--campaign", choices=sorted(CAMPAIGN_DRAW), default="mix",
                    help="which examples are of a one-time code campaign: drawn per example"
                         " (mix), all (only) or none (never)")
    ap.add_argument("--examples", type=int, default=12)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--seeds", default="1,2,3", help="fixed seeds, comma-separated")
    ap.add_argument("--long", action="store_true", help="random seeds until --minutes pass")
    ap.add_argument("--seed", type=int, default=None,
                    help="long mode: the first seed (the rest follow from it); printed")
    ap.add_argument("--minutes", type=float, default=180)
    ap.add_argument("--replays", default=os.path.join(HERE, "regressions"))
    ap.add_argument("--save", default=None, help="folder for new failing cases")
    ap.add_argument("--no-replays", action="store_true")
    ap.add_argument("--fault-keys", default=",".join(FAULT_KEYS),
                    help="the keys delete_key may lose (leave one out to look past a bug found)")
    ap.add_argument("--shrink", action="store_true",
                    help="shrink a failure to a minimal sequence (always in --long)")
    ap.add_argument("--shrink-minutes", type=float, default=4,
                    help="the time one failure's shrinking may take")
    ap.add_argument("--no-mute", action="store_true",
                    help="long mode: stop at every failure, also of a kind found already")
    ap.add_argument("--mute-known", action="store_true",
                    help="long mode: the known failures (KNOWN) end their examples quietly from"
                         " the start, so that the run looks for others")
    ap.add_argument("--no-target", action="store_true", help="no Hypothesis target() phase")
    ap.add_argument("--no-fence", action="store_true",
                    help="the gateway steps ignore the restart fence (the reconciler still sets"
                         " it): what a rollback does without it")
    ap.add_argument("--no-seeds", action="store_true", help="only the replays")
    ap.add_argument("--replay-one", default=None, help="one saved case, told as a story")
    ap.add_argument("--keep-going", action="store_true",
                    help="after a failure go on with the next seed (long mode)")
    ap.add_argument("--rules", default=None,
                    help="only these rules, comma-separated (default: all): %s" %
                         ", ".join(RULE_NAMES))
    ap.add_argument("--total", default=None, help="the totals an example draws from (1,2,3)")
    ap.add_argument("--orders", default=None,
                    help="how many orders an example uses, drawn from (1,1,2,3)")
    ap.add_argument("--mutants-dir", default=os.path.join(HERE, "mutants"),
                    help="the mutants, whose Aim: lines are the bounded run's aimed searches")
    ap.add_argument("--no-aims", action="store_true",
                    help="the bounded run without its aimed searches (the fixed seeds only)")
    ap.add_argument("--mutant", default=None,
                    help="(tests/model/run --mutants) this mutant's saved cases and aims first")
    ap.add_argument("--replica", choices=sorted(REPLICA_DRAW), default="never",
                    help="which voucher examples run with a replica of the stack's Redis and"
                         " WAIT instead of the fence, as on a Redis Cluster: never, mix, only")
    ap.add_argument("--targeted", choices=sorted(TARGETED_DRAW), default="mix",
                    help="which voucher examples run the reconciler with its periodic full read"
                         " (1 h), so that it judges a voucher busy only with events in flight by a"
                         " targeted read: never, mix, only")
    ap.add_argument("--forget-not-persisted", action="store_true",
                    help="the gateway steps forget a hold whose event Kafka reported not persisted,"
                         " as the gateway did before f8f39b0 (a mutant's adapter)")
    ap.add_argument("--mode", choices=sorted(DIRECT_DRAW), default="mix",
                    help="direct: only direct vouchers' examples; flash: none of them (vouchers and"
                         " campaigns decided in Redis); mix: drawn per example (README, \"A direct"
                         " voucher's example\")")
    ap.add_argument("--relay-mark-early", action="store_true",
                    help="the model's outbox relay marks its rows sent before Kafka's delivery"
                         " report (the mutant relay-marks-before-report)")
    ap.add_argument("--twin", choices=sorted(TWIN_DRAW), default="mix",
                    help="a flash voucher's example with a direct twin sharing its orderIds:"
                         " only, never, or drawn per example (README, \"A direct twin\")")
    ap.add_argument("--twin-claim-ignored", action="store_true",
                    help="the twin's reservation calls dr_reserve under another code's claim (the"
                         " mutant direct-claim-ignored)")
    ap.add_argument("--first-failure", action="store_true",
                    help="stop at the first broken promise, in the replays as in the search")
    a = ap.parse_args()
    if a.rules:
        unknown = set(a.rules.split(",")) - set(RULE_NAMES)
        if unknown:
            ap.error("no such rule: %s" % ", ".join(sorted(unknown)))
        RULES["on"] = set(a.rules.split(","))
        # Rules of one kind only: only that kind's examples can run them.
        if not RULES["on"] & DIRECT_RULES:
            a.mode = "flash"
        elif RULES["on"] <= DIRECT_RULES | SHARED_RULES:
            a.mode = "direct"
    if a.total:
        SHAPE["total"] = [int(x) for x in a.total.split(",")]
    if a.orders:
        SHAPE["orders"] = [int(x) for x in a.orders.split(",")]
    FAULT_KEYS[:] = [k for k in a.fault_keys.split(",") if k]
    CAMPAIGN["mode"] = a.campaign
    DIRECT["mode"] = a.mode
    RELAY["mark_early"] = a.relay_mark_early
    TWIN["mode"] = a.twin
    TWIN["claim_ignored"] = a.twin_claim_ignored
    FENCE["gateway"] = not a.no_fence
    WORLD = World(a.build, a.lua or os.path.join(a.build, "common", "lua"), a.adapter,
                  os.path.abspath(a.shim))
    if a.forget_not_persisted:
        WORLD.scripts.forget_not_persisted = True
    REPLICA["mode"] = a.replica
    TARGETED["mode"] = a.targeted
    if a.replica != "never":
        WORLD.start_replica()
    started = time.time()
    failures = 0
    if a.replay_one:
        err, cls, why, story = replay(a.replay_one)
        print_story("%s: %s" % (a.replay_one, ("[%s: %s] %s" % (cls, why, err)) if err
                                else "every promise held"), story)
        return 1 if err else 0
    if not a.no_replays and os.path.isdir(a.replays):
        first = mutants.cases(a.mutants_dir, a.mutant) if a.mutant else []
        failures += run_replays(a.replays, a.adapter, first, a.first_failure)
        if failures and a.first_failure:
            print("\n== stopped at the first failure (--first-failure)")
            return 1
    if not a.long and a.adapter == "current":
        # The bounded run: an example that breaks a known failure's promise ends quietly.
        WORLD.mute_found = True
        WORLD.found_classes.update({c: None for c in KNOWN})
    base = settings_of(a)
    if a.no_seeds:
        jobs = iter([])
    elif a.long:
        first = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
        print("== long run: random seed %d (--seed %d repeats this run's seeds)" % (first, first))
        rng = random.Random(first)
        jobs = (("seed %d" % sd, sd, base) for sd in iter(lambda: rng.randrange(1 << 32), None))
        WORLD.mute_found = not a.no_mute
        if a.mute_known:
            WORLD.found_classes.update({c: None for c in KNOWN})
    else:
        jobs = bounded_jobs(a, base)
    found = []
    for label, seed, job in jobs:
        if a.long and time.time() - started > a.minutes * 60:
            break
        apply_settings(job)
        if job.get("sweep"):
            print("== %s (%s) at %.0f s" % (label, job["text"], time.time() - started))
            sys.stdout.flush()
            bad = run_sweep(label, job, found, time.time() - started)
            failures += bad
            if bad and (not a.keep_going or a.first_failure):
                break
            continue
        print("== %s (adapter %s, %d examples of at most %d steps%s) at %.0f s" %
              (label, a.adapter, job["examples"], job["steps"],
               "" if job is base else "; " + job["text"], time.time() - started))
        sys.stdout.flush()
        WORLD.first_violation = None
        try:
            try:
                run_with_seed(seed, job, a.no_target)
            except Exception as raised:
                v = violation_in(raised)
                if v is None and isinstance(raised, HYPOTHESIS_FLAKY):
                    if WORLD.first_violation is None:
                        # No promise broke: a step's outcome followed real time, so Hypothesis
                        # could not run an example the same way twice; the seed ends here.
                        WORLD.flaky_seeds.append(label)
                        print("   %s ended: Hypothesis ran an example differently the second"
                              " time (%s); no promise broke" % (label, type(raised).__name__))
                        continue
                    v = WORLD.first_violation[0]
                    WORLD.last_steps, WORLD.last_story = WORLD.first_violation[1:]
                if v is None:
                    raise
                raise v
        except Violation as e:
            at = time.time() - started
            steps = list(WORLD.last_steps)
            why = known(str(e), e.cls) if a.adapter == "current" and not a.long else None
            if why:
                print_story("%s: KNOWN FAILURE (xfail, %s) [%s]: %s" % (label, why, e.cls, e),
                            WORLD.last_story)
                continue
            failures += 1
            print("\n== %s found [%s: %s] at %.0f s, after %d examples: %s" %
                  (label, e.cls, e.why, at, WORLD.examples, e))
            print_story("%s: the sequence as generated (%d steps)" % (label, len(steps)),
                        WORLD.last_story)
            if a.long or a.shrink:
                t0 = time.time()
                WORLD.mute_found = False
                steps, tries = shrink(steps, e.cls, a.shrink_minutes)
                err, cls, why2, story = replay_steps(steps)
                WORLD.mute_found = (a.long and not a.no_mute) or (not a.long and
                                                                   a.adapter == "current")
                print_story("%s: the minimal sequence (%d steps, %d replays, %.0f s): "
                            "[%s] %s" % (label, len(steps), tries, time.time() - t0, cls, err),
                            story)
            WORLD.found_classes.setdefault(e.cls, (seed, at))
            found.append((label, e.cls, str(e), at, len(steps)))
            if a.save:
                os.makedirs(a.save, exist_ok=True)
                path = os.path.join(a.save, "seed-%d-%s.json" % (seed, e.cls))
                save_replay(path, steps, str(e), "found by %s (%s)" % (label, e.why),
                            e.cls, a.adapter)
                print("saved %s" % path)
            if not a.keep_going or a.first_failure:
                break
    apply_settings(base)
    print("\n== coverage: %d examples (%d of a campaign, %d of a direct voucher), %d steps, %d"
          " distinct step pairs, %d distinct step triples, %d distinct (step, reconciler phase)"
          " pairs; %.0f s" % (
              WORLD.examples, WORLD.campaign_examples, WORLD.direct_examples, WORLD.steps,
              len(WORLD.pairs), len(WORLD.triples), len(WORLD.phases), time.time() - started))
    print("   steps by rule: " + ", ".join("%s %d" % kv for kv in WORLD.rules.most_common()))
    print("   reconciler effects: " + ", ".join("%s %d" % kv for kv in WORLD.repairs.most_common()))
    print("   " + scripts_line())
    print("   confirms and cancels answered -7 (keys lost) %d, -8 (counter and order lost) %d" % (
        WORLD.lost_answers[A.lookup.KEYS_LOST], WORLD.lost_answers[A.lookup.COUNTER_LOST]))
    if WORLD.replica is not None:
        print("   under WAIT: gateway WAITs met %d, short %d; failovers %d" % (
            WORLD.waits["met"], WORLD.waits["short"], WORLD.failovers))
    print("   targeted reads (a voucher busy only with events in flight, not read in full): %d in"
          " %d passes of %d examples with the periodic full read" % (
              WORLD.targeted_reads, WORLD.targeted_passes, WORLD.targeted_examples))
    print("   slices of due holds released from a targeted read (a wave, rc_wave.c): %d"
          % WORLD.wave_slices_run)
    print("   direct twins: %d examples; their reservations by claim and answer: %s" % (
        WORLD.twin_examples, ", ".join("%s %d" % kv for kv in sorted(WORLD.twin_calls.items()))
        or "none"))
    if WORLD.direct_examples:
        print("   direct vouchers: " + ", ".join("%s %d" % kv for kv in sorted(
            WORLD.direct.items())))
    print("   frozen leaders woken: %d, their script refused %d, ran %d" % (
        sum(WORLD.thawed.values()), WORLD.thawed["refused"], WORLD.thawed["ran"]))
    # Which steps ran while the reconciler stood at each pause: a point no gateway step
    # reached is a window the run did not explore.
    at = collections.defaultdict(set)
    for name, phase in WORLD.phases:
        if name not in ("rc_step", "rc_to", "rc_pass"):
            at[phase].add(name)
    print("   steps run at each reconciler pause: " + "; ".join(
        "%s: %d (%s)" % (phase, len(at[phase]), ", ".join(sorted(at[phase])))
        for phase in sorted(at)))
    print("   gateway steps refused by the fence (503): %d%s" % (
        WORLD.fenced, "" if FENCE["gateway"] else " (the fence is off: --no-fence)"))
    if WORLD.muted_examples:
        print("   examples ended quietly on a kind found already or known: " +
              ", ".join("%s %d" % kv for kv in WORLD.muted_examples.most_common()))
        for c in WORLD.muted_examples:
            if c in KNOWN and not a.long and a.adapter == "current":
                print("   KNOWN FAILURE (xfail) %s: %s" % (c, KNOWN[c]))
    if WORLD.flaky_seeds:
        print("   seeds ended early on an example Hypothesis ran differently twice (no promise"
              " broke): %s" % ", ".join(WORLD.flaky_seeds))
    for label, cls, err, at, n in found:
        print("found (%s, %.0f s, %d steps) [%s]: %s" % (label, at, n, cls, err))
    races = sorted(c for c in WORLD.found_classes if c in RACES)
    if a.long:
        print("== issue 22's races found on their own: %d of 7: %s" % (
            len(races), ", ".join("%s (seed %d, %.0f s)" % (c, *WORLD.found_classes[c])
                                  for c in races) or "none"))
    return 1 if failures else 0


# Every script the reconciler may send in a pass's repairs (rc_pass.c, rc_campaign.c), so that the
# coverage line names the ones the run never reached (0) as well as the others.
REPAIR_SCRIPTS = ["restore", "restore_stage", "restore_swap", "restore_slice", "restore_finish",
                  "retake", "retake_slice", "retake_finish", "lower", "lower_slice",
                  "lower_finish", "rebuild",
                  "rebuild_swap", "release_begin", "release_finish", "repair_confirmed",
                  "limit_sync", "campaign_rebuild", "campaign_rebuild_slice",
                  "campaign_rebuild_finish", "campaign_release_begin",
                  "campaign_release_finish"]


def scripts_line():
    """The coverage line of the repair scripts the reconciler sent, each by name, 0 included."""
    run = WORLD.scripts_run
    names = [n for n in REPAIR_SCRIPTS if n in WORLD.scripts.src] + sorted(
        n for n in run if n not in REPAIR_SCRIPTS and n not in ("campaign-read", "confirm-read"))
    # publish-confirm writes nothing in Redis: its pause stands before its read of the order
    # (rc_repair_publish_confirm(), "confirm-read"), then it publishes the lost VoucherConfirmed.
    return "repair scripts the reconciler sent: " + ", ".join(
        "%s %d" % (n, run.get(n, 0)) for n in names) + \
        "; publish-confirm %d" % run.get("confirm-read", 0) + (
        "; campaign full reads %d" % run["campaign-read"] if run.get("campaign-read") else "")


def violation_in(e):
    """The Violation inside e (itself, or inside an exception group), or None."""
    if isinstance(e, Violation):
        return e
    for sub in getattr(e, "exceptions", ()) or ():
        v = violation_in(sub)
        if v is not None:
            return v
    return None


def settings_of(a):
    """The search settings of the command line (an aimed search overrides some: aim_settings())."""
    return {"rules": RULES["on"], "campaign": a.campaign, "targeted": a.targeted, "mode": a.mode,
            "twin": a.twin,
            "fault_keys": list(FAULT_KEYS),
            "total": list(SHAPE["total"]), "orders": list(SHAPE["orders"]),
            "fence": not a.no_fence, "examples": a.examples, "steps": a.steps, "text": ""}


def aim_settings(base, spec):
    """An aimed search (a mutant file's Aim: line, tests/model/mutants/README.md): the search
    settings base with spec's options instead, and the seeds it runs."""
    p = argparse.ArgumentParser(prog="Aim:", add_help=False)
    p.add_argument("--rules")
    p.add_argument("--campaign", choices=sorted(CAMPAIGN_DRAW))
    p.add_argument("--targeted", choices=sorted(TARGETED_DRAW))
    p.add_argument("--mode", choices=sorted(DIRECT_DRAW))
    p.add_argument("--twin", choices=sorted(TWIN_DRAW))
    p.add_argument("--fault-keys")
    p.add_argument("--total")
    p.add_argument("--orders")
    p.add_argument("--no-fence", action="store_true")
    p.add_argument("--seeds", default="1")
    p.add_argument("--examples", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--sweep", default=None)
    p.add_argument("--window", default="after-remaining,before-repair,orders-scanned,each-repair")
    p.add_argument("--actions", default=",".join(SWEEP_ACTIONS))
    p.add_argument("--passes", type=int, default=1)
    p.add_argument("--after", default="")
    o = p.parse_args(spec.split())
    # An aim that names no mode searches the flash examples it was written for (a direct
    # voucher's example runs none of their rules), unless its rules are a direct voucher's.
    rules = set(o.rules.split(",")) if o.rules else None
    job = dict(base, text=spec, mode=o.mode or (
        "direct" if rules and rules <= DIRECT_RULES | SHARED_RULES else "flash"))
    if o.sweep:
        unknown = set(o.actions.split(",") + [x for x in o.after.split(",") if x]) - \
            set(SWEEP_ACTIONS)
        if unknown:
            raise SystemExit("aim %r: no such action %s (actions: %s)" % (
                spec, ", ".join(sorted(unknown)), ", ".join(SWEEP_ACTIONS)))
        job["sweep"] = os.path.join(BASES, o.sweep)
        if not os.path.isfile(job["sweep"]):
            raise SystemExit("aim %r: no base %s" % (spec, job["sweep"]))
        job["windows"] = set(o.window.split(","))
        job["actions"] = o.actions.split(",")
        job["passes"] = o.passes
        job["after"] = [x for x in o.after.split(",") if x]
        return job, [None]
    if o.rules:
        unknown = set(o.rules.split(",")) - set(RULE_NAMES)
        if unknown:
            raise SystemExit("aim %r: no such rule %s (rules: %s)" % (
                spec, ", ".join(sorted(unknown)), ", ".join(RULE_NAMES)))
        job["rules"] = set(o.rules.split(","))
    for key, val in (("campaign", o.campaign), ("targeted", o.targeted), ("examples", o.examples),
                     ("steps", o.steps), ("twin", o.twin)):
        if val is not None:
            job[key] = val
    if o.fault_keys:
        job["fault_keys"] = o.fault_keys.split(",")
    if o.total:
        job["total"] = [int(x) for x in o.total.split(",")]
    if o.orders:
        job["orders"] = [int(x) for x in o.orders.split(",")]
    if o.no_fence:
        job["fence"] = False
    return job, [int(x) for x in o.seeds.split(",")]


def apply_settings(job):
    RULES["on"] = job["rules"]
    CAMPAIGN["mode"] = job["campaign"]
    TARGETED["mode"] = job["targeted"]
    DIRECT["mode"] = job["mode"]
    TWIN["mode"] = job["twin"]
    FAULT_KEYS[:] = job["fault_keys"]
    SHAPE["total"], SHAPE["orders"] = job["total"], job["orders"]
    FENCE["gateway"] = job["fence"]


def bounded_jobs(a, base):
    """The bounded run's searches, in order: the fixed seeds with the command line's settings, then
    every aimed search (the Aim: lines of tests/model/mutants/*.mutant, each once). With --mutant
    NAME (tests/model/run --mutants), that mutant's aims come first."""
    aims = [] if a.no_aims else mutants.aims(a.mutants_dir)
    if a.mutant:
        mine = [x for x in aims if a.mutant in x[0]]
        aims = mine + [x for x in aims if a.mutant not in x[0]]
        for names, spec in mine:
            job, seeds = aim_settings(base, spec)
            for sd in seeds:
                yield aim_label(names, sd), sd, job
        aims = aims[len(mine):]
    for sd in [int(x) for x in a.seeds.split(",") if x]:
        yield "seed %d" % sd, sd, base
    for names, spec in aims:
        job, seeds = aim_settings(base, spec)
        for sd in seeds:
            yield aim_label(names, sd), sd, job


def aim_label(names, seed):
    return "aim of %s%s" % (", ".join(names), "" if seed is None else ", seed %d" % seed)


def run_sweep(label, job, found, at):
    """Runs one window sweep (sweep()); prints each failure's story. Returns 1 on a failure."""
    n = 0
    for what, err, cls, why, story in sweep(job["sweep"], job["windows"], job["actions"],
                                            job["passes"], job["after"]):
        n += 1
        WORLD.last_story = story
        if err:
            print("\n== %s found [%s: %s] at %s, after %d replays: %s" % (
                label, cls, why, what, n, err))
            print_story("%s: %s" % (label, what), story)
            found.append(("%s, %s" % (label, what), cls, err, at, len(story)))
            return 1
    print("   %d replays, every promise held" % n)
    return 0


def run_with_seed(seed, job, no_target=False):
    """One run of the state machine with a fixed seed: job's examples (no shrinking by
    Hypothesis: shrink() does it, by replays)."""
    Explorer._hypothesis_internal_use_seed = seed
    phases = [Phase.generate] + ([] if no_target else [Phase.target])
    WORLD.targeting = not no_target
    try:
        run_state_machine_as_test(Explorer, settings=settings(
            max_examples=job["examples"], stateful_step_count=job["steps"], deadline=None,
            database=None,
            report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
            print_blob=False, phases=phases))
    finally:
        WORLD.targeting = False


if __name__ == "__main__":
    sys.exit(main())
