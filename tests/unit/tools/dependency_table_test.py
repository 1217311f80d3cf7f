#!/usr/bin/python3
"""Tests of tools/dependency_table.py: a table that says what the build links passes, a row that
differs or is missing fails naming the folder, and --write puts the build's dependencies in."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools", "dependency_table.py")

DOC = """# Architecture

| folder | what lives there | depends on |
| --- | --- | --- |
| `base/` | the vocabulary | nothing |
| `kernels/` | the codecs | base |
| `tools/` | scripts | — |
"""


class DependencyTableTest(unittest.TestCase):
    def run_script(self, built, doc, *flags):
        with tempfile.TemporaryDirectory() as tmp:
            built_path = os.path.join(tmp, "dependency_table.txt")
            doc_path = os.path.join(tmp, "architecture.md")
            with open(built_path, "w", encoding="utf-8") as out:
                out.write(built)
            with open(doc_path, "w", encoding="utf-8") as out:
                out.write(doc)
            result = subprocess.run([sys.executable, SCRIPT, built_path, doc_path, *flags],
                                    capture_output=True, text=True, timeout=30, check=False)
            with open(doc_path, encoding="utf-8") as written:
                return result, written.read()

    def test_a_table_that_says_what_the_build_links_passes(self):
        result, _ = self.run_script("base: \nkernels: base\n", DOC)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_a_dependency_the_table_lacks_fails_naming_the_folder(self):
        result, _ = self.run_script("base: \nkernels: base, client\n", DOC)
        self.assertEqual(result.returncode, 1)
        self.assertIn("kernels/ depends on 'base, client' in the build", result.stderr)

    def test_a_folder_without_a_row_fails(self):
        result, _ = self.run_script("base: \nclient: base\nkernels: base\n", DOC)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no row for client/", result.stderr)

    def test_write_puts_the_builds_dependencies_in(self):
        result, written = self.run_script("base: \nkernels: base, client\n", DOC, "--write")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("| `kernels/` | the codecs | base, client |", written)
        self.assertIn("| `tools/` | scripts | — |", written)


if __name__ == "__main__":
    unittest.main()
