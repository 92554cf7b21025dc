#!/usr/bin/env python3
"""Checks the PromQL of Grafana dashboards and Prometheus rule files against what gpufleet exports.

Usage: check_grafana.py [DASHBOARD.json ...] [--rules RULES.yml ...]
                        [--metrics FILE] [--prometheus URL] [--strict-labels] [-v]

Collects every query: the `expr` of each panel target (rows and nested panels included), the
queries of templating variables (label_values(...), query_result(...)) and annotations of each
dashboard, and the `expr` of each alerting and recording rule of each --rules file (plus the
literal queries in its annotation templates: {{ query "..." }}, {{ printf "..." ... | query }}).
Template variables are replaced the way Grafana would before a query is sent: $var, ${var},
${var:format} and [[var]] by the variable's current value (multiple values joined with |), or its
"All" value, or .*; $__rate_interval, $__interval and the like by 1m; $__range by 1h.

Then, for each query:
  - always: brackets balance, and every variable it names is defined (Grafana leaves an unknown
    $name in the query, and Prometheus then fails to parse it);
  - with --metrics FILE (a saved /metrics page, Prometheus text format): every metric name it
    references is in that exposition. A histogram or summary's series are NAME_bucket, NAME_sum
    and NAME_count; the base NAME of a histogram has no series of its own and is reported.
    The names of --rules recording rules and Prometheus's own series (up, ALERTS, scrape_*)
    count as present. With --strict-labels, each label a selector matches on must also appear on
    some sample of that metric (job and instance, which Prometheus adds, excepted);
  - with --prometheus URL: URL/api/v1/query answers it without a parse or evaluation error.

Dashboards are also checked for hard-coded datasources: a panel or target should name its
Prometheus datasource through a variable (${datasource}), so that the dashboard imports anywhere.

Prints one line per problem, naming the file and the panel (or rule) and query, and exits 1 when
there is any; exits 0 when clean and 2 on bad usage or an unreadable file. Python 3 standard
library only.
"""

import argparse
import difflib
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

# Values for Grafana's built-in variables.
BUILTIN_VARS = {
    "__rate_interval": "1m",
    "__interval": "1m",
    "__interval_ms": "60000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
    "__from": "1700000000000",
    "__to": "1700003600000",
    "__dashboard": "dashboard",
    "__name": "name",
    "__org": "1",
    "__user": "user",
    "timeFilter": "",
}

# Series that Prometheus makes itself, present whatever the exposition holds.
PROMETHEUS_SERIES = {
    "up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds", "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling", "scrape_series_added", "scrape_timeout_seconds",
    "scrape_sample_limit",
}
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance", "__name__"}

# PromQL words that are not metric names when they are not followed by "(".
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "group_left",
            "group_right"}
# Aggregation operators, which may be followed by "by (...)" or "without (...)" before their "(".
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
# Modifiers followed by a parenthesized list of label names.
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}

VAR_RE = re.compile(r"\$\{(\w+)(?:\.[^:}]+)?(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")

TOKEN_RE = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>(?:0[xX][0-9a-fA-F]+
                 |[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?
                 |\.[0-9]+(?:[eE][-+]?[0-9]+)?)
               [a-zA-Z0-9]*)                      # a duration: 5m, 1h30m
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}\[\]@!])
""", re.X | re.S)


class Problems:
    """The problems found, printed in the order of the queries they are about."""

    def __init__(self):
        self.items = []     # (query number, order of adding, line)
        self.next_query = 0

    def number_query(self):
        self.next_query += 1
        return self.next_query - 1

    def add(self, where, message, query=None):
        """Without a query number, the problem sorts before the next query's."""
        order = self.next_query if query is None else query
        self.items.append((order, len(self.items), f"{where}: {message}"))

    @property
    def lines(self):
        return [line for _, _, line in sorted(self.items)]


# --- PromQL ---------------------------------------------------------------------------------------

def tokenize(expr):
    """Returns [(kind, text)], or raises ValueError at the first character PromQL has no use for."""
    tokens, pos = [], 0
    while pos < len(expr):
        m = TOKEN_RE.match(expr, pos)
        if not m:
            raise ValueError(f"unexpected character {expr[pos]!r} at offset {pos}")
        pos = m.end()
        if m.lastgroup != "space":
            tokens.append((m.lastgroup, m.group()))
    return tokens


