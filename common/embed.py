#!/usr/bin/env python3
"""Writes a C file that defines `const char NAME[]` holding the text of one or
more Lua files, concatenated in order (a guard put first, leader.lua for the
reconciler's form of a script, then the script), each with its includes
expanded.

Usage: embed.py [--model MODEL] [--lua LUA_OUT] [--depfile DEP_OUT] C_OUT NAME INPUT...

A Redis script sent with EVAL cannot load another, so a rule two scripts share
lives in one fragment that each of them includes at build time. A line that is
exactly

    -- @include NAME.lua

(spaces around allowed) is replaced by the text of NAME.lua, found in the
folder of the file that holds the line, itself expanded the same way. NAME is
a plain file name: no folders. A missing file and a cycle are build errors,
said with the file and line. A file is put into one script once: a later
include of it (two fragments that both need the order parser, a prelude and
the script) is expanded to nothing, since what the first one defined is in
scope from there on. Every fragment defines locals at the top level of the
script, so an include inside a function or a block is not supported.

--model puts in the constants of the Redis order model that the script names
(MODEL, proto/redis-model.json; common/redis_model.py writes them): STATE,
the order states by name, STATE_TAKEN, the states counted as taken, and the
answer tables (RESERVE.TAKEN: the table RESERVE), right before the first
input that names one (expand_all()). A script says a state or an answer by
these names, never by its letter or number (the lint model_names).

--lua writes the expanded script alone (what Redis runs: the tests, the bench
and the explorer read it); --depfile writes a Make rule naming every file
read, so that the build runs again when a fragment changes.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_model  # noqa: E402

INCLUDE = re.compile(r'^\s*--\s*@include\b(.*)$')
NAME = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*\.lua$')


class EmbedError(Exception):
    pass


def expand(path, _stack=None, _seen=None):
    """Returns (text, files): the text of the Lua file at path with every
    include replaced, and every file read, path first. Raises EmbedError."""
    stack = _stack if _stack is not None else []
    seen = _seen if _seen is not None else {}
    real = os.path.realpath(path)
    try:
        with open(path, 'rb') as f:
            data = f.read().decode('utf-8')
    except OSError as e:
        raise EmbedError('%s: %s' % (path, e.strerror))
    except UnicodeDecodeError:
        raise EmbedError('%s: not UTF-8' % path)
    stack.append(real)
    files = [path]
    out = []
    for n, line in enumerate(data.splitlines(keepends=True), 1):
        m = INCLUDE.match(line)
        if not m:
            out.append(line)
            continue
        where = '%s:%d' % (path, n)
        name = m.group(1).strip()
        if not NAME.match(name):
            raise EmbedError('%s: @include takes one file name ending in .lua, '
                             'without a folder: %r' % (where, name))
        inc = os.path.join(os.path.dirname(path), name)
        inc_real = os.path.realpath(inc)
        if inc_real in stack:
            cycle = stack[stack.index(inc_real):] + [inc_real]
            raise EmbedError('%s: @include %s: a cycle: %s' % (
                where, name, ' -> '.join(os.path.basename(p) for p in cycle)))
        if not os.path.isfile(inc):
            raise EmbedError('%s: @include %s: no such file %s' % (where, name, inc))
        if inc_real in seen:
            # In the script since seen[inc_real], above this line: its locals are in
            # scope here. A second copy would only cost Lua locals (200 a chunk).
            continue
        seen[inc_real] = where
        text, inc_files = expand(inc, stack, seen)
        if text and not text.endswith('\n'):
            text += '\n'
        out.append(text)
        files += inc_files
    stack.pop()
    return ''.join(out), files


def expand_all(srcs, model=None):
    """The inputs concatenated in order, each expanded (one script: a file is
    put in at most once across all of them, at its first include). With model (a
    redis_model.Model), its constants that the script names go right before
    the first input that names one: a guard put first (leader.lua) stays the
    script's first text, and a script that names none is unchanged."""
    seen = {}
    texts, files = [], []
    for src in srcs:
        seen[os.path.realpath(src)] = src
        text, fs = expand(src, [], seen)
        texts.append(text)
        files += fs
    if model:
        prelude = model.lua_prelude(''.join(texts))
        at = next((i for i, t in enumerate(texts) if model.lua_prelude(t)), None)
        if at is not None:
            texts.insert(at, prelude)
    return ''.join(texts), files


def c_source(name, srcs, text):
    out = ['/* Generated from %s by embed.py: do not edit. */\n'
           % ' + '.join(os.path.basename(s) for s in srcs),
           'const char %s[] =\n' % name]
    for line in text.splitlines(keepends=True):
        esc = line.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
        out.append('    "%s"\n' % esc)
    out.append(';\n')
    return ''.join(out)


def main(argv):
    args = argv[1:]
    lua_out = dep_out = model_path = None
    while args and args[0].startswith('--'):
        if args[0] == '--lua' and len(args) > 1:
            lua_out = args[1]
        elif args[0] == '--depfile' and len(args) > 1:
            dep_out = args[1]
        elif args[0] == '--model' and len(args) > 1:
            model_path = args[1]
        else:
            break
        args = args[2:]
    if len(args) < 3:
        sys.stderr.write(__doc__.split('\n\n')[1] + '\n')
        return 2
    c_out, name, srcs = args[0], args[1], args[2:]
    try:
        model = redis_model.load(model_path) if model_path else None
        text, files = expand_all(srcs, model)
        if model_path:
            files += [model_path, redis_model.__file__]
    except (EmbedError, redis_model.ModelError) as e:
        sys.stderr.write('embed.py: %s\n' % e)
        return 1
    with open(c_out, 'w') as f:
        f.write(c_source(name, srcs, text))
    if lua_out:
        with open(lua_out, 'w') as f:
            f.write(text)
    if dep_out:
        with open(dep_out, 'w') as f:
            f.write('%s: %s\n' % (c_out.replace(' ', '\\ '),
                                  ' '.join(p.replace(' ', '\\ ') for p in files)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
