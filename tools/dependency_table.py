#!/usr/bin/python3
"""Checks the "depends on" column of docs/architecture.md's table of folders against the build
graph (the build's dependency_table.txt, written by cmake/GradgateDependencyTable.cmake), or with
--write puts the build's dependencies into it. Exit status 1 names every row that differs.

    tools/dependency_table.py BUILD/dependency_table.txt docs/architecture.md [--write]
"""
import argparse
import re
import sys

ROW = re.compile(r"^\| `(?P<folder>[^`]+)/` \|(?P<middle>.*)\| (?P<deps>[^|]*) \|$")


def built_table(path):
    table = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            folder, _, deps = line.rstrip("\n").partition(": ")
            table[folder.rstrip(":")] = deps.strip() or "nothing"
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("built")
    parser.add_argument("doc")
    parser.add_argument("--write", action="store_true", help="rewrite the doc's column")
    args = parser.parse_args()
    built = built_table(args.built)
    with open(args.doc, encoding="utf-8") as doc:
        lines = doc.read().split("\n")
    problems, seen = [], set()
    for number, line in enumerate(lines):
        row = ROW.match(line)
        if not row or row.group("folder") not in built:
            continue
        folder = row.group("folder")
        seen.add(folder)
        want = built[folder]
        if row.group("deps") != want:
            problems.append(f"{args.doc}:{number + 1}: {folder}/ depends on '{want}' in the build, "
                            f"the table says '{row.group('deps')}'")
            lines[number] = f"| `{folder}/` |{row.group('middle')}| {want} |"
    for folder in sorted(set(built) - seen):
        problems.append(f"{args.doc}: no row for {folder}/, which the build has (depends on "
                        f"{built[folder]})")
    if args.write:
        with open(args.doc, "w", encoding="utf-8") as doc:
            doc.write("\n".join(lines))
        problems = [p for p in problems if ": no row for " in p]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