def unquote(token):
    body = token[1:-1]
    if token[0] == "`":
        return body
    return re.sub(r"\\(.)", r"\1", body)


def analyze(expr):
    """Returns (selectors, error): selectors is [(metric name or None, {label: matcher string})],
    one per vector selector; error is a message when the brackets do not balance."""
    try:
        tokens = tokenize(expr)
    except ValueError as e:
        return [], str(e)
    stack = []
    pairs = {")": "(", "}": "{", "]": "["}
    for _, text in tokens:
        if text in "({[" and len(text) == 1:
            stack.append(text)
        elif text in pairs and len(text) == 1:
            if not stack or stack[-1] != pairs[text]:
                return [], f"unbalanced '{text}'"
            stack.pop()
    if stack:
        return [], f"unclosed '{stack[-1]}'"

    selectors = []
    i, n = 0, len(tokens)

    def skip_group(j, open_, close):
        depth = 0
        while j < n:
            if tokens[j][1] == open_:
                depth += 1
            elif tokens[j][1] == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return j

    def matchers(j):
        """Parses {a="x", b=~"y"} from tokens[j] == "{"; returns (labels, next index)."""
        labels, end = {}, skip_group(j, "{", "}")
        k = j + 1
        while k < end - 1:
            if (tokens[k][0] in ("ident", "string") and k + 2 < end
                    and tokens[k + 1][1] in ("=", "!=", "=~", "!~") and tokens[k + 2][0] == "string"):
                name = tokens[k][1] if tokens[k][0] == "ident" else unquote(tokens[k][1])
                labels[name] = tokens[k + 1][1] + unquote(tokens[k + 2][1])
                k += 3
            else:
                k += 1
        return labels, end

    while i < n:
        kind, text = tokens[i]
        nxt = tokens[i + 1][1] if i + 1 < n else None
        if text == "[":
            i = skip_group(i, "[", "]")
        elif text == "{":  # a selector with no name: {__name__="x", ...}
            labels, i = matchers(i)
            name = labels.get("__name__", "")
            exact = name.startswith("=") and not name.startswith("=~")
            selectors.append((name[1:] if exact else None, labels))
        elif kind == "ident":
            low = text.lower()
            if low in LABEL_LIST_KEYWORDS and nxt == "(":
                i = skip_group(i + 1, "(", ")")
            elif nxt == "(":  # a function or an aggregation
                i += 1
            elif low in KEYWORDS or low in LABEL_LIST_KEYWORDS or low in AGGREGATIONS:
                i += 1
            else:
                labels = {}
                i += 1
                if i < n and tokens[i][1] == "{":
                    labels, i = matchers(i)
                selectors.append((text, labels))
        else:
            i += 1
    return selectors, None


# --- Grafana variables ----------------------------------------------------------------------------

def variable_values(dashboard):
    values = dict(BUILTIN_VARS)
    for var in (dashboard.get("templating") or {}).get("list") or []:
        name = var.get("name")
        if not name:
            continue
        current = (var.get("current") or {}).get("value")
        if isinstance(current, list):
            current = [v for v in current if v != "$__all"]
            current = "|".join(current) if current else None
        if current == "$__all":
            current = None
        if current in (None, ""):
            if var.get("type") == "datasource":
                current = "prometheus"
            elif var.get("type") in ("custom", "interval", "constant", "textbox"):
                options = var.get("options") or []
                current = options[0].get("value") if options else var.get("query", "")
                if var.get("type") in ("custom", "interval") and not options:
                    current = str(current).split(",")[0].strip()
            else:
                current = var.get("allValue") or ".*"
        values[name] = str(current)
    return values


def substitute(expr, values):
    """Returns (expr with variables replaced, names of undefined variables)."""
    unknown = []

    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in values:
            return values[name]
        if not name.isdigit():  # $1 in label_replace is not a variable
            unknown.append(name)
        return m.group(0)

    return VAR_RE.sub(repl, expr), unknown


# --- The exposition -------------------------------------------------------------------------------

LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class Exposition:
    def __init__(self, path):
        self.types = {}      # name from "# TYPE" -> type
        self.labels = {}     # sample name -> set of label names seen
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                if line.startswith("#"):
                    parts = line.split()
                    if len(parts) >= 4 and parts[1] == "TYPE":
                        self.types[parts[2]] = parts[3]
                    continue
                m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
                if not m:
                    raise ValueError(f"{path}:{lineno}: not a sample: {line[:80]}")
                names = self.labels.setdefault(m.group(1), set())
                rest = line[m.end():]
                if rest.startswith("{"):
                    body = rest[1:rest.rfind("}")]
                    for lm in LABEL_RE.finditer(body):
                        names.add(lm.group(1))

    def series_names(self):
        names = set(self.labels)
        for base, kind in self.types.items():
            if kind == "histogram":
                names |= {base + "_bucket", base + "_sum", base + "_count"}
            elif kind == "summary":
                names |= {base, base + "_sum", base + "_count"}
            elif kind == "counter" and not base.endswith("_total"):
                names.add(base + "_total")  # OpenMetrics names a counter without its suffix
            else:
                # A declared family without samples yet (no alert firing, no pool, no budget): it
                # is exported, it has nothing to count now.
                names.add(base)
        return names

    def check(self, name, labels, extra_names, strict_labels):
        """Returns a message when the selector does not fit the exposition, else None."""
        if name in PROMETHEUS_SERIES or name in extra_names:
            return None
        known = self.series_names()
        if name not in known:
            if self.types.get(name) == "histogram":
                return (f"{name} is a histogram: it has no series of its own, only "
                        f"{name}_bucket, {name}_sum and {name}_count")
            close = difflib.get_close_matches(name, sorted(known | extra_names), n=1, cutoff=0.8)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"metric {name} is not in the exposition{hint}"
        if strict_labels:
            have = set(self.labels.get(name, set()))
            for base, kind in self.types.items():
                if kind in ("histogram", "summary") and name.startswith(base + "_"):
                    for suffix in ("", "_bucket", "_sum", "_count"):
                        have |= self.labels.get(base + suffix, set())
            missing = sorted(set(labels) - have - TARGET_LABELS)
            if missing:
                return f"{name} has no label {', '.join(missing)} in the exposition"
        return None


# --- Prometheus -----------------------------------------------------------------------------------

def prometheus_error(url, query):
    """Returns Prometheus's error for the query, or None when it evaluates."""
    req = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            doc = json.loads(body)
            return f"Prometheus: {doc.get('errorType', e.code)}: {doc.get('error', '')}"
        except ValueError:
            return f"Prometheus answered HTTP {e.code}: {body[:200]!r}"
    except (urllib.error.URLError, OSError) as e:
        raise ConnectionError(f"cannot query {url}: {e}") from e
    try:
        doc = json.loads(body)
    except ValueError:
        return f"Prometheus answered something other than JSON: {body[:200]!r}"
    if doc.get("status") != "success":
        return f"Prometheus: {doc.get('errorType')}: {doc.get('error')}"
    return None


# --- Collecting the queries -----------------------------------------------------------------------

class Query:
    def __init__(self, problems, where, expr):
        self.number = problems.number_query()
        self.where = where   # "FILE: panel "x" (id 3), query A"
        self.expr = expr     # after variable substitution


def walk_panels(panels):
    for panel in panels or []:
        yield panel
        yield from walk_panels(panel.get("panels"))


def variable_query(raw):
    """The PromQL inside a variable's query (label_values(EXPR, label), query_result(EXPR)), or
    None when it has none (label_values(label), label_names(), metrics(regex))."""
    raw = raw.strip()
    m = re.fullmatch(r"query_result\((.*)\)", raw, re.S)
    if m:
        return m.group(1)
    m = re.fullmatch(r"label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)", raw, re.S)
    if m:
        return m.group(1)
    if re.fullmatch(r"(label_values|label_names|metrics)\(.*\)", raw, re.S):
        return None
    return raw


def datasource_problem(ds):
    if ds is None:
        return None
    if isinstance(ds, str):
        return None if ds.startswith("$") or ds.startswith("-- ") else f"datasource {ds!r}"
    uid, kind = ds.get("uid"), ds.get("type")
    if kind not in (None, "prometheus"):
        return None
    if uid is None or str(uid).startswith("$") or str(uid).startswith("-- "):
        return None
    return f"datasource uid {uid!r}"


