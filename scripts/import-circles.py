#!/usr/bin/env python3
"""Import circles between the modules of one crate: the strongly connected components of the
graph "module A names module B" (a `crate::`, `super::` or child-module path outside comments
and `#[cfg(test)]` modules), largest first.

A circle is a set of files none of which can be read, tested or moved without the others.

    scripts/import-circles.py [SRC_DIR] [--max N] [--edges]

SRC_DIR defaults to crates/ctxgc-core/src. --max N exits 1 when the largest circle has more
than N files; --edges prints, for the largest circle, which of its modules each one names.
"""

import os
import re
import sys


def strip_comments_and_tests(text):
    text = re.sub(r"//.*", "", text)
    out, i = [], 0
    opening = re.compile(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod \w+\s*\{")
    while True:
        m = opening.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        j, depth = m.end(), 1
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j


def modules(src):
    found = {}
    for folder, _, files in os.walk(src):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, src)[:-3]
                module = rel.replace("/mod", "").replace("/", "::")
                found["" if module in ("lib", "main") else module] = (
                    strip_comments_and_tests(open(path, encoding="utf-8").read())
                )
    return found


def graph(found):
    names = set(found)

    def resolve(path):
        parts = path.split("::")
        for n in range(len(parts), 0, -1):
            candidate = "::".join(parts[:n])
            if candidate in names:
                return candidate
        return None

    edges = {m: set() for m in names}
    for module, text in found.items():
        targets = re.findall(r"crate::((?:\w+::)*\w+)", text)
        for group in re.findall(r"crate::\{([^;]*)\}", text):
            targets += re.findall(r"\w+(?:::\w+)*", group)
        parent = module.split("::")[:-1]
        targets += [
            "::".join(parent + p.split("::"))
            for p in re.findall(r"super::((?:\w+::)*\w+)", text)
        ]
        prefix = module + "::" if module else ""
        for child in names:
            rest = child[len(prefix) :]
            if child.startswith(prefix) and child != module and "::" not in rest:
                if re.search(r"(?<![\w:])(self::)?" + rest + r"::", text):
                    targets.append(child)
        for target in targets:
            resolved = resolve(target)
            if resolved is not None and resolved != module:
                edges[module].add(resolved)
    return edges


def circles(edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    src = args[0] if args and not args[0].isdigit() else "crates/ctxgc-core/src"
    limit = None
    if "--max" in argv:
        limit = int(argv[argv.index("--max") + 1])
    edges = graph(modules(src))
    found = [c for c in circles(edges) if len(c) > 1]
    largest = found[0] if found else []
    print(f"{src}: {len(edges)} files, {len(found)} circles, largest {len(largest)} files")
    for component in found:
        print(f"  {len(component)}: {' '.join(m or 'lib' for m in component)}")
    if "--edges" in argv:
        members = set(largest)
        for module in largest:
            named = sorted(e for e in edges[module] if e in members)
            print(f"  {module or 'lib'} -> {' '.join(named)}")
    return 1 if limit is not None and len(largest) > limit else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
