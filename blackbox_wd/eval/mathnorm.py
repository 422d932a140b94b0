"""MATH-500 answer extraction, LaTeX normalisation and equivalence.

Pinned procedure (Hendrycks et al. 2021 ``is_equiv``/``_strip_string``, extended in the spirit of
the PRM800K / Minerva graders):

1. ``extract_answer``: the content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced
   braces; when there is none, the last number in the text (``-1,234.5``, ``3/4``).
2. ``normalize``: drop ``\\left``/``\\right``, thin spaces (``\\! \\, \\; \\:``), ``\\displaystyle``,
   ``$``, ``\\%``, degrees (``^\\circ``), ``\\text{ units}`` (Hendrycks: a ``\\text{`` opening with a
   space ends the answer) and common unit words after a number; unwrap ``\\text{..}``,
   ``\\mathrm{..}``, ``\\mbox{..}``, ``\\textbf{..}``; ``\\dfrac``/``\\tfrac`` -> ``\\frac``; fix
   ``\\frac12``, ``\\sqrt2``, ``a/b``, ``.5``; drop a leading ``x =``; thousands separators; all
   whitespace; a trailing ``.``.
3. ``is_equiv``: equal normalised strings; else, when both are bracketed/comma lists, element-wise
   (ordered inside matching brackets, bracket types must agree; bare lists as multisets); else a
   small LaTeX -> sympy converter (``\\frac``, ``\\sqrt``, ``^``, ``\\pi``, ``\\cdot``, ``\\times``,
   trig/log, implicit multiplication; ``i`` is the imaginary unit and ``e`` Euler's number) and a
   numeric comparison (relative tolerance 1e-6; with free symbols, at 5 fixed random points).
   ``sympy.parsing.latex`` is not used: it needs antlr4 4.11 exactly, and 4.13 is installed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import sympy
from sympy.parsing.sympy_parser import (convert_xor, implicit_multiplication_application, parse_expr,
                                        standard_transformations)

REL_TOL = 1e-6

# ---------------------------------------------------------------------------------------------
# Extraction


def _brace_group(s: str, start: int) -> tuple[str, int] | None:
    """Content of the balanced {...} starting at s[start] == '{', and the index after it."""
    if start >= len(s) or s[start] != "{":
        return None
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "{":
            depth += 1
        elif s[i] == "}":
            depth -= 1
            if depth == 0:
                return s[start + 1 : i], i + 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} / \\fbox{...} (balanced braces), or of ``\\boxed x``."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    j = idx + (len("\\boxed") if text.startswith("\\boxed", idx) else len("\\fbox"))
    while j < len(text) and text[j] == " ":
        j += 1
    if j < len(text) and text[j] == "{":
        group = _brace_group(text, j)
        return group[0] if group else None
    m = re.match(r"[^\s$]+", text[j:])  # "\boxed 5"
    return m.group(0) if m else None


_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def last_number(text: str) -> str | None:
    """The last number in the text, thousands separators removed."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def extract_answer(text: str) -> str | None:
    """Final answer of a solution: last \\boxed{...}, else the last number; None when neither."""
    boxed = last_boxed(text)
    return boxed if boxed is not None else last_number(text)


# ---------------------------------------------------------------------------------------------
# Normalisation

_UNITS = (r"units?|cm|centimeters?|centimetres?|meters?|metres?|km|kilometers?|mm|inch(?:es)?|feet|foot|ft|"
          r"yards?|miles?|mph|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|years?|"
          r"dollars?|cents?|degrees?|radians?|pounds?|lbs?|ounces?|oz|grams?|kg|liters?|litres?|"
          r"gallons?|square|sq|cubic|people|students|ways|points|percent")
_UNIT_TAIL = re.compile(rf"(?<=[\d}}])\s*(?:\\?(?:{_UNITS}))(?:\^\{{?[23]\}}?|\^[23])?(?:\s+(?:{_UNITS}))*\s*$")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|textnormal|mbox|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")


def _fix_fracs(s: str) -> str:
    r"""\frac12 -> \frac{1}{2}, \frac1{x} -> \frac{1}{x}, \frac{x}2 -> \frac{x}{2}."""
    s = re.sub(r"\\frac(\w)(\w)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac(\w)\{", r"\\frac{\1}{", s)
    return re.sub(r"\\frac\{([^{}]*)\}(\w)", r"\\frac{\1}{\2}", s)


