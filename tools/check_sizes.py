#!/usr/bin/python3
"""Checks the size rule of the C++ and CUDA sources: no file over 600 lines, no function over 80.

Long files and long functions hide more than one job; the limit keeps each piece small enough to
read in one go. A function is counted from the line where its signature starts to its closing
brace: free functions, methods, constructors (also those defined in class bodies) and test bodies
(TEST(...) {...}). Lambdas and local classes count as part of the function that holds them.

The sources are clang-formatted, so matching braces is enough: comments, string and character
literals and preprocessor lines are blanked first, then each `{` outside a function is classified
by what precedes it. Prints `path:line: what` for each breach; exits 1 if there is any.
"""

import argparse
import os
import re
import sys

SOURCE_DIRS = ("base", "kernels", "gateway", "control", "common", "client", "cli", "bench",
               "tests", "tools")
EXTENSIONS = (".h", ".cc", ".cu", ".cuh")
SKIPPED_DIRS = ("node_modules", "corpus", "corpora", "generated")
GENERATED_MARKERS = ("DO NOT EDIT", "@generated")

IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
RAW_PREFIXES = ("R", "u8R", "uR", "UR", "LR")
QUALIFIERS = frozenset(("const", "volatile", "noexcept", "override", "final", "mutable", "&",
                        "&&", "throw"))
ACCESS = frozenset(("public", "private", "protected"))
CLASS_KEYS = frozenset(("class", "struct", "union", "enum"))
TEST_MACROS = frozenset(("TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TYPED_TEST_P"))
TOKEN_RE = re.compile(r"[A-Za-z_0-9]+|::|->|&&|\.\.\.|\S")


