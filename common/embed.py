#!/usr/bin/env python3
"""Writes a C file that defines `const char NAME[]` holding the bytes of a file.

Usage: embed.py INPUT OUTPUT NAME
"""
import sys

src, dst, name = sys.argv[1:4]
data = open(src, 'rb').read()
with open(dst, 'w') as out:
    out.write('/* Generated from %s by embed.py: do not edit. */\n' % src.split('/')[-1])
    out.write('const char %s[] =\n' % name)
    for line in data.decode('utf-8').splitlines(keepends=True):
        esc = line.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
        out.write('    "%s"\n' % esc)
    out.write(';\n')
