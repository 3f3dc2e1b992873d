#!/usr/bin/env python3
"""errors.py - the check of docs/errors.md in `tests/run lint`: fails on what the error policy forbids.

    sqlite-step       sqlite3_step( outside server/db.c (every statement runs through db_step, which logs
                      a failure with its SQL)
    discarded-reply   a blocking Redis reply thrown away unread: freeReplyObject(rs_command(...)) or
                      freeReplyObject(redisCommand(...)), or rs_command / rs_command_argv / rs_get_reply /
                      redisCommand / redisCommandArgv called as a statement of its own (use rs_do, which
                      checks and frees it)
    raw-async         redisAsyncCommand / redisvAsyncCommand / redisAsyncCommandArgv outside wire/ (an async
                      command goes through a wire/redis_link.h link, whose one check, redis_uv_ok, every
                      reply passes before its callback runs)
    async-callback    a callback given to redis_link_cmd* that checks the reply again (REDIS_REPLY_ERROR or
                      redis_uv_ok in its body: an error reply never reaches it, the link logged it and
                      handed over its text as err), or that is not a function of the file

Scope: the C sources of common/, spec/, wire/, server/, scheduler/, workers/ and cli/ (tests may do
anything).  Comments and string literals are ignored.  Prints "path:line: [rule] message" per finding and
"errors: N findings"; exit status 1 when there is any.

    tests/lint/errors.py            the tree
    tests/lint/errors.py FILE...    only these files (paths from the repository root)
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHECKED = ("common", "spec", "wire", "server", "scheduler", "workers", "cli")
ASYNC_OK = {"wire/redis_link.c", "wire/redis_uv.c"}  # the link itself, and the adapter's AUTH


def strip(src):
    """the source with comments and the insides of string and character literals blanked (newlines kept)"""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + "".join(ch if ch == "\n" else " " for ch in src[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def function_body(text, name):
    """the body of the function `name` defined in text, or None"""
    m = re.search(r"\b" + re.escape(name) + r"\s*\([^;{]*\)\s*\{", text)
    if not m:
        return None
    depth, i = 0, m.end() - 1
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[m.end():i]
        i += 1
    return None


def check(path, text):
    findings = []

    def add(pos, rule, msg):
        findings.append(f"{path}:{line_of(text, pos)}: [{rule}] {msg}")

    if path != "server/db.c":
        for m in re.finditer(r"\bsqlite3_step\s*\(", text):
            add(m.start(), "sqlite-step", "sqlite3_step outside server/db.c: use db_step (docs/errors.md)")
    for m in re.finditer(r"\bfreeReplyObject\s*\(\s*(rs_command|rs_command_argv|redisCommand|redisCommandArgv)\s*\(", text):
        add(m.start(), "discarded-reply", f"freeReplyObject({m.group(1)}(...)): the reply is never checked; use rs_do")
    for m in re.finditer(r"\b(rs_command|rs_command_argv|rs_get_reply|redisCommand|redisCommandArgv)\s*\(", text):
        # a call that is a statement of its own (after ; { } else, (void), or an if/while/for head): its
        # result goes nowhere
        before = text[:m.start()]
        cut = max(before.rfind(";"), before.rfind("{"), before.rfind("}"))
        frag = re.sub(r"\(\s*void\s*\)\s*$", "", before[cut + 1:].strip()).strip()
        if frag in ("", "else") or re.fullmatch(r"(else\s+)?(if|while|for)\s*\(.*\)", frag, re.S):
            add(m.start(), "discarded-reply", f"{m.group(1)}(...) as a statement: its reply is dropped unchecked; use rs_do")
    if path not in ASYNC_OK:
        for m in re.finditer(r"\b(redisAsyncCommand|redisvAsyncCommand|redisAsyncCommandArgv)\s*\(", text):
            add(m.start(), "raw-async", f"{m.group(1)} outside the link: send it with redis_link_cmd (wire/redis_link.h)")
    for m in re.finditer(r"\bredis_link_cmd(?:_expect|_argv)?\s*\(\s*[^,]+,\s*([A-Za-z_]\w*)\s*,", text):
        cb = m.group(1)
        if cb == "NULL":
            continue
        body = function_body(text, cb)
        if body is None:
            add(m.start(), "async-callback", f"callback {cb} is not a function of this file (the check cannot see it)")
        elif re.search(r"\bREDIS_REPLY_ERROR\b|\bredis_uv_ok\s*\(", body):
            add(m.start(), "async-callback",
                f"callback {cb} checks the reply again: the link's check ran (an error arrives as err, logged)")
    return findings


def sources(argv):
    if argv:
        return [os.path.normpath(p) for p in argv if p.endswith((".c", ".h"))]
    out = []
    for top in CHECKED:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return sorted(out)


def main(argv):
    findings = []
    for path in sources(argv):
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            findings += check(path, strip(f.read()))
    for line in findings:
        print(line)
    print(f"errors: {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
