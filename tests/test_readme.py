"""The README: no paragraph said twice, "see X above/below" points the right way, every manage.py command it shows
exists, and every user its examples name is one it shows how to create (and the commands do create it)."""

import re
import shlex
from pathlib import Path

import pytest
from django.core.management import call_command, get_commands

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
SHINGLE = 14  # words: a run this long said twice is a copied passage, not a shared phrase


def _prose():
    """The README without its fenced code blocks, as (line number, line)."""
    lines, fenced = [], False
    for number, line in enumerate(README.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def _code_lines():
    """The lines of the fenced code blocks, a line continued with a backslash joined to the next."""
    lines, fenced, held = [], False, ""
    for line in README.splitlines():
        if line.startswith("```"):
            fenced, held = not fenced, ""
        elif fenced:
            if line.rstrip().endswith("\\"):
                held += line.rstrip()[:-1] + " "
                continue
            lines.append(held + line)
            held = ""
    return lines


def test_no_passage_of_the_readme_is_said_twice():
    words = [(number, word) for number, line in _prose() if not line.lstrip().startswith("|")
             for word in line.split()]
    seen, repeated = {}, []
    for i in range(len(words) - SHINGLE + 1):
        key = " ".join(word for _, word in words[i:i + SHINGLE])
        if key in seen and words[i][0] - seen[key] > 0:
            repeated.append((seen[key], words[i][0], key))
        seen.setdefault(key, words[i][0])
    assert repeated == []


def test_see_above_and_below_point_at_a_heading_on_that_side():
    headings = [(number, line.lstrip("#").strip().lower()) for number, line in _prose() if line.startswith("#")]
    wrong = []
    for number, line in _prose():
        for name, side in re.findall(r"see ([A-Z][\w -]*?) (above|below)", line):
            found = [at for at, heading in headings if heading.startswith(name.lower())]
            if not found or not any((at < number) if side == "above" else (at > number) for at in found):
                wrong.append((number, name, side, found))
    assert wrong == []


def _manage_commands():
    """Each manage.py command line of the code blocks, as words: from manage.py to the first shell operator (a `)`
    closing `$(`, a pipe, a redirection), its comment left out."""
    commands = []
    for line in _code_lines():
        if not re.search(r"(^|[\s(])\S*python3? manage\.py ", line):  # a shell line, not a path in prose
            continue
        lexer = shlex.shlex(line[line.index("manage.py"):], posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = []
        for word in lexer:
            if set(word) <= set("();<>|&"):
                break
            words.append(word)
        commands.append(words)
    return commands


def test_every_manage_py_command_the_readme_shows_exists():
    known = get_commands()
    shown = {words[1].strip("`.,:") for words in _manage_commands() if len(words) > 1}
    assert "changepassword" in shown and "set_role" in shown
    assert sorted(shown - set(known)) == []


USERS_NAMED_BY = {"set_role": 0, "api_token": 0, "changepassword": 0}


@pytest.mark.django_db
def test_every_user_the_examples_name_is_created_by_a_command_the_readme_shows():
    """Run, in README order, each user-creating command it shows; every other command naming a user finds it."""
    from django.contrib.auth import get_user_model

    created, named = {"admin"}, []  # admin: make run makes it
    for words in _manage_commands():
        command, arguments = words[1].strip("`.,:"), words[2:]
        if command not in USERS_NAMED_BY:
            continue
        user = arguments[USERS_NAMED_BY[command]]
        if command == "set_role" and "--create" in arguments:
            call_command(command, *arguments, stdout=open("/dev/null", "w"))
            assert get_user_model().objects.filter(username=user).exists()
            created.add(user)
        named.append((command, user, user in created))
    assert named and all(ok for _, _, ok in named), named
