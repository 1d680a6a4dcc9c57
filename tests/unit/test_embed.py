#!/usr/bin/env python3
"""The Lua embedder's include mechanism (common/embed.py): an include is
expanded in place, nested, a file once per script; a missing file, a cycle and
a malformed name fail the build with the file and line; the C array and the
expanded script hold the same text; the depfile names every file read.

Usage: test_embed.py PATH/TO/embed.py
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

EMBED = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                        os.path.join(os.path.dirname(__file__), '..', '..', 'common', 'embed.py'))
spec = importlib.util.spec_from_file_location('embed', EMBED)
embed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(embed)


class Include(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), 'w') as f:
            f.write(text)
        return os.path.join(self.dir, name)

    def run_embed(self, *inputs):
        c_out = os.path.join(self.dir, 'out.c')
        lua_out = os.path.join(self.dir, 'out.lua.txt')
        dep = os.path.join(self.dir, 'out.d')
        p = subprocess.run([sys.executable, EMBED, '--lua', lua_out, '--depfile', dep,
                            c_out, 'vc_lua_x'] + [os.path.join(self.dir, i) for i in inputs],
                           capture_output=True, text=True)
        return p, c_out, lua_out, dep

    def test_expands_in_place_and_nested(self):
        self.write('leaf.lua', 'local function leaf() return 1 end')  # no final newline
        self.write('mid.lua', '-- mid\n-- @include leaf.lua\nlocal function mid() return leaf() end\n')
        main = self.write('main.lua', 'local a = 1\n  --   @include   mid.lua  \nreturn mid()\n')
        text, files = embed.expand(main)
        self.assertEqual(text, 'local a = 1\n-- mid\nlocal function leaf() return 1 end\n'
                               'local function mid() return leaf() end\nreturn mid()\n')
        self.assertEqual([os.path.basename(f) for f in files], ['main.lua', 'mid.lua', 'leaf.lua'])

    def test_only_a_whole_line_includes(self):
        main = self.write('main.lua', '-- @includes x.lua\nlocal s = "-- @include x.lua"\n')
        self.assertEqual(embed.expand(main)[0], '-- @includes x.lua\nlocal s = "-- @include x.lua"\n')

    def test_outputs_agree(self):
        self.write('frag.lua', 'local q = "a\\\\b"\n')
        self.write('pre.lua', '-- pre\n')
        self.write('main.lua', '-- @include frag.lua\nreturn q\n')
        p, c_out, lua_out, dep = self.run_embed('pre.lua', 'main.lua')
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(lua_out) as f:
            self.assertEqual(f.read(), '-- pre\nlocal q = "a\\\\b"\nreturn q\n')
        with open(c_out) as f:
            c = f.read()
        self.assertIn('const char vc_lua_x[] =\n', c)
        self.assertIn('    "local q = \\"a\\\\\\\\b\\"\\n"\n', c)
        self.assertNotIn('@include', c)
        with open(dep) as f:
            d = f.read()
        self.assertTrue(d.startswith(c_out + ': '))
        for name in ('pre.lua', 'main.lua', 'frag.lua'):
            self.assertIn(os.path.join(self.dir, name), d)

    def test_missing_file_fails_with_file_and_line(self):
        self.write('main.lua', 'local a\n-- @include nowhere.lua\n')
        p, c_out, _, _ = self.run_embed('main.lua')
        self.assertEqual(p.returncode, 1)
        self.assertIn('main.lua:2: @include nowhere.lua: no such file', p.stderr)
        self.assertFalse(os.path.exists(c_out))

    def test_cycle_fails(self):
        self.write('a.lua', '-- @include b.lua\n')
        self.write('b.lua', '-- @include c.lua\n')
        self.write('c.lua', '-- @include a.lua\n')
        p, c_out, _, _ = self.run_embed('a.lua')
        self.assertEqual(p.returncode, 1)
        self.assertIn('c.lua:1: @include a.lua: a cycle: a.lua -> b.lua -> c.lua -> a.lua', p.stderr)
        self.assertFalse(os.path.exists(c_out))

    def test_self_include_is_a_cycle(self):
        self.write('a.lua', '-- @include a.lua\n')
        p, _, _, _ = self.run_embed('a.lua')
        self.assertEqual(p.returncode, 1)
        self.assertIn('a cycle: a.lua -> a.lua', p.stderr)

    def test_twice_in_one_script_is_put_in_once(self):
        self.write('f.lua', 'local function f() end\n')
        self.write('g.lua', '-- @include f.lua\nlocal function g() return f() end\n')
        self.write('main.lua', '-- @include f.lua\n-- @include g.lua\nreturn g()\n')
        self.write('pre.lua', '-- @include f.lua\n')
        self.write('main2.lua', '-- @include f.lua\nreturn f()\n')
        # (inputs, the script): nested in one input, and across a prelude and the script.
        for inputs, want in ((['main.lua'], 'local function f() end\n'
                              'local function g() return f() end\nreturn g()\n'),
                             (['pre.lua', 'main2.lua'], 'local function f() end\nreturn f()\n')):
            p, _, lua_out, _ = self.run_embed(*inputs)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(lua_out) as out:
                self.assertEqual(out.read(), want, inputs)
        # A missing file is still one, the second time too.
        self.write('main3.lua', '-- @include f.lua\n-- @include f.lua\n-- @include gone.lua\n')
        p, _, _, _ = self.run_embed('main3.lua')
        self.assertEqual(p.returncode, 1)
        self.assertIn('main3.lua:3: @include gone.lua: no such file', p.stderr)

    def test_name_must_be_a_plain_lua_file(self):
        for bad in ('../x.lua', 'sub/x.lua', 'x.txt', '', 'a.lua b.lua'):
            self.write('main.lua', '-- @include %s\n' % bad)
            p, _, _, _ = self.run_embed('main.lua')
            self.assertEqual(p.returncode, 1, bad)
            self.assertIn('main.lua:1: @include takes one file name', p.stderr)


class CampaignKeys(unittest.TestCase):
    """The definition fails to load (so the build stops) when the campaign family lacks a
    key a voucher script run on a campaign takes, naming the script and the key."""

    def test_every_key_of_each_script_run_on_a_campaign(self):
        import copy
        import json
        redis_model = embed.redis_model
        with open(redis_model.DEFAULT) as f:
            data = json.load(f)
        redis_model.Model(copy.deepcopy(data), 'model')  # the definition itself loads
        runs = data['key_families']['campaign']['voucher_scripts']['scripts']
        self.assertIn('confirm', runs)
        cases = sorted({(s, k.rstrip('?')) for s in runs for k in data['scripts'][s]['keys']})
        self.assertGreater(len(cases), 10)
        for script, key in cases:
            broken = copy.deepcopy(data)
            del broken['key_families']['campaign']['keys'][key]
            for sc in broken['scripts'].values():  # the campaign's own scripts let it go
                if sc['family'] == 'campaign':
                    sc['keys'] = [k for k in sc['keys'] if k.rstrip('?') != key]
            with self.assertRaises(redis_model.ModelError) as e:
                redis_model.Model(broken, 'model')
            # The first script (in definition order) that takes the key is named.
            first = next(s for s in runs if key in (k.rstrip('?') for k in
                                                     data['scripts'][s]['keys']))
            self.assertIn('script %s runs on a campaign' % first, str(e.exception), key)
            self.assertIn("no key '%s'" % key, str(e.exception))


class Tree(unittest.TestCase):
    """Every script of common/lua expands (no include left, none missing)."""

    def test_every_script_expands(self):
        lua = os.path.join(os.path.dirname(EMBED), 'lua')
        names = sorted(f for f in os.listdir(lua) if f.endswith('.lua'))
        self.assertIn('reserve.lua', names)
        for name in names:
            text, _ = embed.expand(os.path.join(lua, name))
            self.assertIsNone(next((l for l in text.splitlines() if embed.INCLUDE.match(l)), None),
                              name)


if __name__ == '__main__':
    unittest.main(verbosity=1)
