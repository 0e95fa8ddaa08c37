#!/usr/bin/env python3
"""Checks that no function in src/ is over 100 lines, except those docs/architecture.md lists
under "Functions over 100 lines" (a line `- `name` (`file`): why`). Prints each other one as
`file:line: name is N lines` and exits 1; a listed function that is no longer long is reported
too, so the list stays true."""
import pathlib
import re
import sys

LIMIT = 100
ROOT = pathlib.Path(__file__).resolve().parent.parent
SCOPE = re.compile(r'\b(namespace|struct|class|enum|union)\b[^;()]*$|extern\s+"C"\s*$')


def blank(text):
    """The text with comments, string and character literals (raw strings too) blanked out,
    its newlines kept, so that braces can be counted."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == 'R' else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            end = text.find(')' + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
        elif text.startswith('//', i):
            end = text.find('\n', i)
            end = n if end < 0 else end
        elif text.startswith('/*', i):
            end = text.find('*/', i)
            end = n if end < 0 else end + 2
        elif c in '"\'' and not (c == "'" and i > 0 and text[i - 1].isalnum()):
            end = i + 1
            while end < n and text[end] != c:
                end += 2 if text[end] == '\\' else 1
            end += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', text[i:end]))
        i = end
    return ''.join(out)


def signature_name(lines, start):
    """The name of the function whose body opens on line start: the first name called in its
    signature, which begins after the last line ending a statement or a block."""
    first = start
    while first > 0 and start - first < 8 and lines[first - 1].strip() and \
            not lines[first - 1].rstrip().endswith((';', '}', '{')):
        first -= 1
    head = ' '.join(lines[first:start + 1])
    head = head[:head.find('{')] if '{' in head else head
    name = re.search(r'([~\w:]+)\s*\(', head)
    return name.group(1) if name else '?'


def long_functions(path):
    """(first line, name, line count) of each function body over LIMIT lines."""
    lines = blank(path.read_text()).split('\n')
    stack, found = [], []  # stack: (kind, line) of each open brace
    for number, line in enumerate(lines):
        for col, c in enumerate(line):
            if c == '{':
                head = (line[:col].strip() or (lines[number - 1].strip() if number else ''))
                if any(kind == 'function' for kind, _ in stack):
                    kind = 'block'
                elif SCOPE.search(head) or head.endswith('=') or head.endswith(','):
                    kind = 'scope'
                else:
                    kind = 'function'
                stack.append((kind, number))
            elif c == '}' and stack:
                kind, start = stack.pop()
                if kind == 'function' and number - start + 1 > LIMIT:
                    found.append((start + 1, signature_name(lines, start), number - start + 1))
    return found


def listed():
    text = (ROOT / 'docs/architecture.md').read_text()
    section = text.split('Functions over 100 lines', 1)
    if len(section) < 2:
        return set()
    return set(re.findall(r'^- `([~\w:]+)` \(`(src/[\w/.]+)`\)', section[1], re.M))


def main():
    allowed, seen, bad = listed(), set(), False
    for path in sorted((ROOT / 'src').rglob('*')):
        if path.suffix not in ('.cpp', '.h'):
            continue
        rel = str(path.relative_to(ROOT))
        for line, name, count in long_functions(path):
            short = name.split('::')[-1]
            if (short, rel) in allowed:
                seen.add((short, rel))
                continue
            print(f'{rel}:{line}: {name} is {count} lines (split it, or list it with a reason '
                  'under "Functions over 100 lines" in docs/architecture.md)')
            bad = True
    for name, rel in sorted(allowed - seen):
        print(f'docs/architecture.md lists {name} ({rel}), which is no longer over {LIMIT} lines')
        bad = True
    if bad:
        sys.exit(1)
    print(f'check_function_length: no function in src/ over {LIMIT} lines but the listed ones')


main()