def normalize(answer: str) -> str:
    """Canonical string form of a LaTeX final answer (see the module docstring)."""
    s = answer.strip().replace("\n", " ")
    for _ in range(3):  # nested \boxed left inside an answer
        inner = last_boxed(s)
        if inner is None or not s.startswith(("\\boxed", "\\fbox")):
            break
        s = inner.strip()
    s = re.sub(r"\\(?:left|right)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\[!,;:]", "", s)
    s = s.replace("\\displaystyle", "").replace("\\ ", " ").replace("~", " ")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°", "", s)
    s = s.replace("\\$", "").replace("$", "").replace("\\%", "").replace("%", "")
    # Hendrycks: "\text{ " (with a space) starts units: cut there, unless nothing is left.
    if "\\text{ " in s and s.split("\\text{ ")[0].strip():
        s = s.split("\\text{ ")[0]
    prev = None
    while prev != s:
        prev = s
        s = _TEXT_CMD.sub(r"\1", s)
    s = _UNIT_TAIL.sub("", s.strip())
    s = s.replace("\\leq", "\\le").replace("\\geq", "\\ge").replace("≤", "\\le").replace("≥", "\\ge")
    s = re.sub(r"\s+", "", s).replace("{,}", "")
    s = s.rstrip(".")
    s = re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)
    s = _fix_fracs(s)
    if re.fullmatch(r"-?\d+/\d+", s):
        num, den = s.split("/")
        s = f"\\frac{{{num}}}{{{den}}}"
    s = re.sub(r"^[a-zA-Z]\\in(?=[\[(])", "", s)  # "x \in [a, b]"
    m = re.fullmatch(r"[a-zA-Z](?:_\{?\w+\}?)?=(.+)", s)
    if m and "=" not in m.group(1):
        s = m.group(1)
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"(?<![\d}])\.(\d)", r"0.\1", s)
    m = re.fullmatch(r"\(([A-Ea-e])\)", s)  # multiple choice "(C)"
    if m:
        s = m.group(1).upper()
    return s


# ---------------------------------------------------------------------------------------------
# LaTeX -> sympy

_FUNCS = {"sin", "cos", "tan", "sec", "csc", "cot", "arcsin", "arccos", "arctan", "sinh", "cosh",
          "tanh", "log", "ln", "exp"}
_SYMPY_NAMES = {"sqrt", "root", "pi", "oo", "sin", "cos", "tan", "sec", "csc", "cot", "asin", "acos",
                "atan", "sinh", "cosh", "tanh", "log", "exp", "E", "I"}
_RENAME = {"ln": "log", "arcsin": "asin", "arccos": "acos", "arctan": "atan"}
_COMMANDS = {"frac", "sqrt", "pi", "infty", "cdot", "times", "div"} | _FUNCS
_COMMANDS_LONGEST_FIRST = sorted(_COMMANDS, key=len, reverse=True)
_SAFE = re.compile(r"[A-Za-z0-9_+\-*/().! ]*")
_TRANSFORMS = standard_transformations + (implicit_multiplication_application, convert_xor)


class _Unparsable(Exception):
    pass


def _arg(s: str, i: int) -> tuple[str, int]:
    """A command's argument at s[i]: a {group} or a single character."""
    if i >= len(s):
        raise _Unparsable("missing argument")
    if s[i] == "{":
        group = _brace_group(s, i)
        if group is None:
            raise _Unparsable("unbalanced braces")
        return group
    if s[i] == "\\":
        m = re.match(r"\\[a-zA-Z]+", s[i:])
        if m:
            return m.group(0), i + len(m.group(0))
    return s[i], i + 1


