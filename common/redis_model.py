#!/usr/bin/env python3
"""The Redis order model of proto/redis-model.json, read and checked once, for
every tool that needs it: embed.py (the constants each Lua script starts with),
gen_model.py (the C header vc_model.h), the explorer, and the lint.

    redis_model.py MODEL.json HEADER_OUT     writes the C header (gen_model)

A definition that does not hold together (a state letter twice, an answer
number twice in one script's answers, a script's key its family lacks, a key
a voucher script run on a campaign takes and the campaign family lacks, a
format whose arguments are not its %s) is an error said with what is wrong,
so the build stops there.
"""
import json
import os
import re
import sys
import textwrap
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
        self.keys = data.get('keys', {})
        for fam, f in self.families.items():
            self._check_format('key family %s' % fam, f['format'], len(f['args']) + 1)
        for name, k in self.keys.items():
            if not re.match(r'^[a-z][a-z0-9_]*$', name):
                raise ModelError('key %r: a lower-case name' % name)
            self._check_format('key %s' % name, k['format'], len(k['args']))
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
        self._check_voucher_scripts()

    def _check_voucher_scripts(self):
        """Each voucher script a family runs on its own keys (campaign: forget, confirm...)
        takes there the family's key of the same name: a key the family lacks is an error
        naming the script and the key, at build time (not an assert when it first runs)."""
        for fam, f in self.families.items():
            for script in f.get('voucher_scripts', {}).get('scripts', []):
                sc = self.scripts.get(script)
                if sc is None or sc['family'] != 'voucher':
                    raise ModelError('key family %s runs %r on its keys, which is no voucher '
                                     'script' % (fam, script))
                for k in sc['keys']:
                    if k.rstrip('?') not in f['keys']:
                        raise ModelError('script %s runs on a %s\'s keys (key_families.%s.'
                                         'voucher_scripts), and a %s has no key %r' % (
                                             script, fam, fam, fam, k.rstrip('?')))
                if '%s_%s' % (script, fam) in self.scripts:
                    raise ModelError('script %s_%s: its name is taken by the keys of %s on a %s'
                                     % (script, fam, script, fam))

    @staticmethod
    def _check_format(what, fmt, n):
        if fmt.count('%') != fmt.count('%s') or fmt.count('%s') != n:
            raise ModelError('%s: format %r takes %d %%s (its arguments%s), and nothing else'
                             % (what, fmt, n, ' and the name' if 'family' in what else ''))

    def voucher_scripts(self, fam):
        """The voucher scripts family fam runs on its keys, in definition order."""
        return self.families[fam].get('voucher_scripts', {}).get('scripts', [])

    def family_script_keys(self, fam, script):
        """The keys voucher script script takes on family fam's keys, in its order: the
        family's keys of the same names (optional keys marked with '?' as the script's)."""
        return self.scripts[script]['keys']

    def heads(self):
        """Every key's raw head: the literal text before its first argument (or the whole
        key when it takes none), by family or key name. Only generated files hold them."""
        out = {}
        for fam, f in self.families.items():
            out['family ' + fam] = f['format'].split('%s')[0]
        for name, k in self.keys.items():
            out['key ' + name] = k['format'].split('%s')[0]
        return out

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
        if re.search(r'\bKEY_HEAD\b', text):
            out.append('local KEY_HEAD = {%s}\n' % ', '.join(
                "%s = '%s'" % (fam, self.families[fam]['format'].split('%s')[0])
                for fam in sorted(self.families)))
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
             '#include <stdbool.h>\n#include <stdio.h>\n#include <string.h>\n\n',
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
        o.append(JOIN)
        for fam, f in sorted(self.families.items()):
            up = fam.upper()
            o.append('\n/* The keys of the family %s, %s. */\ntypedef enum {\n' % (
                fam, self.c_comment(f['format'] % tuple(
                    ['<' + a + '>' for a in f['args']] + ['NAME']))))
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
            o.append(self._c_builder('vc_%s_key' % fam, f['format'], f['args'],
                                     'vc_%s_key_t k' % fam, 'vc_%s_key_names[k]' % fam,
                                     'vc_%s_key_name_lens[k]' % fam,
                                     'the key k of the %s named by %s' % (fam, ' and '.join(
                                         a.replace(' ', '_') for a in f['args']))))
        for name, k in sorted(self.keys.items()):
            if not k['args']:
                o.append('\n/* %s: %s. */\n#define VC_KEY_%s "%s"\n' % (
                    name, self.c_comment(k['holds']), name.upper(), k['format']))
            else:
                o.append(self._c_builder('vc_key_%s' % name, k['format'], k['args'], None,
                                         None, None, 'the key %s of %s (%s)' % (
                                             name, ' and '.join(a.replace(' ', '_')
                                                                for a in k['args']),
                                             self.c_comment(k['holds']))))
        for fam in sorted(self.families):
            runs = self.voucher_scripts(fam)
            if not runs:
                continue
            o.append('\n/*\n * The %s\'s key of the same name as each voucher key (-1: none), so\n'
                     ' * that a %s\'s keys fill an array a voucher\'s flow indexes by\n'
                     ' * VC_VOUCHER_KEY_* (no voucher script a %s runs takes one it lacks).\n */\n'
                     % (fam, fam, fam))
            o.append('static const int vc_%s_key_of_voucher[VC_VOUCHER_KEY_COUNT] = {\n' % fam)
            for vk in self.families['voucher']['keys']:
                o.append('    [VC_VOUCHER_KEY_%s] = %s,\n' % (
                    vk.upper(), 'VC_%s_KEY_%s' % (fam.upper(), vk.upper())
                    if vk in self.families[fam]['keys'] else '-1'))
            o.append('};\n')
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
            for fam in sorted(self.families):
                if name not in self.voucher_scripts(fam):
                    continue
                o.append('/* %s.lua\'s keys on a %s: the %s\'s keys of the same names. */\n'
                         % (name, fam, fam))
                o.append('static const int vc_%s_%s_keys[VC_%s_NKEYS] = {%s};\n' % (
                    name, fam, up, ', '.join('VC_%s_KEY_%s' % (fam.upper(),
                                                               k.rstrip('?').upper())
                                             for k in sc['keys'])))
        o.append('\n#endif\n')
        return ''.join(o)

    @staticmethod
    def _c_builder(fn, fmt, args, key_param, key_name, key_len, what):
        """A C builder of fmt's keys: fn(buf, size, args...[, key_param]). A string argument
        is copied (vc_model_join(): no format parsed, as it runs for every key of every
        request); a campaign id is written by snprintf. key_name and key_len, when given,
        are the last piece (a family's key name)."""
        params = []
        for a in args:
            c = a.replace(' ', '_')
            params.append(('long long id' if a == 'campaign id' else 'const char *' + c, c,
                           a == 'campaign id'))
        sig = ', '.join(['char *buf', 'size_t size'] + [p[0] for p in params] +
                        ([key_param] if key_param else []))
        doc = textwrap.wrap('Writes %s into buf (size bytes, NUL-terminated, cut as snprintf '
                            'cuts). Returns the key\'s length, or -1 when it did not fit.' % what,
                            80)
        o = ['\n/*\n%s\n */\n' % '\n'.join(' * ' + line for line in doc)]
        pieces = fmt.split('%s')
        if len(params) == 1 and not params[0][2] and key_name:
            # One text argument: a variant given its length, for a caller that builds every
            # key of one code (gw_app_keys(): strlen() per key cost 8% of a sold-out answer).
            c = params[0][1]
            sig_n = sig.replace('const char *%s' % c, 'const char *%s, size_t %s_len' % (c, c))
            o.append('static inline int %s_n(%s)\n{\n' % (fn, sig_n))
            o.append('    const char *const piece[] = {"%s", %s, "%s", %s};\n' % (
                pieces[0], c, pieces[1], key_name))
            o.append('    const size_t len[] = {%d, %s_len, %d, %s};\n\n' % (
                len(pieces[0]), c, len(pieces[1]), key_len))
            o.append('    return vc_model_join(buf, size, piece, len, 4);\n}\n\n')
            o.append('/* As %s_n(), %s given NUL-terminated. */\n' % (fn, c))
            o.append('static inline int %s(%s)\n{\n    return %s_n(buf, size, %s, strlen(%s), k);'
                     '\n}\n' % (fn, sig, fn, c, c))
            return ''.join(o)
        o.append('static inline int %s(%s)\n{\n' % (fn, sig))
        if any(p[2] for p in params):
            spec = fmt.replace('%s', '%lld', 1) if params[0][2] else fmt
            vals = [('id' if p[2] else p[1]) for p in params] + ([key_name] if key_name else [])
            o.append('    int n = snprintf(buf, size, "%s", %s);\n' % (spec, ', '.join(vals)))
            o.append('    return n < 0 || (size_t)n >= size ? -1 : n;\n}\n')
            return ''.join(o)
        texts, lens = [], []
        for i, lit in enumerate(pieces):
            if lit:
                texts.append('"%s"' % lit)
                lens.append(str(len(lit)))
            if i < len(params):
                texts.append(params[i][1])
                lens.append('strlen(%s)' % params[i][1])
            elif i == len(params) and key_name:
                texts.append(key_name)
                lens.append(key_len)
        o.append('    const char *const piece[] = {%s};\n' % ', '.join(texts))
        o.append('    const size_t len[] = {%s};\n\n' % ', '.join(lens))
        o.append('    return vc_model_join(buf, size, piece, len, %d);\n}\n' % len(texts))
        return ''.join(o)

    def order_value(self):
        return self.raw['order_value']

    @staticmethod
    def c_comment(s):
        return s.replace('*/', '* /')


JOIN = """
/*
 * Joins the n pieces (piece[i], len[i] bytes each) into buf (size bytes,
 * NUL-terminated), cut as snprintf cuts. Returns the length, or -1 when it was
 * cut. The key builders below use it for every key whose arguments are text.
 */
static inline int vc_model_join(char *buf, size_t size, const char *const *piece,
                                const size_t *len, int n)
{
    size_t at = 0, total = 0;

    for (int i = 0; i < n; i++) {
        size_t l = len[i];
        total += l;
        if (size == 0 || at >= size - 1)
            continue;
        if (l > size - 1 - at)
            l = size - 1 - at;
        memcpy(buf + at, piece[i], l);
        at += l;
    }
    if (size > 0)
        buf[at] = '\\0';
    return total >= size ? -1 : (int)total;
}
"""


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
