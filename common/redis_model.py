#!/usr/bin/env python3
"""The Redis order model of proto/redis-model.json, read and checked once, for
every tool that needs it: embed.py (the constants each Lua script starts with),
gen_model.py (the C header vc_model.h), the explorer, and the lint.

    redis_model.py MODEL.json HEADER_OUT     writes the C header (gen_model)

A definition that does not hold together (a state letter twice, an answer
number twice in one script's answers, a script's key its family lacks) is an
error said with what is wrong, so the build stops there.
"""
import json
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, '..', 'proto', 'redis-model.json')
NAME = re.compile(r'^[A-Z][A-Z0-9_]*$')


class ModelError(Exception):
    pass


class Model:
    """The definition, checked. states: [{letter, name, taken, meaning}];
    families: {family: {format, args, keys: {key: what}}}; sets: {set: {name:
    (number, meaning)}} with includes merged; scripts: {script: {family,
    answers, keys}}."""

    def __init__(self, data, path):
        self.path = path
        self.states = data['states']
        letters, names = set(), set()
        for s in self.states:
            if len(s['letter']) != 1 or s['letter'] in letters:
                raise ModelError('state %r: one letter, once' % s['letter'])
            if not NAME.match(s['name']) or s['name'] in names:
                raise ModelError('state %r: an upper-case name, once' % s['name'])
            letters.add(s['letter'])
            names.add(s['name'])
        self.families = data['key_families']
        self.sets = {}
        for name, st in data['answer_sets'].items():
            merged = {}
            for inc in st.get('includes', []):
                merged.update(self._set(data, inc))
            for a, (n, what) in st['answers'].items():
                merged[a] = (n, what)
            self._check_set(name, merged)
            self.sets[name] = merged
        self.scripts = data['scripts']
        for name, sc in self.scripts.items():
            fam = self.families.get(sc['family'])
            if fam is None:
                raise ModelError('script %s: no key family %r' % (name, sc['family']))
            for k in sc['keys']:
                if k.rstrip('?') not in fam['keys']:
                    raise ModelError('script %s: key %r is not a %s key' % (
                        name, k, sc['family']))
            if 'answers' in sc and sc['answers'] not in self.sets:
                raise ModelError('script %s: no answer set %r' % (name, sc['answers']))

    @staticmethod
    def _set(data, name):
        st = data['answer_sets'].get(name)
        if st is None:
            raise ModelError('no answer set %r' % name)
        return {a: tuple(v) for a, v in st['answers'].items()}

    @staticmethod
    def _check_set(name, answers):
        seen = {}
        for a, (n, _) in answers.items():
            if not NAME.match(a):
                raise ModelError('answer set %s: %r is not an upper-case name' % (name, a))
            if n in seen:
                raise ModelError('answer set %s: %d is both %s and %s' % (name, n, seen[n], a))
            seen[n] = a

    def names(self):
        """(state, answer): the letters by name (state.HELD: 'H') and the answers by set and
        name (answer.reserve.NOT_LOADED: -3), for Python (the explorer, the tests)."""
        state = types.SimpleNamespace(**{s['name']: s['letter'] for s in self.states})
        answer = types.SimpleNamespace(**{
            name: types.SimpleNamespace(**{a: n for a, (n, _) in answers.items()})
            for name, answers in self.sets.items()})
        return state, answer

    def letter(self, name):
        """The letter of the state named name (HELD: 'H')."""
        return next(s['letter'] for s in self.states if s['name'] == name)

    def taken_letters(self):
        """The letters of the states counted as taken, in definition order ("HCXE")."""
        return ''.join(s['letter'] for s in self.states if s['taken'])

    def answer(self, set_name, name):
        """The number of answer name of set set_name (reserve, NOT_LOADED: -3)."""
        return self.sets[set_name][name][0]

    def script_keys(self, script, argument):
        """The keys script takes, in order, built for argument (a code, a campaign id):
        optional keys included."""
        sc = self.scripts[script]
        fmt = self.families[sc['family']]['format']
        return [fmt % (argument, k.rstrip('?')) for k in sc['keys']]

    def lua_prelude(self, text):
        """The constants of text (a Lua script): STATE (the letters by name),
        STATE_TAKEN (letter -> true for the states counted as taken), and the
        answer tables (RESERVE for RESERVE.TAKEN...), each when text names it;
        "" when it names none."""
        out = []
        # STATE named as a table too (order_value.lua's pairs(STATE)), not only STATE.HELD.
        if re.search(r'\bSTATE\b', text):
            out.append('local STATE = {%s}\n' % ', '.join(
                "%s = '%s'" % (s['name'], s['letter']) for s in self.states))
        if re.search(r'\bSTATE_TAKEN\b', text):
            out.append('local STATE_TAKEN = {%s}\n' % ', '.join(
                '%s = true' % s['letter'] for s in self.states if s['taken']))
        for name in sorted(self.sets):
            table = name.upper()
            if not re.search(r'\b%s\.' % table, text):
                continue
            out.append('local %s = {%s}\n' % (table, ', '.join(
                '%s = %d' % (a, n) for a, (n, _) in
                sorted(self.sets[name].items(), key=lambda kv: -kv[1][0]))))
        if not out:
            return ''
        return ''.join(['-- Generated from proto/redis-model.json (common/redis_model.py): the\n',
                        '-- order states and the answers this script names.\n'] + out)

    def c_header(self):
        """The text of vc_model.h."""
        o = ['/* Generated from proto/redis-model.json by common/redis_model.py: do not edit. */\n',
             '/*\n * The Redis order model: the order states, what each counts as, every\n',
             ' * script\'s answers by name, the keys of a voucher and of a campaign and\n',
             ' * each script\'s keys in order (proto/redis-keys.md explains them). Pure.\n */\n',
             '#ifndef VC_MODEL_H\n#define VC_MODEL_H\n\n',
             '#include <stdbool.h>\n#include <stdio.h>\n\n',
             '/* The order states: the last field of an order\'s value, %s. */\n'
             % self.c_comment(json.dumps(self.order_value()))]
        for s in self.states:
            o.append("#define VC_STATE_%s '%s' /* %s */\n" % (s['name'], s['letter'],
                                                                 s['meaning']))
        o.append('\n/* Whether an order in state is counted as taken (holds a use): %s. */\n'
                 % ', '.join(s['letter'] for s in self.states if s['taken']))
        o.append('static inline bool vc_state_taken(char state)\n{\n    return %s;\n}\n\n'
                 % ' || '.join('state == VC_STATE_%s' % s['name']
                               for s in self.states if s['taken']))
        o.append('/* Whether state is one of the states above. */\n')
        o.append('static inline bool vc_state_known(char state)\n{\n    return %s;\n}\n'
                 % ' || '.join('state == VC_STATE_%s' % s['name'] for s in self.states))
        for name in sorted(self.sets):
            o.append('\n/* The answers of %s. */\nenum {\n' % self.c_comment(
                self.raw_sets[name]['about']))
            for a, (n, what) in sorted(self.sets[name].items(), key=lambda kv: -kv[1][0]):
                o.append('    VC_%s_%s = %d, /* %s */\n' % (name.upper(), a, n,
                                                          self.c_comment(what)))
            o.append('};\n')
        for fam, f in sorted(self.families.items()):
            up = fam.upper()
            o.append('\n/* The keys of a %s, %s. */\ntypedef enum {\n' % (
                fam, self.c_comment(f['format'] % ('<' + f['args'][0] + '>', 'NAME'))))
            for k, what in f['keys'].items():
                o.append('    VC_%s_KEY_%s, /* %s */\n' % (up, k.upper(), self.c_comment(what)))
            o.append('    VC_%s_KEY_COUNT\n} vc_%s_key_t;\n' % (up, fam))
            o.append('\nstatic const char *const vc_%s_key_names[VC_%s_KEY_COUNT] = {\n' % (
                fam, up))
            for k in f['keys']:
                o.append('    [VC_%s_KEY_%s] = "%s",\n' % (up, k.upper(), k))
            o.append('};\n')
            o.append('static const unsigned char vc_%s_key_name_lens[VC_%s_KEY_COUNT] = {%s};\n'
                     % (fam, up, ', '.join(str(len(k)) for k in f['keys'])))
            arg_c = 'const char *code' if fam == 'voucher' else 'long long id'
            spec = f['format'].replace('%s', '%s' if fam == 'voucher' else '%lld', 1)
            o.append('\n/*\n * Writes the key k of %s %s into buf (size bytes, NUL-terminated).\n'
                     % ('voucher' if fam == 'voucher' else 'campaign',
                        'code' if fam == 'voucher' else 'id'))
            o.append(' * Returns the key\'s length, or -1 when it does not fit.\n */\n')
            o.append('static inline int vc_%s_key(char *buf, size_t size, %s, vc_%s_key_t k)\n'
                     '{\n    int n = snprintf(buf, size, "%s", %s, vc_%s_key_names[k]);\n'
                     '    return n < 0 || (size_t)n >= size ? -1 : n;\n}\n' % (
                         fam, arg_c, fam, spec, 'code' if fam == 'voucher' else 'id', fam))
        o.append('\n/*\n * Points keys[0..n) at the keys a script takes, in its order (order: one of\n'
                 ' * the vc_SCRIPT_keys[] below), out of built: a family\'s keys as built, one\n'
                 ' * every stride bytes (char built[VC_..._KEY_COUNT][stride]). Borrowed: keys\n'
                 ' * point into built.\n */\n'
                 'static inline void vc_script_keys(const int *order, int n, const char *built,\n'
                 '                                  size_t stride, const char **keys)\n{\n'
                 '    for (int i = 0; i < n; i++)\n'
                 '        keys[i] = built + (size_t)order[i] * stride;\n}\n')
        for name, sc in sorted(self.scripts.items()):
            up = name.upper()
            o.append('\n/* %s.lua\'s keys, in order (those marked optional may be left off the '
                     'end). */\nenum {\n' % name)
            for i, k in enumerate(sc['keys']):
                o.append('    VC_%s_KEY_%s = %d,%s\n' % (
                    up, k.rstrip('?').upper(), i, ' /* optional */' if k.endswith('?') else ''))
            o.append('    VC_%s_NKEYS = %d,\n};\n' % (up, len(sc['keys'])))
            o.append('static const int vc_%s_keys[VC_%s_NKEYS] = {%s};\n' % (
                name, up, ', '.join('VC_%s_KEY_%s' % (sc['family'].upper(),
                                                      k.rstrip('?').upper())
                                    for k in sc['keys'])))
        o.append('\n#endif\n')
        return ''.join(o)

    def order_value(self):
        return self.raw['order_value']

    @staticmethod
    def c_comment(s):
        return s.replace('*/', '* /')


def load(path=None):
    """The model at path (default: proto/redis-model.json beside this file). Raises
    ModelError on a definition that does not hold together."""
    path = path or os.environ.get('VOUCHER_REDIS_MODEL') or DEFAULT
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError('%s: %s' % (path, e))
    try:
        m = Model(data, path)
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError('%s: malformed: %r' % (path, e))
    m.raw = data
    m.raw_sets = data['answer_sets']
    return m


def main(argv):
    if len(argv) != 3:
        sys.stderr.write('usage: redis_model.py MODEL.json HEADER_OUT\n')
        return 2
    try:
        m = load(argv[1])
    except ModelError as e:
        sys.stderr.write('redis_model.py: %s\n' % e)
        return 1
    with open(argv[2], 'w') as f:
        f.write(m.c_header())
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