def dashboard_queries(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"check_grafana: cannot read {path}: {e}") from e
    if "dashboard" in dashboard and "panels" not in dashboard:  # the API's {"dashboard": ...}
        dashboard = dashboard["dashboard"]
    values = variable_values(dashboard)
    queries = []

    def add(where, raw):
        expr, unknown = substitute(raw, values)
        for name in unknown:
            problems.add(where, f"uses ${name}, which is no variable of the dashboard")
        queries.append(Query(problems, where, expr))

    panels = list(walk_panels(dashboard.get("panels")))
    for row in dashboard.get("rows") or []:  # the layout of dashboards before schema 16
        panels.extend(walk_panels(row.get("panels")))
    for panel in panels:
        title = panel.get("title") or "(untitled)"
        where = f"{path}: panel \"{title}\" (id {panel.get('id')})"
        bad = datasource_problem(panel.get("datasource"))
        if bad:
            problems.add(where, f"hard-coded {bad}; use the ${{datasource}} variable")
        for target in panel.get("targets") or []:
            twhere = f"{where}, query {target.get('refId', '?')}"
            bad = datasource_problem(target.get("datasource"))
            if bad:
                problems.add(twhere, f"hard-coded {bad}; use the ${{datasource}} variable")
            expr = target.get("expr")
            if isinstance(expr, str) and expr.strip():
                add(twhere, expr)
    for var in (dashboard.get("templating") or {}).get("list") or []:
        if var.get("type") != "query":
            continue
        raw = var.get("query")
        if isinstance(raw, dict):
            raw = raw.get("query")
        raw = raw or var.get("definition") or ""
        where = f"{path}: variable ${var.get('name')}"
        bad = datasource_problem(var.get("datasource"))
        if bad:
            problems.add(where, f"hard-coded {bad}; use the ${{datasource}} variable")
        inner = variable_query(raw)
        if inner:
            add(where, inner)
    for ann in (dashboard.get("annotations") or {}).get("list") or []:
        expr = ann.get("expr")
        if isinstance(expr, str) and expr.strip():
            add(f"{path}: annotation \"{ann.get('name')}\"", expr)
    return queries


# A deliberately small reader of Prometheus rule files (the standard library has no YAML): it finds
# each `expr:` (plain, quoted, or a | or > block) and the `alert:` or `record:` of its rule.
KEY_RE = re.compile(r"^(\s*)(-\s+)?([A-Za-z_]+):(?:\s+(.*))?$")


def yaml_scalar(lines, i, col, value):
    """Reads the scalar that starts on lines[i] as `value`; returns (text, next line index)."""
    value = (value or "").rstrip()
    if value[:1] in ("|", ">"):
        body, j = [], i + 1
        while j < len(lines):
            line = lines[j]
            if line.strip() and len(line) - len(line.lstrip()) <= col:
                break
            body.append(line.strip())
            j += 1
        return "\n".join(body).strip(), j
    if value[:1] in ('"', "'"):
        quote, text, j = value[0], value[1:], i
        while True:
            if quote == '"':
                m = re.match(r'((?:[^"\\]|\\.)*)"', text)
            else:
                m = re.match(r"((?:[^']|'')*)'(?!')", text)
            if m:
                body = m.group(1)
                if quote == '"':
                    try:
                        body = json.loads('"' + body.replace("\n", " ") + '"')
                    except ValueError:
                        body = re.sub(r"\\(.)", r"\1", body)
                else:
                    body = body.replace("''", "'")
                return body, j + 1
            j += 1
            if j >= len(lines):
                return text, j
            text += "\n" + lines[j].strip()
    # A plain scalar: this line and the more indented ones after it.
    body, j = [re.sub(r"\s+#.*$", "", value)], i + 1
    while j < len(lines):
        line = lines[j]
        if not line.strip() or len(line) - len(line.lstrip()) <= col or KEY_RE.match(line):
            break
        body.append(re.sub(r"\s+#.*$", "", line.strip()))
        j += 1
    return " ".join(body).strip(), j


# Inside a template action ({{ ... }}): query "EXPR", or printf "EXPR with %s" ... | query.
TEMPLATE_QUERY_RES = [
    re.compile(r'\{\{[^}]*?\bquery\s+"((?:[^"\\]|\\.)*)"'),
    re.compile(r'\{\{[^}]*?\bprintf\s+"((?:[^"\\]|\\.)*)"[^}]*\|\s*query\b'),
]