def blank(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces.

    Newlines are kept, so offsets and line numbers stay those of the original file.
    """
    out = list(text)
    i, n = 0, len(text)
    line_start = True

    def erase(begin, end):
        for k in range(begin, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            end = i
            while end < n and (text[end] != "\n" or text[end - 1] == "\\"):
                end += 1
            erase(i, end)
            i = end
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            erase(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            erase(i, end)
            i = end
        elif c == '"':
            i = blank_string(text, i, erase)
        elif c == "'" and not is_digit_separator(text, i):
            i = blank_quoted(text, i, "'", erase)
        else:
            i += 1
    return "".join(out)


def blank_string(text, i, erase):
    """Blanks the string literal whose opening quote is at i; returns the offset past it."""
    start = i - 1
    while start >= 0 and text[start] in IDENT_CHARS:
        start -= 1
    prefix = text[start + 1:i]
    if prefix in RAW_PREFIXES:
        paren = text.find("(", i)
        closing = ")" + text[i + 1:paren] + '"'
        end = text.find(closing, paren)
        end = len(text) if end < 0 else end + len(closing)
        erase(i + 1, end - 1)
        return end
    return blank_quoted(text, i, '"', erase)


def blank_quoted(text, i, quote, erase):
    """Blanks an ordinary string or character literal opened at i; returns the offset past it."""
    j = i + 1
    while j < len(text) and text[j] != quote and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    erase(i + 1, j)
    return j + 1


def is_digit_separator(text, i):
    """Whether the quote at i separates digits (1'000) rather than opening a character literal."""
    j = i - 1
    while j >= 0 and (text[j] in IDENT_CHARS or text[j] in ".'"):
        j -= 1
    return j + 1 < i and text[j + 1].isdigit()


class Token:
    __slots__ = ("text", "offset", "inner")

    def __init__(self, text, offset, inner=None):
        self.text = text
        self.offset = offset
        self.inner = inner  # for a collapsed (...) or [...] group: the tokens inside


def tokenize(code):
    return [Token(m.group(), m.start()) for m in TOKEN_RE.finditer(code)]


def collapse(tokens, i, opening, closing):
    """Collapses the group opened at tokens[i]; returns (group token, index past its end)."""
    depth, j = 0, i
    while j < len(tokens):
        if tokens[j].text == opening:
            depth += 1
        elif tokens[j].text == closing:
            depth -= 1
            if depth == 0:
                break
        j += 1
    return Token(opening + closing, tokens[i].offset, tokens[i + 1:j]), j + 1


def drop_template_prefix(head):
    """Drops a leading `template <...>` (angle brackets only balance reliably there)."""
    while len(head) >= 2 and head[0].text == "template" and head[1].text == "<":
        depth, j = 0, 1
        while j < len(head):
            depth += {"<": 1, ">": -1}.get(head[j].text, 0)
            j += 1
            if depth == 0:
                break
        head = head[j:]
    return head


def parameter_list(head):
    """Index in head of the parameter list of a function whose body follows, or None."""
    texts = [t.text for t in head]
    if "()" not in texts:
        return None
    for k, text in enumerate(texts):
        if text == ":" and k > 0 and (texts[k - 1] == "()" or texts[k - 1] in QUALIFIERS):
            # A constructor's member initializer list: the body follows an initializer's ) or }.
            if texts[-1] not in ("()", "{}", "..."):
                return None
            return signature_params(texts[:k])
    for cut in ("->", "requires"):
        if cut in texts[texts.index("()"):]:
            texts = texts[:len(texts) - texts[::-1].index(cut) - 1]
    return signature_params(texts)


def signature_params(texts):
    """Index of the parameter list that ends texts, past qualifiers and annotations, or None."""
    end = len(texts)
    while end > 1:
        if texts[end - 1] in QUALIFIERS:
            end -= 1
        elif texts[end - 1] == "()" and end > 2 and is_annotation(texts[end - 2]) and \
                texts[end - 3] in ("()", ) + tuple(QUALIFIERS):
            end -= 2  # noexcept(...), throw(...) or a macro such as GRADGATE_REQUIRES(mu)
        else:
            break
    if end == 0 or texts[end - 1] != "()":
        return None
    if end > 1 and texts[end - 2] == "requires":
        return None  # a requires-expression, not a body
    return end - 1


def is_annotation(text):
    return text in QUALIFIERS or re.fullmatch(r"[A-Z][A-Z0-9_]+", text) is not None


def opens_scope(words):
    """Whether a `{` after `words` opens a namespace, an extern "C" block or a class body."""
    if words[:1] == ["namespace"] or words[:2] == ["inline", "namespace"]:
        return True
    if words[:2] == ["extern", '"']:
        return True
    return bool(CLASS_KEYS.intersection(words)) and "=" not in words


def function_name(head, params):
    before = [t.text for t in head[:params]]
    if before and before[-1] in TEST_MACROS:
        args = "".join(t.text + (" " if t.text == "," else "") for t in head[params].inner)
        return "%s(%s)" % (before[-1], args)
    if before and before[-1] == "[]":
        return "lambda"
    start = before.index("operator") if "operator" in before else len(before) - 1
    if start > 0 and before[start - 1] == "~":
        start -= 1
    while start > 1 and before[start - 1] == "::":
        start -= 2  # the class that qualifies a method defined out of line
    return "".join(before[max(start, 0):]) or "lambda"


class Scanner:
    """Finds each function body of one file: (first line, last line, name)."""

    def __init__(self, code):
        self.code = code
        self.tokens = tokenize(code)
        self.functions = []

    def line(self, offset):
        return self.code.count("\n", 0, offset) + 1

    def scan(self):
        end = self.scope(0)
        if end < len(self.tokens):
            raise ValueError("unbalanced braces near line %d" %
                             self.line(self.tokens[end].offset))
        return self.functions

    def scope(self, i):
        """Reads a namespace or class scope from tokens[i]; returns the index of its `}` (of the
        end, for the file's own scope)."""
        head = []
        while i < len(self.tokens):
            text = self.tokens[i].text
            if text == "}":
                return i
            if text in ("(", "["):
                group, i = collapse(self.tokens, i, text, ")" if text == "(" else "]")
                head.append(group)
            elif text == ";" or (text == ":" and head and head[-1].text in ACCESS):
                head, i = [], i + 1
            elif text == "{":
                i, head = self.brace(head, i)
            else:
                head.append(self.tokens[i])
                i += 1
        return i

    def brace(self, head, i):
        """Handles the `{` at tokens[i] after head; returns (index past its block, new head)."""
        sig = drop_template_prefix(head)
        words = [t.text for t in sig]
        params = parameter_list(sig)
        if params is not None:
            end = self.skip_block(i)
            self.functions.append((self.line(head[0].offset), self.line(self.tokens[end].offset),
                                   function_name(sig, params)))
            return end + 1, []
        if opens_scope(words):
            end = self.scope(i + 1)
            if end == len(self.tokens):
                raise ValueError("unclosed brace at line %d" % self.line(self.tokens[i].offset))
            return end + 1, []
        end = self.skip_block(i)  # a brace initializer: part of the declaration it is in
        return end + 1, head + [Token("{}", self.tokens[i].offset)]

    def skip_block(self, i):
        """Returns the index of the `}` that closes the `{` at tokens[i]."""
        depth = 0
        for j in range(i, len(self.tokens)):
            text = self.tokens[j].text
            depth += 1 if text == "{" else -1 if text == "}" else 0
            if depth == 0:
                return j
        raise ValueError("unclosed brace at line %d" % self.line(self.tokens[i].offset))


def source_files(root):
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not skipped_dir(dirpath, d))
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, name)


def skipped_dir(parent, name):
    return (name.startswith((".", "build")) or name.startswith(SKIPPED_DIRS) or
            os.path.exists(os.path.join(parent, name, "CMakeCache.txt")))


def check_file(path, text, args):
    """Returns the `line: what` findings of one file."""
    findings = []
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > args.max_file_lines:
        findings.append((1, "file has %d lines (max %d)" % (lines, args.max_file_lines)))
    try:
        functions = Scanner(blank(text)).scan()
    except ValueError as error:
        return findings + [(1, "cannot scan: %s" % error)]
    for first, last, name in functions:
        length = last - first + 1
        if length > args.max_function_lines:
            findings.append((first, "function %s has %d lines (max %d)" %
                             (name, length, args.max_function_lines)))
    return findings


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."),
                        help="the project's source directory (default: this script's parent)")
    parser.add_argument("--max-file-lines", type=int, default=600)
    parser.add_argument("--max-function-lines", type=int, default=80)
    parser.add_argument("files", nargs="*", help="check only these files (default: all sources)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    breaches = 0
    for path in args.files or source_files(root):
        with open(path, encoding="utf-8", errors="replace") as source:
            text = source.read()
        if any(marker in text[:2000] for marker in GENERATED_MARKERS):
            continue
        for line, what in check_file(path, text, args):
            print("%s:%d: %s" % (os.path.relpath(path, root), line, what))
            breaches += 1
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
