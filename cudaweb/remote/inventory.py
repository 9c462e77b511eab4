"""Node lists from elsewhere, for `manage.py import_nodes`: a CSV file, an Ansible INI inventory, or the output of
`scontrol show nodes`. Each parser returns entries {name, address, port, user, labels, transport, slurm_name,
line}; nothing here touches the database."""

import csv
import io
import re
import shlex

from cudaweb.common import numbers
from cudaweb.nodes import validators

CSV_COLUMNS = ("name", "address", "port", "user", "labels", "transport")


class InventoryError(Exception):
    """A line that cannot be imported; the message starts with its line number."""


def _labels(text):
    return [label for label in re.split(r"[,;\s]+", text or "") if label]


def _entry(line, name, address="", port=22, user="", labels=(), transport="ssh", slurm_name=""):
    return {"line": line, "name": name, "address": address, "port": port, "user": user, "labels": list(labels),
            "transport": transport, "slurm_name": slurm_name}


def parse_csv(text):
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    if "name" not in header or "address" not in header:
        raise InventoryError("line 1: the header needs at least name,address (columns: %s)" % ",".join(CSV_COLUMNS))
    unknown = set(header) - set(CSV_COLUMNS)
    if unknown:
        raise InventoryError("line 1: unknown columns %s (columns: %s)" % (", ".join(sorted(unknown)),
                                                                           ",".join(CSV_COLUMNS)))
    entries = []
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as exc:  # a field over csv's limit (128 KiB), a NUL byte
            raise InventoryError("line %d: %s" % (reader.line_num + 1, exc)) from None  # the record it began
        row = {(k or "").strip(): (v or "").strip() if isinstance(v, str) else "" for k, v in row.items()}
        if not any(row.values()):
            continue
        line = reader.line_num
        port = row.get("port") or "22"
        if numbers.integer(port) is None:
            raise InventoryError("line %d: port %r is not a number" % (line, port))
        entries.append(_entry(line, row["name"], row.get("address", ""), numbers.integer(port), row.get("user", ""),
                              _labels(row.get("labels")), row.get("transport") or "ssh"))
    return entries


def parse_ansible(text):
    """An Ansible INI inventory: [group] sections of hosts (with ansible_host / ansible_port / ansible_user),
    [group:vars] and [group:children]. Every group a host is in, directly or through children, is a label."""
    hosts, group_vars, children, section = {}, {}, {}, ("group", "ungrouped")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        header = re.fullmatch(r"\[([^\]:]+)(?::(vars|children))?\]", line)
        if header:
            section = (header.group(2) or "group", header.group(1))
            continue
        kind, group = section
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventoryError("line %d: %s" % (number, exc))
        if kind == "vars":
            key, _, value = line.partition("=")
            group_vars.setdefault(group, {})[key.strip()] = value.strip().strip("'\"")
        elif kind == "children":
            children.setdefault(group, []).append(words[0])
        else:
            host = hosts.setdefault(words[0], {"line": number, "groups": [], "vars": {}})
            host["groups"].append(group)
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if not sep:
                    raise InventoryError("line %d: %r is not key=value" % (number, word))
                host["vars"][key] = value

    parents_of = {}
    for parent, kids in children.items():
        for kid in kids:
            parents_of.setdefault(kid, []).append(parent)

    def parents(group):
        """The group and every group above it through :children, nearest first; a loop or a chain thousands deep
        is walked without recursion."""
        found, queue = [group], [group]
        while queue:
            for parent in parents_of.get(queue.pop(0), ()):
                if parent not in found:
                    found.append(parent)
                    queue.append(parent)
        return found

    entries = []
    for name, host in hosts.items():
        groups = []
        for group in host["groups"]:
            groups += [g for g in parents(group) if g not in groups]
        variables = {}
        for group in reversed(groups):  # a host's own group wins over its parents, the host's vars over both
            variables.update(group_vars.get(group, {}))
        variables.update(host["vars"])
        port = variables.get("ansible_port", "22")
        if numbers.integer(str(port)) is None:
            raise InventoryError("line %d: ansible_port %r is not a number" % (host["line"], port))
        entries.append(_entry(host["line"], name, variables.get("ansible_host", name), numbers.integer(str(port)),
                              variables.get("ansible_user", ""),
                              [g for g in groups if g not in ("all", "ungrouped")]))
    return entries


_FIELD = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")


def _scontrol_fields(record):
    """`Key=value` pairs of one scontrol record; a value runs to the next ` Key=` (OS= and Reason= hold spaces)."""
    marks = list(_FIELD.finditer(record))
    return {m.group(1): record[m.end(): marks[i + 1].start() if i + 1 < len(marks) else len(record)].strip()
            for i, m in enumerate(marks)}


def parse_scontrol(text):
    """`scontrol show nodes` output (records separated by blank lines) or `scontrol -o show nodes` (a line each):
    NodeName is the name and the Slurm name, NodeAddr the address (else NodeHostName), Partitions the labels."""
    entries, record, start = [], [], None
    for number, raw in enumerate(text.splitlines() + [""], 1):
        if raw.startswith("NodeName=") and record:
            entries.append((start, " ".join(record)))
            record = []
        if not raw.strip():
            if record:
                entries.append((start, " ".join(record)))
            record = []
            continue
        if not record:
            start = number
        record.append(raw.strip())
    result = []
    for number, record in entries:
        fields = _scontrol_fields(record)
        if "NodeName" not in fields:
            raise InventoryError("line %d: a record without NodeName=" % number)
        name = fields["NodeName"]
        address = fields.get("NodeAddr") or fields.get("NodeHostName") or name
        partitions = fields.get("Partitions", "")
        result.append(_entry(number, name, address, 22, "", _labels(partitions if partitions != "(null)" else ""),
                             slurm_name=name))
    return result


PARSERS = {"csv": parse_csv, "ansible": parse_ansible, "scontrol": parse_scontrol}


def entry_check(entry):
    """The node rule (cudaweb.nodes.validators, as on the add-node page): a slug name, a user name, a port 1-65535, a
    host name or IP address (an IP in brackets loses them). Cleans the entry in place."""
    where = "line %d (%s)" % (entry["line"], str(entry["name"])[:100] or "no name")
    if entry["transport"] not in ("ssh", "local"):
        raise InventoryError("%s: transport %r is not ssh or local" % (where, entry["transport"][:20]))
    try:
        validators.name_check(entry["name"])
        entry["labels"] = validators.labels_clean(entry.get("labels", []))
        if entry["transport"] == "local":
            return
        if not entry["user"]:
            raise InventoryError("%s: no user (a user column, ansible_user, or --user)" % where)
        checked = validators.ssh_node_check(name=entry["name"], address=entry["address"], port=entry["port"],
                                            username=entry["user"])
    except validators.NodeFieldError as exc:
        raise InventoryError("%s: %s" % (where, exc)) from None
    entry["address"] = checked["address"]
