#!/usr/bin/python3
"""Tests of tools/check_sizes.py: it fails on a long function and on a long file, naming them, and
passes compliant sources that hold what fools a naive brace count (raw strings, comments,
character literals, member initializer lists, lambdas, classes)."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools", "check_sizes.py")


def body(lines):
    return "".join("  x += %d;\n" % i for i in range(lines))


# 80 lines from signature to closing brace: at the limit, so compliant.
COMPLIANT = textwrap.dedent("""\
    #include <string>

    namespace demo {
    namespace {

    // Braces in comments { and strings do not count: "}" '{' R"(}})" R"x(")}")x"
    const char* kText = R"json({"a": {"b": [1, 2]}})json";

    struct Widget {
      explicit Widget(int a) : a_(a), b_{a + 1} {}
      int get() const { return a_ + b_; }
      int a_;
      int b_;
    };

    const auto kSquare = [](int v) { return v * v; };

    }  // namespace

    int at_the_limit(int x) {
    """) + body(78) + textwrap.dedent("""\
    }

    TEST(Demo, Short) {
      EXPECT_EQ(at_the_limit(1), 1);
    }

    }  // namespace demo
    """)

LONG_FUNCTION = textwrap.dedent("""\
    namespace demo {

    class Engine {
     public:
      Engine() : speed_(0) {
    """) + body(80) + textwrap.dedent("""\
      }

     private:
      int speed_;
    };

    TEST_F(EngineTest, RunsForever) {
    """) + body(80) + textwrap.dedent("""\
    }

    }  // namespace demo
    """)


class CheckSizesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        os.makedirs(os.path.join(self.root, "gateway"))

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.root, "gateway", name), "w") as out:
            out.write(text)

    def run_check(self, *args):
        return subprocess.run([sys.executable, SCRIPT, "--root", self.root, *args],
                              capture_output=True, text=True, check=False)

    def test_compliant_sources_pass(self):
        self.write("compliant.cc", COMPLIANT)
        self.write("short.h", "#pragma once\n" + "// a line\n" * 598)
        result = self.run_check()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "")

    def test_long_function_and_test_body_are_named(self):
        self.write("long_function.cc", LONG_FUNCTION)
        result = self.run_check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("gateway/long_function.cc:5: function Engine has 82 lines (max 80)",
                      result.stdout)
        self.assertIn("gateway/long_function.cc:92: function TEST_F(EngineTest, RunsForever) "
                      "has 82 lines (max 80)", result.stdout)

    def test_long_file_is_named(self):
        self.write("long.cc", "// a line\n" * 601)
        result = self.run_check()
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout, "gateway/long.cc:1: file has 601 lines (max 600)\n")

    def test_limits_are_options(self):
        self.write("compliant.cc", COMPLIANT)
        result = self.run_check("--max-function-lines", "79", "--max-file-lines", "50")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout.splitlines(), [
            "gateway/compliant.cc:1: file has 105 lines (max 50)",
            "gateway/compliant.cc:20: function at_the_limit has 80 lines (max 79)",
        ])


if __name__ == "__main__":
    unittest.main()
