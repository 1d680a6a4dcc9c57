#!/usr/bin/env python3
"""Writes a C file that defines `const char NAME[]` holding the bytes of one or
more files, concatenated in order (a shared Lua prelude, then the script).

Usage: embed.py OUTPUT NAME INPUT...
"""
import sys

dst, name = sys.argv[1:3]
srcs = sys.argv[3:]
with open(dst, 'w') as out:
    out.write('/* Generated from %s by embed.py: do not edit. */\n'
              % ' + '.join(s.split('/')[-1] for s in srcs))
    out.write('const char %s[] =\n' % name)
    for src in srcs:
        data = open(src, 'rb').read()
        for line in data.decode('utf-8').splitlines(keepends=True):
            esc = line.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
            out.write('    "%s"\n' % esc)
    out.write(';\n')
