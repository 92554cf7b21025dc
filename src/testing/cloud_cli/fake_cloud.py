"""What the three fake cloud CLIs (aws, gcloud, az in this folder) share: their state file, the
call log and the argument parser. Standard library only; see README.md.

State lives in $FAKE_CLOUD_DIR (required: a fake never guesses where to write):
  $FAKE_CLOUD_DIR/<cli>.json        the fake cloud's instances, rewritten atomically by each call
  $FAKE_CLOUD_DIR/calls.log         one JSON line per call: {"cli", "argv", "rc", "files"}, where
                                    files holds the content of every file an argument pointed at
                                    (user data, startup scripts, custom data)
  $FAKE_CLOUD_DIR/user-data/<name>  the user data of each created instance, as the VM would see it
"""

import datetime
import fcntl
import json
import os
import sys


class Usage(Exception):
    """A command line the real CLI would refuse before calling the cloud (exit 2)."""


class CloudError(Exception):
    """An error the cloud's API answers with; `rc` is the CLI's exit status for it."""

    def __init__(self, message, rc):
        super().__init__(message)
        self.rc = rc


def state_dir():
    d = os.environ.get("FAKE_CLOUD_DIR")
    if not d:
        sys.stderr.write("fake cloud CLI: FAKE_CLOUD_DIR is not set\n")
        sys.exit(3)
    os.makedirs(os.path.join(d, "user-data"), exist_ok=True)
    return d


def now_iso(offset=None):
    """The wall clock (the fake clouds stamp launch times with it), ISO-8601."""
    t = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    if offset is not None:
        t = t.astimezone(datetime.timezone(datetime.timedelta(hours=offset)))
    return t


class State:
    """The fake cloud's state file, locked for the duration of one call."""

    def __init__(self, cli):
        d = state_dir()
        self.path = os.path.join(d, cli + ".json")
        self.lock = open(os.path.join(d, cli + ".lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        try:
            with open(self.path) as f:
                self.data = json.load(f)
        except FileNotFoundError:
            self.data = {"next": 1, "instances": {}}

    def next_number(self):
        n = self.data["next"]
        self.data["next"] = n + 1
        return n

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def save_user_data(name, text):
    with open(os.path.join(state_dir(), "user-data", name), "w") as f:
        f.write(text)


def log_call(cli, argv, rc, files):
    with open(os.path.join(state_dir(), "calls.log"), "a") as f:
        f.write(json.dumps({"cli": cli, "argv": argv, "rc": rc, "files": files}) + "\n")


def read_file_arg(value, files, prefix=""):
    """Reads the file an argument names (value "file://PATH", or PATH with prefix ""); the content
    goes to the call log."""
    path = value[len(prefix):] if prefix and value.startswith(prefix) else value
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise Usage("cannot read %s: %s" % (path, e.strerror))
    files[value] = text
    return text


def parse_flags(args, spec, positionals=0):
    """Parses `--flag value`, `--flag=value` and switches.

    spec: {flag: kind} with kind "value", "switch" or "list" (one or more values up to the next
    flag, as az's nargs='+'); aliases map to their flag as ("alias", "--flag"). Returns
    (flags, positionals); a repeated value flag keeps the last value. Raises Usage for an unknown
    flag, a flag without its value or a wrong number of positional arguments.
    """
    flags, pos = {}, []
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-") or a == "-":
            pos.append(a)
            i += 1
            continue
        name, eq, inline = a.partition("=")
        kind = spec.get(name)
        if isinstance(kind, tuple):
            name = kind[1]
            kind = spec[name]
        if kind is None:
            raise Usage("unrecognized arguments: %s" % a)
        if kind == "switch":
            flags[name] = True
            i += 1
        elif kind == "list":
            vals = [inline] if eq else []
            i += 1
            while i < len(args) and not (args[i].startswith("--") or (args[i].startswith("-") and len(args[i]) == 2)):
                vals.append(args[i])
                i += 1
            if not vals:
                raise Usage("argument %s: expected at least one argument" % name)
            flags[name] = vals
        else:
            if eq:
                flags[name] = inline
                i += 1
            else:
                if i + 1 >= len(args):
                    raise Usage("argument %s: expected one argument" % name)
                flags[name] = args[i + 1]
                i += 2
    if positionals >= 0 and len(pos) != positionals:
        if len(pos) > positionals:
            raise Usage("unrecognized arguments: %s" % " ".join(pos[positionals:]))
        raise Usage("the following arguments are required: a name")
    return flags, pos


def require(flags, names):
    missing = [n for n in names if n not in flags]
    if missing:
        raise Usage("the following arguments are required: %s" % ", ".join(missing))


def main(cli, run, usage_error, argv):
    """Runs run(args, files) -> stdout text; logs the call. usage_error(msg) -> stderr text."""
    args = argv[1:]
    files = {}
    rc = 0
    try:
        out = run(args, files)
        if out:
            sys.stdout.write(out)
    except Usage as e:
        sys.stderr.write(usage_error(str(e)))
        rc = 2
    except CloudError as e:
        sys.stderr.write(str(e) + "\n")
        rc = e.rc
    log_call(cli, args, rc, files)
    return rc