def rules_queries(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise SystemExit(f"check_grafana: cannot read {path}: {e}") from e
    keys = []  # (line index, key column, key, value, whether the key starts a list item)
    i = 0
    while i < len(lines):
        m = KEY_RE.match(lines[i])
        if not m or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        col = len(m.group(1)) + len(m.group(2) or "")
        key = m.group(3)
        if key in ("expr", "alert", "record"):
            value, j = yaml_scalar(lines, i, col, m.group(4))
            keys.append((i, col, key, value, bool(m.group(2))))
            i = j
        else:
            i += 1
    records, queries = set(), []
    for idx, (line, col, key, value, starts_item) in enumerate(keys):
        if key == "record":
            records.add(value)
        if key != "expr":
            continue
        # The rule's name: the alert: or record: key in the same list item.
        name = None
        for _, other_col, other_key, other_value, item_start in \
                ([] if starts_item else reversed(keys[:idx])):
            if other_col == col and other_key in ("alert", "record"):
                name = f"{other_key} {other_value}"
                break
            if other_col == col and item_start:
                break
        if name is None:
            for _, other_col, other_key, other_value, item_start in keys[idx + 1:]:
                if other_col == col and item_start:
                    break
                if other_col == col and other_key in ("alert", "record"):
                    name = f"{other_key} {other_value}"
                    break
        queries.append(Query(problems, f"{path}: {name or 'rule'} (line {line + 1})", value))
    # Literal queries in annotation templates.
    for lineno, line in enumerate(lines, 1):
        for regex in TEMPLATE_QUERY_RES:
            for m in regex.finditer(line):
                text = m.group(1).replace('\\"', '"')
                text = re.sub(r"%[-+# 0-9.]*[qsvd]",
                              lambda f: '"x"' if f.group().endswith("q") else "x", text)
                queries.append(Query(problems, f"{path}: template query (line {lineno})", text))
    return queries, records


# --- Main -----------------------------------------------------------------------------------------

def main(argv):
    parser = argparse.ArgumentParser(
        description="Checks the PromQL of Grafana dashboards and Prometheus rule files.")
    parser.add_argument("dashboards", nargs="*", metavar="DASHBOARD.json")
    parser.add_argument("--rules", action="append", default=[], metavar="FILE",
                        help="a Prometheus rule file whose expressions to check too (repeatable)")
    parser.add_argument("--metrics", metavar="FILE",
                        help="a saved /metrics exposition every referenced metric must be in")
    parser.add_argument("--prometheus", metavar="URL",
                        help="a Prometheus that must answer every query without an error")
    parser.add_argument("--strict-labels", action="store_true",
                        help="with --metrics: selectors may match only labels the metric has")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each query checked")
    args = parser.parse_args(argv)
    if not args.dashboards and not args.rules:
        parser.error("name at least one DASHBOARD.json or --rules FILE")
    if args.strict_labels and not args.metrics:
        parser.error("--strict-labels needs --metrics")

    problems = Problems()
    queries, records = [], set()
    for path in args.dashboards:
        queries += dashboard_queries(path, problems)
    for path in args.rules:
        q, r = rules_queries(path, problems)
        queries += q
        records |= r
    exposition = None
    if args.metrics:
        try:
            exposition = Exposition(args.metrics)
        except (OSError, ValueError) as e:
            print(f"check_grafana: cannot read {args.metrics}: {e}", file=sys.stderr)
            return 2

    for q in queries:
        if args.verbose:
            print(f"{q.where}: {' '.join(q.expr.split())}")
        selectors, error = analyze(q.expr)
        if error:
            problems.add(q.where, f"cannot parse {q.expr!r}: {error}", q.number)
            continue
        if exposition:
            for name, labels in selectors:
                if name is None:
                    continue
                message = exposition.check(name, labels, records, args.strict_labels)
                if message:
                    problems.add(q.where, message, q.number)
        if args.prometheus:
            try:
                message = prometheus_error(args.prometheus, q.expr)
            except ConnectionError as e:
                print(f"check_grafana: {e}", file=sys.stderr)
                return 1
            if message:
                problems.add(q.where, f"{message} (query {q.expr!r})", q.number)

    for line in problems.lines:
        print(line)
    what = []
    if args.dashboards:
        what.append(f"{len(args.dashboards)} dashboard(s)")
    if args.rules:
        what.append(f"{len(args.rules)} rule file(s)")
    checks = ["syntax"] + (["metric names"] if exposition else []) + \
             (["Prometheus"] if args.prometheus else [])
    status = f"{len(problems.lines)} problem(s)" if problems.lines else "OK"
    print(f"check_grafana: {len(queries)} queries in {' and '.join(what)}, "
          f"checked for {', '.join(checks)}: {status}")
    return 1 if problems.lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