def _to_python(s: str) -> str:
    """Python/sympy expression text for a normalised LaTeX expression (no spaces)."""
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            m = re.match(r"\\([a-zA-Z]+)", s[i:])
            if not m:
                raise _Unparsable(s[i : i + 2])
            cmd = m.group(1)
            if cmd not in _COMMANDS:  # spaces are gone: "\pir" is "\pi r"
                cmd = next((k for k in _COMMANDS_LONGEST_FIRST if cmd.startswith(k)), cmd)
            i += 1 + len(cmd)
            if cmd == "frac":
                num, i = _arg(s, i)
                den, i = _arg(s, i)
                out.append(f"(({_to_python(num)})/({_to_python(den)}))")
            elif cmd == "sqrt":
                if i < len(s) and s[i] == "[":
                    close = s.find("]", i)
                    if close < 0:
                        raise _Unparsable("unclosed [")
                    index = s[i + 1 : close]
                    body, i = _arg(s, close + 1)
                    out.append(f" root({_to_python(body)},{_to_python(index)})")
                else:
                    body, i = _arg(s, i)
                    out.append(f" sqrt({_to_python(body)})")
            elif cmd == "pi":
                out.append(" pi ")
            elif cmd == "infty":
                out.append(" oo ")
            elif cmd in ("cdot", "times"):
                out.append("*")
            elif cmd == "div":
                out.append("/")
            elif cmd in _FUNCS:
                out.append(f" {_RENAME.get(cmd, cmd)} ")
            else:
                raise _Unparsable(f"\\{cmd}")
        elif c == "^":
            arg, i = _arg(s, i + 1)
            out.append(f"**({_to_python(arg)})")
        elif c == "_":
            arg, i = _arg(s, i + 1)
            if not re.fullmatch(r"\w+", arg):
                raise _Unparsable("subscript")
            out.append(f"_{arg}")
        elif c == "{":
            group = _brace_group(s, i)
            if group is None:
                raise _Unparsable("unbalanced braces")
            out.append(f"({_to_python(group[0])})")
            i = group[1]
        elif c == "[" or c == "]":
            raise _Unparsable("bracket")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _huge_power(expr: sympy.Basic) -> bool:
    """An unevaluated expression with an exponent over 1000 or a power in a power's exponent."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Pow):
            e = node.exp
            if (e.is_Number and abs(e) > 1000) or any(isinstance(x, sympy.Pow) for x in sympy.preorder_traversal(e)):
                return True
    return False


def latex_to_sympy(s: str) -> sympy.Expr | None:
    """A sympy expression for a normalised LaTeX scalar answer, or None when it cannot be parsed."""
    try:
        py = _to_python(s)
    except (_Unparsable, RecursionError):
        return None
    if not py or not _SAFE.fullmatch(py) or "__" in py:
        return None
    for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", py):
        if name not in _SYMPY_NAMES and not re.fullmatch(r"[A-Za-z](?:_[A-Za-z0-9]+)?", name):
            # unknown multi-letter word: implicit multiplication would split it into letters
            if not re.fullmatch(r"[A-Za-z]{1,3}", name):
                return None
    local = {"i": sympy.I, "e": sympy.E, "E": sympy.E, "I": sympy.I, "pi": sympy.pi, "oo": sympy.oo,
             "root": sympy.root, "sqrt": sympy.sqrt, "log": sympy.log}
    try:
        if _huge_power(parse_expr(py, local_dict=local, transformations=_TRANSFORMS, evaluate=False)):
            return None
        expr = parse_expr(py, local_dict=local, transformations=_TRANSFORMS)
    except Exception:  # sympy raises many kinds on odd input
        return None
    return expr if isinstance(expr, sympy.Basic) else None


def _close(a: complex, b: complex) -> bool:
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def sympy_equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Numeric equality of two expressions (at 5 fixed random points when they have symbols)."""
    try:
        if a.has(sympy.oo, -sympy.oo, sympy.zoo) or b.has(sympy.oo, -sympy.oo, sympy.zoo):
            return bool(a == b)
        symbols = sorted(a.free_symbols | b.free_symbols, key=lambda x: x.name)
        if not symbols:
            return _close(complex(sympy.N(a)), complex(sympy.N(b)))
        rng = random.Random(0)
        checked = 0
        for _ in range(5):
            point = {x: rng.uniform(0.5, 2.0) for x in symbols}
            va, vb = complex(sympy.N(a.subs(point))), complex(sympy.N(b.subs(point)))
            if not _close(va, vb):
                return False
            checked += 1
        return checked > 0
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return False


# ---------------------------------------------------------------------------------------------
# Equivalence

_OPEN = "([{"
_CLOSE = ")]}"


def _split_top(s: str) -> list[str]:
    """Split on commas that are not inside (), [], {}."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unbracket(s: str) -> tuple[str | None, str]:
    """('(' / '[' / '{' pair, inner) when s is one bracketed group holding a top-level comma."""
    t = s.replace("\\{", "{").replace("\\}", "}")
    if len(t) >= 2 and t[0] in _OPEN and t[-1] in _CLOSE:
        inner = t[1:-1]
        depth = 0
        for ch in inner:  # the outer brackets must enclose everything
            depth += ch in _OPEN
            depth -= ch in _CLOSE
            if depth < 0:
                return None, s
        if len(_split_top(inner)) > 1:
            return t[0] + t[-1], inner
    return None, s


def _expand_pm(s: str) -> str:
    """'a\\pm b' -> 'a+b,a-b' (a bare list of the two solutions), once, at the top level."""
    if s.count("\\pm") != 1 or "," in s:
        return s
    left, right = s.split("\\pm")
    return f"{left}+{right},{left}-{right}" if right else s


def _scalar_equiv(a: str, b: str) -> bool:
    if a == b:
        return True
    ea, eb = latex_to_sympy(a), latex_to_sympy(b)
    return ea is not None and eb is not None and sympy_equal(ea, eb)


def is_equiv(pred: str | None, ref: str | None) -> bool:
    """True when two LaTeX answers are equivalent after normalisation (see the module docstring)."""
    if pred is None or ref is None:
        return False
    a, b = normalize(pred), normalize(ref)
    if not a or not b:
        return False
    if a == b:
        return True
    a, b = _expand_pm(a), _expand_pm(b)
    ba, ia = _unbracket(a)
    bb, ib = _unbracket(b)
    pa, pb = _split_top(ia), _split_top(ib)
    if len(pa) > 1 or len(pb) > 1:
        if len(pa) != len(pb):
            return False
        if ba and bb:
            if ba != bb:
                return False
            return all(_scalar_equiv(x, y) for x, y in zip(pa, pb))
        if ba or bb:  # one bracketed: compare in order
            return all(_scalar_equiv(x, y) for x, y in zip(pa, pb))
        remaining = list(pb)  # bare lists of solutions: order does not matter
        for x in pa:
            hit = next((k for k, y in enumerate(remaining) if _scalar_equiv(x, y)), None)
            if hit is None:
                return False
            remaining.pop(hit)
        return True
    return _scalar_equiv(a, b)


def math_correct(response: str, answers: Sequence[str]) -> bool:
    """The response's extracted final answer is equivalent to any reference answer."""
    pred = extract_answer(response)
    return pred is not None and any(is_equiv(pred, ref) for ref in answers)
