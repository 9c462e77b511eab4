#!/usr/bin/env python
"""A 5xx fuzz of every URL (issue 29): each route with real ids and each admin page, asked plainly and in the
hostile ways that once ended in a server error (tests/hostile_requests.py: a form in latin-1 / utf-16 / ascii /
UTF8 / no codec, a NUL in the path, the query or the sessionid cookie, Content-Length: abc, a form not UTF-8, odd
query text), as an admin (with an API token under /api/) and anonymously, on SQLite and on PostgreSQL. Prints the
requests made and the count of 5xx answers per database; exits 1 if any.

Usage: .venv/bin/python bench/fuzz_5xx.py [--requests 5000] [--seed 29] [--pg postgres://postgres@127.0.0.1:5432]
PostgreSQL: a database <BENCH_DB_PREFIX>_fuzz (default cudaweb_i29_fuzz), created and dropped here. Requests are
served in-process by Django's test client (no network); the Redis URL names a port nothing listens on, so pages
that queue work answer as they do with Redis down."""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = os.environ.get("BENCH_DB_PREFIX", "cudaweb_i29")

CHILD = r'''
import collections, random, sys, time
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test import Client
from cudaweb.api.services import token_issue
from tests import hostile_requests
requests, seed = int(sys.argv[1]), int(sys.argv[2])
values = hostile_requests.seed()
token = token_issue(user=values["user"], name="fuzz")[1]
admin = Client(raise_request_exception=False)
admin.force_login(values["user"])
anonymous = Client(raise_request_exception=False)
urls = hostile_requests.every_url(values)
texts = ["\u00e9", "\x00", "<b>", "%00", "'\"", "x" * 5000, "\u202e", "-A1-A2", "999.1.1.1", "../../etc", ""]
rng = random.Random(seed)
plan = [(url, kind) for url in urls for kind in hostile_requests.KINDS]  # each URL in each way once, then at random
while len(plan) < requests:
    plan.append((rng.choice(urls), rng.choice(hostile_requests.KINDS)))
statuses, plain, failures, healthz_down = collections.Counter(), collections.Counter(), [], 0
SAFE_KINDS = ("plain", "text_query", "nul_evidence")  # GETs that reach /healthz itself (no NUL, no body)
started = time.monotonic()
for number, (url, kind) in enumerate(plan):
    client = anonymous if number % 5 == 4 else admin
    text = rng.choice(texts + ["".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(1, 12)))])
    answer = hostile_requests.ask(client, kind, url, text, token if client is admin else None)
    statuses[answer.status_code // 100] += 1
    if kind == "plain":
        plain[answer.status_code // 100] += 1
    if answer.status_code == 503 and url == "/healthz" and kind in SAFE_KINDS:
        healthz_down += 1  # its documented answer while Redis and the worker are away (they are, here)
    elif answer.status_code >= 500:
        failures.append((answer.status_code, kind, url, repr(text)[:40]))
print("urls %d, requests %d in %.0f s, by class %s (the plain ones: %s)" % (
      len(urls), len(plan), time.monotonic() - started, dict(sorted(("%dxx" % k, v) for k, v in statuses.items())),
      dict(sorted(("%dxx" % k, v) for k, v in plain.items()))))
for failure in failures[:20]:
    print("  5xx:", failure)
print("  /healthz answered its documented 503 (Redis and worker away) %d times, not counted" % healthz_down)
print("5xx %d" % len(failures))
'''


def run(database_url, requests, seed):
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=database_url,
               REDIS_URL="redis://127.0.0.1:1/0", PYTHONPATH=str(ROOT), CUDAWEB_ALLOWED_HOSTS="testserver")
    done = subprocess.run([sys.executable, "-c", CHILD, str(requests), str(seed)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("urls", "  ", "5xx"))]
    if done.returncode != 0:
        print(done.stderr[-3000:])
        return None, lines
    return int(lines[-1].split()[1]), lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--pg", default=os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432"))
    args = parser.parse_args()
    total = 0
    with tempfile.TemporaryDirectory(prefix="cudaweb-fuzz-") as folder:
        databases = [("SQLite", "sqlite:///%s/fuzz.sqlite3" % folder)]
        name = "%s_fuzz" % PREFIX
        subprocess.run(["psql", "%s/postgres" % args.pg, "-qc", "DROP DATABASE IF EXISTS %s" % name], check=True,
                       capture_output=True)
        subprocess.run(["psql", "%s/postgres" % args.pg, "-qc", "CREATE DATABASE %s" % name], check=True,
                       capture_output=True)
        databases.append(("PostgreSQL", "%s/%s" % (args.pg, name)))
        try:
            for label, url in databases:
                count, lines = run(url, args.requests, args.seed)
                print("%s: %s" % (label, "; ".join(line.strip() for line in lines)), flush=True)
                total += 1 if count is None else count
        finally:
            subprocess.run(["psql", "%s/postgres" % args.pg, "-qc", "DROP DATABASE IF EXISTS %s" % name],
                           capture_output=True)
    print("5xx in all: %d" % total)
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
