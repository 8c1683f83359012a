#!/usr/bin/env python3
"""Module-layer checker for the crates of the Throng workspace (Python 3 standard library only).

usage: check-layers.py CRATE_DIR [CRATE_DIR...]   check each crate against CRATE_DIR/layers.txt
       check-layers.py --graph CRATE_DIR          print the file-level import graph and its cycles
       check-layers.py --self-test                run the built-in tests on fake crates

layers.txt: `#` starts a comment; each non-empty line is one layer, bottom layer first, holding
whitespace-separated names of top-level modules (`src/NAME.rs` and/or `src/NAME/`); a line may
start with a label ending in `:` (`L0: config observe net`), which is ignored.

Only the library is read: the module tree rooted at src/lib.rs, found through its `mod`
declarations (src/main.rs and src/bin/ are never read). Rules:
 1. every top-level module (declared in lib.rs, or src/NAME.rs / src/NAME/ on disk) is listed
    exactly once, and every listed name exists;
 2. no upward import: a file in top-level module A may reference B only if layer(B) <= layer(A)
    (layers are numbered from 0, bottom first; same layer is allowed);
 3. no cycle in the file-level graph (node = one source file, edge F -> G when F references a
    path that resolves into G's module); every strongly connected component is reported;
 4. no path into lib.rs from another file: `crate::Config` becomes `crate::config::Config`.
References are `use` trees (nested groups, `self`, `as`, `*`) and inline paths starting with
`crate::`, `self::`, `super::` or the name of a child module in scope, found after comments,
doc comments and string/char literals are blanked. A path resolves to the longest prefix that
is a module; inline `mod name { }` blocks (e.g. `mod tests`) belong to their file. `mod`
declarations are not edges. lib.rs (the crate root, a re-export list) is in no edge; a
path from another file that resolves into lib.rs (`crate::Config` through a `pub use`) is an
error (rule 4), since the checker could not see which module it reaches. On success one line is printed:
`layers: DIR ok (N files, M imports, K layers)`, M counting distinct file -> file edges.
"""
import bisect
import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
CHAR_LIT = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]*\}|.)|[^\\'\n])'")
RAW_STR = re.compile(r'(?:br|cr|r)(#*)"')
MOD_OR_BRACE = re.compile(r"[{}]|(?<![\w$])mod\s+(" + IDENT + r")\s*([;{])")
USE_STMT = re.compile(r"(?<![\w$])use\s+([^;]*);")
RESTRICTED_VIS = re.compile(r"(?<![\w$])pub\s*\(\s*in\s[^)]*\)")
INLINE_PATH = re.compile(r"(?<![\w$:])" + IDENT + r"(?:\s*::\s*" + IDENT + r")+(\s*!)?")
USE_TOKEN = re.compile(r"::|[{},*]|" + IDENT)


def strip_code(text):
    """Blank comments and the contents of string/char literals; offsets and newlines are kept."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c, ident_before = text[i], i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j, depth = i + 2, 1
            while j < n and depth:
                depth += {"/*": 1, "*/": -1}.get(text[j:j + 2], 0)
                j += 2 if text[j:j + 2] in ("/*", "*/") else 1
        elif c in "bcr" and not ident_before and RAW_STR.match(text, i):
            m = RAW_STR.match(text, i)
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"' or (c in "bc" and not ident_before and text.startswith('"', i + 1)):
            j = text.index('"', i) + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif c == "'" or (c == "b" and not ident_before and text.startswith("'", i + 1)):
            m = CHAR_LIT.match(text, i + (c == "b"))
            if not m:  # a lifetime or a loop label
                i += 1
                continue
            j = m.end()
        else:
            i += 1
            continue
        out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
        i = j
    return "".join(out)


def expand_use(tokens, i=0, prefix=()):
    """Expand the use tree starting at tokens[i] (pairs of text and offset) into full paths.

    Returns (paths, next index); each path is a list of (segment, offset)."""
    path, paths = list(prefix), []
    while i < len(tokens):
        t = tokens[i][0]
        if t == "{":
            i += 1
            while i < len(tokens) and tokens[i][0] != "}":
                sub, i = expand_use(tokens, i, path)
                paths += sub
                if i < len(tokens) and tokens[i][0] == ",":
                    i += 1
            return paths + ([] if paths else [path]), i + 1
        if t == "*":
            return paths + [path], i + 1
        if t in (",", "}"):
            break
        if t == "as":  # `as name` renames: the path is what precedes it
            i += 2
            continue
        if t != "::" and not (t == "self" and path):  # `{self, ..}` names the prefix itself
            path.append(tokens[i])
        i += 1
    return paths + [path], i


class Crate:
    """The library module tree of one crate and the references between its files."""

    def __init__(self, crate_dir):
        self.dir, self.src = crate_dir, os.path.join(crate_dir, "src")
        self.files = {}    # file (relative to the crate dir) -> module path (tuple)
        self.modules = {}  # module path, including inline `mod x { }` blocks -> file
        self.top = []      # top-level modules: declared in lib.rs, then undeclared on disk
        self.warnings, self.refs = [], []  # refs: (file, line, path text, target file)
        self.edges = {}    # (file, target file) -> first (line, path text), lib.rs excluded
        if not os.path.isfile(os.path.join(self.src, "lib.rs")):
            raise SystemExit(f"check-layers: {self.src}/lib.rs not found")
        self._parsed = {}
        self._load("src/lib.rs", ())
        for name in sorted(os.listdir(self.src)):  # rule 1 also knows src/NAME.rs and src/NAME/
            mod, is_dir = re.sub(r"\.rs$", "", name), os.path.isdir(os.path.join(self.src, name))
            if (is_dir or name != mod) and re.fullmatch(IDENT, mod) and mod not in (
                    self.top + ["lib", "main", "bin"]):
                self.top.append(mod)
                self.warnings.append(f"{self.src}/{name}: not declared in lib.rs (not scanned)")
        for f in self.files:
            self._scan(f)
        for f, line, text, g in self.refs:
            if g != f and "src/lib.rs" not in (f, g):
                self.edges.setdefault((f, g), (line, text))

    def _load(self, rel, modpath):
        """Read one file, record its inline modules and follow its `mod name;` declarations."""
        self.files[rel], self.modules[modpath] = modpath, rel
        with open(os.path.join(self.dir, rel), encoding="utf-8") as fh:
            code = strip_code(fh.read())
        base = os.path.dirname(rel) if os.path.basename(rel) in ("lib.rs", "mod.rs") else rel[:-3]
        spans, stack, depth, children = [], [], 0, []
        for m in MOD_OR_BRACE.finditer(code):
            inner = tuple(name for name, _, _ in stack)
            if m.group(1) and m.group(2) == ";":
                children.append(inner + (m.group(1),))
            elif m.group(1):  # inline `mod name {`
                stack.append((m.group(1), depth, m.start()))
                depth += 1
            elif m.group(0) == "{":
                depth += 1
            else:
                depth -= 1
                if stack and stack[-1][1] == depth:
                    spans.append((stack[-1][2], m.end(), modpath + inner))
                    self.modules[modpath + inner] = rel
                    stack.pop()
        self._parsed[rel] = (code, spans)
        for sub in children:
            cands = [os.path.join(base, *sub) + ".rs", os.path.join(base, *sub, "mod.rs")]
            found = [c for c in cands if os.path.isfile(os.path.join(self.dir, c))]
            if not found:
                self.warnings.append(f"{self.dir}/{rel}: no file for `mod {sub[-1]};` (cfg/path?)")
                continue
            if not modpath and len(sub) == 1:
                self.top.append(sub[0])
            self._load(found[0], modpath + sub)

    def _scope(self, rel, pos):
        """The module path at offset pos of a file (inside the innermost inline `mod` block)."""
        inside = [path for a, b, path in self._parsed[rel][1] if a <= pos < b]
        return max(inside, key=len, default=self.files[rel])

    def resolve(self, segs, scope):
        """The file that a path (list of segments) used in module `scope` resolves into, or None."""
        first = segs[0]
        if first == "crate":
            full = tuple(segs[1:])
        elif first in ("self", "super"):
            base, k = scope, 1 if first == "self" else 0
            while k < len(segs) and segs[k] == "super":
                if not base:
                    return None
                base, k = base[:-1], k + 1
            full = base + tuple(segs[k:])
        elif scope + (first,) in self.modules:  # a child module in scope (2018 relative path)
            full = scope + tuple(segs)
        else:
            return None
        for k in range(len(full), -1, -1):
            if full[:k] in self.modules:
                return self.modules[full[:k]]
        return None

    def _scan(self, rel):
        """Collect the references of one file: use trees first, then inline paths elsewhere."""
        code, _ = self._parsed[rel]
        newlines = [i for i, c in enumerate(code) if c == "\n"]
        found = []  # (offset for the line number, segments, offset for the scope)
        masked = list(RESTRICTED_VIS.sub(lambda m: " " * len(m.group(0)), code))
        for m in USE_STMT.finditer(code):
            toks = [(t.group(0), m.start(1) + t.start()) for t in USE_TOKEN.finditer(m.group(1))]
            for path in expand_use(toks)[0]:
                if path:
                    found.append((path[-1][1], [s for s, _ in path], m.start()))
            for k in range(m.start(), m.end()):
                masked[k] = " " if masked[k] != "\n" else "\n"
        for m in INLINE_PATH.finditer("".join(masked)):
            segs = re.split(r"\s*::\s*", m.group(0).rstrip("! \t\n"))
            if m.group(1) and segs[0] not in ("crate", "self", "super"):
                continue  # a macro such as `tracing::info!`
            found.append((m.start(), segs, m.start()))
        for pos, segs, at in found:
            target = self.resolve(segs, self._scope(rel, at))
            if target is not None:
                line = bisect.bisect_left(newlines, pos) + 1
                self.refs.append((rel, line, "::".join(segs), target))

    def sccs(self):
        """The strongly connected components of the file graph that hold more than one file."""
        succ, reach = {}, {}
        for a, g in self.edges:
            succ.setdefault(a, set()).add(g)
        for f in self.files:  # reach[f]: every file f leads to (fine for a few hundred files)
            seen, todo = set(), [f]
            while todo:
                new = succ.get(todo.pop(), set()) - seen
                seen |= new
                todo += new
            reach[f] = seen
        comps = {tuple(sorted(g for g in reach[f] if f in reach[g])) for f in self.files}
        return sorted(list(c) for c in comps if len(c) > 1)

    def cycle_report(self):
        """Messages describing every cycle: its files, a shortest loop and one import per edge."""
        msgs = []
        for comp in self.sccs():
            inside, start = set(comp), comp[0]
            prev, queue, last = {start: None}, [start], None  # breadth-first back to start
            while last is None:
                v = queue.pop(0)
                for g in sorted(g for (a, g) in self.edges if a == v and g in inside):
                    if g == start:
                        last = v
                    elif g not in prev:
                        prev[g] = v
                        queue.append(g)
            loop = [start]
            while last is not None:
                loop, last = [last] + loop, prev[last]
            msg = [f"{self.dir}: cycle among {len(comp)} files: {' '.join(comp)}",
                   "  e.g. " + " -> ".join(loop)]
            msg += [f"  {self.dir}/{a}:{line}: -> {g} via `{text}`"
                    for (a, g), (line, text) in sorted(self.edges.items())
                    if a in inside and g in inside]
            msgs.append("\n".join(msg))
        return msgs


def read_layers(crate):
    """Parse CRATE_DIR/layers.txt; return ({module: layer index}, number of layers, errors)."""
    path, layer_of, errors, n = os.path.join(crate.dir, "layers.txt"), {}, [], 0
    if not os.path.isfile(path):
        return {}, 0, [f"{path}: missing (see --graph for the current imports)"]
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            names = line.split("#", 1)[0].split()
            if names and names[0].endswith(":"):
                names = names[1:]
            for name in names:
                if name in layer_of:
                    errors.append(f"{path}:{lineno}: `{name}` is listed twice")
                elif name not in crate.top:
                    errors.append(f"{path}:{lineno}: `{name}` is not a module of {crate.src}")
                layer_of.setdefault(name, n)
            n += bool(names)
    for name in crate.top:
        if name not in layer_of:
            errors.append(f"{path}: top-level module `{name}` is not listed in any layer")
    return layer_of, n, errors


def check(crate_dir):
    """Check one crate against its layers.txt; return (errors, summary line, warnings)."""
    crate = Crate(crate_dir)
    layer_of, n_layers, errors = read_layers(crate)
    for f, line, text, g in crate.refs:
        if g == "src/lib.rs" and f != g:
            errors.append(f"{crate.dir}/{f}:{line}: `{text}` goes through lib.rs: name the "
                          f"module that defines it")
            continue
        a, b = crate.files[f][:1], crate.files[g][:1]
        if a and b and a != b and a[0] in layer_of and b[0] in layer_of:
            if layer_of[b[0]] > layer_of[a[0]]:
                errors.append(f"{crate.dir}/{f}:{line}: upward import `{text}`: {a[0]} (layer "
                              f"{layer_of[a[0]]}) may not use {b[0]} (layer {layer_of[b[0]]})")
    errors += crate.cycle_report()
    return errors, (f"layers: {crate.dir} ok ({len(crate.files)} files, "
                    f"{len(crate.edges)} imports, {n_layers} layers)"), crate.warnings


def graph(crate_dir):
    """Print the file-level edges and cycles of a crate (no layers.txt needed)."""
    crate = Crate(crate_dir)
    for w in crate.warnings:
        print("warning:", w)
    print(f"graph: {crate.dir}: {len(crate.files)} files, {len(crate.refs)} references, "
          f"{len(crate.edges)} file edges")
    for (a, g), (line, text) in sorted(crate.edges.items()):
        print(f"  {a} -> {g}   ({a}:{line} `{text}`)")
    cycles = crate.cycle_report()
    print("\n".join(cycles) if cycles else f"{crate.dir}: no cycles")


CLEAN_EDGES = {"src/net/mod.rs -> src/net/conn.rs", "src/net/conn.rs -> src/base.rs",
               "src/net/mod.rs -> src/base.rs",
               "src/util.rs -> src/base.rs", "src/util.rs -> src/net/mod.rs",
               "src/app.rs -> src/util.rs", "src/app.rs -> src/net/mod.rs"}
SELF_TESTS = [  # (name, None if the crate must pass else texts its errors must contain, files)
    ("clean layered crate passes (exact edges)", None, {
        "layers.txt": "# bottom first\nL0: base\nL1: net  util\nL2: app\n",
        "src/lib.rs": "pub mod base;\npub mod net;\npub mod util;\npub mod app;\n"
                      "pub use base::Config;\n",
        "src/base.rs": "pub struct Config;\nfn f<'a>(s: &'a str) -> char { let q = '\"'; 'x' }\n",
        "src/net/mod.rs": "mod conn;\npub use conn::Conn;\nuse crate::base::Config;\n",
        "src/net/conn.rs": "use crate::base::Config;\npub struct Conn;\n#[cfg(test)]\n"
                           "mod tests {\n    use super::*;\n    use self::inner::X;\n"
                           "    mod inner { pub struct X; }\n    fn t() { super::Conn; }\n}\n",
        "src/util.rs": "use crate::{base::Config, net::{self, Conn as C}};\n"
                       "fn g() { tracing::info!(\"crate::app::x\"); crate::net::Conn; }\n"
                       "macro_rules! m { () => { $crate::app::run() } }\n",
        "src/app.rs": "use crate::util;\nfn f() { <crate::net::Conn as Default>::default(); }\n"}),
    ("upward import fails", ["upward import `crate::app::run`"], {
        "layers.txt": "base\napp\n", "src/lib.rs": "mod base;\nmod app;\n",
        "src/base.rs": "fn f() { crate::app::run(); }\n", "src/app.rs": "pub fn run() {}\n"}),
    ("two-file cycle in one folder fails", ["cycle among 2 files: src/net/a.rs src/net/b.rs"], {
        "layers.txt": "net\n", "src/lib.rs": "mod net;\n", "src/net.rs": "mod a;\nmod b;\n",
        "src/net/a.rs": "use super::b::B;\npub struct A;\n",
        "src/net/b.rs": "use crate::net::a::A;\npub struct B;\n"}),
    ("parent/child cycle through super:: fails", ["cycle among 2 files: src/net.rs src/net/c.rs"], {
        "layers.txt": "net\n", "src/lib.rs": "mod net;\n",
        "src/net.rs": "mod c;\npub use c::Conn;\npub struct Opts;\n",
        "src/net/c.rs": "use super::Opts;\npub struct Conn(Opts);\n"}),
    ("doc-comment, comment and string crate:: paths do not count", None, {
        "layers.txt": "base\napp\n", "src/lib.rs": "//! [`crate::app::A`]\nmod base;\nmod app;\n",
        "src/base.rs": "/// See [`crate::app::A`].\n//! crate::app\n/* crate::app::A /* n */ */\n"
                       "fn f() -> &'static str { r#\"crate::app::A\"# }\n",
        "src/app.rs": "pub struct A;\n"}),
    ("nested use group is parsed", ["`crate::a::b`: x", "`crate::a::c`: x"], {
        "layers.txt": "x\na\n", "src/lib.rs": "mod a;\nmod x;\n", "src/a.rs": "mod b;\nmod c;\n",
        "src/a/b.rs": "", "src/a/c.rs": "", "src/x.rs": "use crate::{a::{b, c}};\n"}),
    ("a path through a lib.rs re-export fails", ["`crate::Config` goes through lib.rs"], {
        "layers.txt": "base\napp\n", "src/lib.rs": "mod base;\nmod app;\npub use base::Config;\n",
        "src/base.rs": "pub struct Config;\n", "src/app.rs": "use crate::Config;\n"}),
    ("unlisted module fails", ["`extra` is not listed", "`orphan` is not listed"], {
        "layers.txt": "base\n", "src/lib.rs": "mod base;\nmod extra;\n",
        "src/base.rs": "", "src/extra.rs": "", "src/orphan/x.rs": ""}),
    ("unknown or twice-listed name fails", ["`ghost` is not a module", "`base` is listed twice"], {
        "layers.txt": "base ghost\nbase\n", "src/lib.rs": "mod base;\n", "src/base.rs": ""}),
]


def self_test():
    """Build fake crates in a temporary directory and check the verdicts; return the exit code."""
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, expect, files) in enumerate(SELF_TESTS):
            crate_dir = os.path.join(tmp, f"crate{k}")
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(crate_dir, rel)), exist_ok=True)
                with open(os.path.join(crate_dir, rel), "w", encoding="utf-8") as fh:
                    fh.write(text)
            errors = check(crate_dir)[0]
            ok = not errors if expect is None else all(any(x in e for e in errors) for x in expect)
            if k == 0:
                edges = {f"{a} -> {g}" for (a, g) in Crate(crate_dir).edges}
                ok = ok and edges == CLEAN_EDGES
                errors += [f"edges: {sorted(edges)}"] if edges != CLEAN_EDGES else []
            passed, failed = passed + ok, failed + (not ok)
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
            for e in errors if not ok or "-v" in sys.argv else []:
                print("     " + e)
    print(f"self-test: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def main(argv):
    """Command line entry point."""
    if argv[:1] == ["--self-test"]:
        return self_test()
    if argv[:1] == ["--graph"] and len(argv) == 2:
        graph(argv[1].rstrip("/"))
        return 0
    if not argv or any(a.startswith("-") for a in argv):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    status = 0
    for crate_dir in argv:
        errors, summary, warnings = check(crate_dir.rstrip("/"))
        for w in warnings:
            print("warning:", w, file=sys.stderr)
        for e in errors:
            print(e, file=sys.stderr)
        if errors:
            print(f"layers: {crate_dir.rstrip('/')}: {len(errors)} problem(s)", file=sys.stderr)
            status = 1
        else:
            print(summary)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
