"""A test agent: reports its stdin, argv, DROVER_* environment and the drover on PATH, then exits.

Options: --exit N (exit status), --wait-for PATH (print "first", wait for PATH to exist,
then go on), --file PATH (print that file's text).
"""
import argparse
import os
import shutil
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--wait-for")
parser.add_argument("--file")
parser.add_argument("words", nargs="*")
args = parser.parse_args()

if args.wait_for:
    print("first", flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(args.wait_for) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("second", flush=True)
if not sys.stdin.isatty():
    text = sys.stdin.read()
    print(f"stdin: {text}" if text else "stdin: (empty)")
if args.file:
    with open(args.file, encoding="utf-8") as handle:
        print(f"file: {handle.read()}")
for word in args.words:
    print(f"word: {word}")
for key in sorted(os.environ):
    if key.startswith("DROVER_"):
        print(f"env: {key}={os.environ[key]}")
print(f"which drover: {shutil.which('drover')}")
print("to stderr", file=sys.stderr)
sys.exit(args.exit)
