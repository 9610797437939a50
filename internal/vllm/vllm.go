// Package vllm runs `vllm serve` on a Ray head. What it builds is pure: the
// command line (ServeArgv), the parsers of extra_args and of a running
// server's command line and environment (ParseParallel, ParseServeArgv,
// ParseFind), and the shell scripts a node runs (launch,
// stop, status, launch lock, find) as constants. The I/O is in two places:
// Server's methods run those scripts over its SSH connection and reach the
// server's HTTP port through it (server.go), and WaitReady, the readiness
// gate, polls HTTP through the transport it is given (ready.go).
package vllm

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// ServeOptions describe one `vllm serve`.
type ServeOptions struct {
	Command    string // default "vllm"
	Model      string
	ServedName string
	TP, PP     int
	Host       string // --host; default "0.0.0.0"
	Port       int
	ExtraArgs  []string
}

// ServedName is the name clients ask a server for: --served-model-name,
// or the model when it is not given (vLLM's init_app_state in
// vllm/entrypoints/openai/api_server.py: served_model_names = [args.model]
// when args.served_model_name is None; the same in 0.11.0 and 0.32.0).
// The provider's one statement of that default: the plan, an import and
// the status of a running server all read the name through it.
func ServedName(served, model string) string {
	if served != "" {
		return served
	}
	return model
}

// DefaultHost is where the provider has vLLM listen unless told otherwise:
// every address of the head, as the OpenAI endpoint is for other machines.
const DefaultHost = "0.0.0.0"

// ServeArgv is the argv of `vllm serve`. The API key is never here: it
// travels in the 0600 environment file as VLLM_API_KEY.
func ServeArgv(o ServeOptions) []string {
	cmd := o.Command
	if cmd == "" {
		cmd = "vllm"
	}
	argv := []string{cmd, "serve", o.Model}
	if o.ServedName != "" {
		argv = append(argv, "--served-model-name", o.ServedName)
	}
	argv = append(argv,
		"--tensor-parallel-size", strconv.Itoa(o.TP),
		"--pipeline-parallel-size", strconv.Itoa(o.PP),
		"--distributed-executor-backend", "ray",
		"--host", cmp.Or(o.Host, DefaultHost),
		"--port", strconv.Itoa(o.Port))
	return append(argv, o.ExtraArgs...)
}

// ParseServeArgv reads a running server's command line (NUL-separated, as
// /proc/<pid>/cmdline has it) back into options: how an import learns what
// is being served.
func ParseServeArgv(cmdline string) (ServeOptions, error) {
	args := strings.Split(strings.TrimRight(cmdline, "\x00"), "\x00")
	i := 0
	for i < len(args) && args[i] != "serve" {
		i++
	}
	if i >= len(args)-1 {
		return ServeOptions{}, fmt.Errorf("not a `vllm serve` command line: %q", strings.Join(args, " "))
	}
	// The word before "serve" is the vllm command (after an interpreter,
	// when the kernel ran it through its #! line).
	// vLLM's --host default is None: every address (vllm/entrypoints/launchers/launcher.py, v0.32.0).
	o := ServeOptions{Command: "vllm", Model: args[i+1], TP: 1, PP: 1, Host: DefaultHost, Port: 8000}
	if i > 0 {
		o.Command = args[i-1]
	}
	rest := args[i+2:]
	for j := 0; j < len(rest); j++ {
		flag, val, hasEq := strings.Cut(rest[j], "=")
		next := func() string {
			if hasEq {
				return val
			}
			if j+1 < len(rest) {
				j++
				return rest[j]
			}
			return ""
		}
		var err error
		switch flag {
		case "--served-model-name":
			o.ServedName = next()
		case "--tensor-parallel-size", "-tp":
			o.TP, err = strconv.Atoi(next())
		case "--pipeline-parallel-size", "-pp":
			o.PP, err = strconv.Atoi(next())
		case "--port":
			o.Port, err = strconv.Atoi(next())
		case "--host":
			o.Host = next()
		case "--distributed-executor-backend":
			next()
		default:
			o.ExtraArgs = append(o.ExtraArgs, rest[j])
		}
		if err != nil {
			return ServeOptions{}, fmt.Errorf("%s: %w", flag, err)
		}
	}
	return o, nil
}

// DirScript makes, or checks, the directory where a deployment keyed $2
// (its port, or Server.Key) keeps its env file (which holds the API key),
// pid and log, and prints it: vllm-<key> in the SSH user's private directory (transport.PrivateDir;
// $1, when not empty, names another one).
const DirScript = `private=$1 port=$2
` + transport.PrivateDir + `private_dir
mkdir -p -- "$private/vllm-$port" && chmod 700 -- "$private/vllm-$port" && echo "$private/vllm-$port"`

// LaunchScript starts the server detached from the SSH session. $1 is the
// state directory, $2 an optional API key file on the node, $3 who
// launches (written to the start marker, `starting`, which stays until the
// launch has answered its readiness check or was stopped), the rest the
// serve argv. It prints "<pid>:<start time>": the process identity, which
// survives neither a restart nor PID reuse.
const LaunchScript = `dir=$1 keyfile=$2 holder=$3; shift 3
auth='` + ray.AuthEnv + `' 
mkdir -p "$dir" && chmod 700 "$dir" && cd "$dir" || exit 1
` + runningScript + `
if running pid; then
  echo "a vLLM server started by this provider is already running (process $(cat pid))" >&2; exit 3
fi
# An empty key file would make vLLM serve without authentication.
if [ -n "$keyfile" ] && [ -z "$(tr -d ' \t\r\n' < "$keyfile" 2>/dev/null)" ]; then
  echo "api_key_file $keyfile is empty or unreadable: vLLM would serve without authentication. Put the key in it, or use api_key_wo" >&2; exit 4
fi
: > server.log
printf '%s\n' "$holder" > starting
setsid sh -c 'set -a; . ./env; if [ -n "$1" ]; then VLLM_API_KEY=$(cat "$1") || exit 1; fi; set +a
'"$auth"'
shift; exec "$@"' sh "$keyfile" "$@" >> server.log 2>&1 < /dev/null &
pid=$!
start=$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f20)
echo "$pid:$start" > pid
echo "$pid:$start"`

// SuperviseScript starts the server under systemd instead (restart not
// "no"): the same arguments as LaunchScript, then the unit's name and the
// watch's arguments (RunFileScript), with the unit file on stdin. It writes what the unit runs into the directory
// (run: the same environment and command line LaunchScript's detached
// shell has, each argument quoted; exited: the unit's exit record),
// installs and starts the unit (supervise.InstallScript) and prints the
// main process's identity. The API key stays in the 0600 env file or the
// key file, read when the process starts: never in the unit, whose file
// systemctl shows any local user.
const SuperviseScript = `dir=$1 keyfile=$2 holder=$3 unit=$4 watch=$5; shift 5
cd "$dir" || exit 1
if [ -n "$keyfile" ] && [ -z "$(tr -d ' \t\r\n' < "$keyfile" 2>/dev/null)" ]; then
  echo "api_key_file $keyfile is empty or unreadable: vLLM would serve without authentication. Put the key in it, or use api_key_wo" >&2; exit 4
fi
run_file() (
` + RunFileScript + `
)
run_file "$keyfile" "$unit" "$watch" "$@" || exit $?
cat > exited.new <<'SPARK_EXITED' && chmod 700 exited.new && mv -f exited.new exited || exit 1
` + supervise.ExitedScript + `SPARK_EXITED
: > server.log; : > exits
printf '%s\n' "$holder" > starting
install_unit() (
` + supervise.InstallScript + `
)
id=$(install_unit "$unit") || exit $?
echo "$id" > pid
echo "$id"`

// RunFileScript writes, in the current directory, the file "run" that a
// supervised server's unit runs: the same environment and command line
// LaunchScript's detached shell has, each argument quoted. $1 is the API
// key file ("": none), $2 the unit's name, $3 the arguments of the rank
// set's watch after its pid (WatchScript; "": none, a server of one node),
// the rest the serve argv. The watch runs on the Python of the vllm
// command's #! line, as vLLM does.
const RunFileScript = `keyfile=$1 unit=$2 watch=$3; shift 3
auth='` + ray.AuthEnv + `'
# systemd starts the unit with its own PATH, not the SSH session's: the
# command, found here, is written with its full path, and the session's
# PATH too, for what vLLM runs in turn (a compiler, ninja).
cmd=$(command -v "$1") || { echo "$1 is not on $(id -un)'s PATH on this node ($PATH): set vllm_command to its full path" >&2; exit 6; }
shift; set -- "$cmd" "$@"
if [ -n "$watch" ]; then
  py=$(sed -n '1s/^#![[:space:]]*//p' "$cmd" 2>/dev/null | cut -d' ' -f1)
  [ -n "$py" ] && [ -x "$py" ] || py=$(command -v python3) || { echo "no python3 on this node for the rank set's watch" >&2; exit 6; }
  cat > watch.new <<'SPARK_WATCH' && mv -f watch.new watch || exit 1
` + WatchScript + `SPARK_WATCH
fi
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
  echo '#!/bin/sh'
  echo "# terraform-provider-spark: what the systemd unit $unit runs."
  printf 'PATH=%s; export PATH\n' "$(q "$PATH")"
  echo 'set -a; . ./env'
  if [ -n "$keyfile" ]; then echo "VLLM_API_KEY=\$(cat $(q "$keyfile")) || exit 1"; fi
  echo 'set +a'
  printf '%s\n' "$auth"
  if [ -n "$watch" ]; then
    printf '%s ./watch "$$"' "$(q "$py")"; for w in $watch; do printf ' %s' "$(q "$w")"; done; echo ' &'
  fi
  printf exec; for a in "$@"; do printf ' %s' "$(q "$a")"; done; echo
} > run.new && chmod 700 run.new && mv -f run.new run || exit 1
`

// UnitStatusScript prints the directory of the supervised server keyed $3
// ($2 as in DirScript), "Dir=<path>", then supervise.StatusScript's
// report of its unit $1. It makes nothing.
const UnitStatusScript = `private=$2 key=$3
` + transport.PrivateDir + `dir=$private/vllm-$key
echo "Dir=$dir"
status() (
` + supervise.StatusScript + `
)
status "$1" "$dir"`

// runningScript defines running FILE: true when FILE names a live process
// ("pid:start", the start time as /proc/<pid>/stat field 22 has it) that
// is still that process, not a zombie and not a reused PID. A file of the
// older form, a pid alone, is taken at its word.
const runningScript = `running() {
  id=$(cat "$1" 2>/dev/null) || return 1
  p=${id%%:*} s=${id#*:}
  st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) && [ "${st%% *}" != Z ] || return 1
  [ "$s" = "$id" ] || [ "$(echo "$st" | cut -d' ' -f20)" = "$s" ]
}`

// StatusScript prints "alive" when the process with identity $1
// ("pid:start") still runs, else "gone". A zombie (dead, not yet reaped by
// whatever adopted it) is gone.
const StatusScript = `pid=${1%%:*} start=${1#*:}
st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || st=
if [ -n "$st" ] && [ "${st%% *}" != Z ] && [ "$(echo "$st" | cut -d' ' -f20)" = "$start" ]; then echo alive; else echo gone; fi`

// StopScript stops the server: SIGTERM to its process group, SIGKILL after
// $3 seconds, then checks port $2 is closed, and removes the env file (it
// holds the API key) from directory $4, by default the deployment's own in
// the SSH user's private directory ($6 as in DirScript), vllm-<$5, else
// the port> (never made here, only cleaned when it passes the owner check). $1 is the identity;
// port 0 serves none, so none is checked. The server
// leads its own process group (LaunchScript's setsid); when the leader is
// already gone — crashed, or killed by hand — members of its group may live
// on: vLLM's EngineCore (titled "VLLM::EngineCore", so no "vllm serve" in its
// command line) keeps its Ray placement group, and its GPUs, until it dies.
// They are ours: the kernel does not reuse a PID while a process group of
// that number has members. A PID that a process of another start time
// holds was reused, and its group is left alone.
const StopScript = `pid=${1%%:*} start=${1#*:} port=$2 grace=$3 dir=$4 key=${5:-$2} private=${6:-}
` + transport.PrivateDir + `[ -n "$dir" ] || ! owned || dir=$private/vllm-$key
same() { st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) && [ "${st%% *}" != Z ] && [ "$(echo "$st" | cut -d' ' -f20)" = "$start" ]; }
group() { [ -n "$pid" ] && pgrep -g "$pid" >/dev/null 2>&1; }
# A process with the PID but another start time: the PID was reused, so
# the server's group had no members left then, and a group of that number
# now is someone else's.
reused() { st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) && [ "$(echo "$st" | cut -d' ' -f20)" != "$start" ]; }
if [ -n "$pid" ] && same; then
  kill -TERM "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  i=0; while same && [ "$i" -lt "$grace" ]; do sleep 1; i=$((i+1)); done
  same && { kill -KILL "-$pid" 2>/dev/null || kill -KILL "$pid"; sleep 1; }
fi
if group && ! reused; then
  kill -TERM "-$pid" 2>/dev/null
  i=0; while group && [ "$i" -lt "$grace" ]; do sleep 1; i=$((i+1)); done
  group && { kill -KILL "-$pid" 2>/dev/null; sleep 1; }
fi
[ -n "$dir" ] && rm -f -- "$dir/env" "$dir/starting"
# The pid file goes with the server it names (a reused PID must not look
# like it later).
[ -n "$dir" ] && [ "$(cat "$dir/pid" 2>/dev/null)" = "$1" ] && rm -f -- "$dir/pid"
[ "$port" = 0 ] && exit 0
for i in 1 2 3 4 5 6 7 8 9 10; do
  [ -z "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && exit 0
  sleep 1
done
echo "port $port is still open after stopping vLLM: $(ss -Hltnp "sport = :$port")" >&2
exit 1`

// UnfinishedScript prints the identity of the server a launch keyed $1 (its
// port, or Server.Key)
// started and never finished (its start marker is still there: the
// provider was killed while the model loaded), then the marker's holder;
// nothing when there is none, or when the SSH user's private directory is
// not its own (a marker anyone could have written proves nothing). $2, when
// set, is the private directory (tests).
const UnfinishedScript = `private=$2
` + transport.PrivateDir + `owned || exit 0
d=$private/vllm-$1
[ -f "$d/starting" ] && [ -f "$d/pid" ] || exit 0
` + runningScript + `
running "$d/pid" || exit 0
pid=${id%%:*}
echo "$pid:$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f20)"
head -n 1 "$d/starting"
# A launch in progress holds its lock while the model loads: then this is
# another apply's server, not one a killed apply left.
if [ -e "$d/launch.lock" ] && ! flock -n "$d/launch.lock" true 2>/dev/null; then echo launching; fi`

// LaunchLockScript holds the launch lock of the deployment directory $1
// (made by DirScript) until stdin closes: for as long as one apply
// launches and waits for its server, another finds the lock held
// (UnfinishedScript) and is refused instead of stopping that server.
const LaunchLockScript = `exec 9>>"$1/launch.lock" || exit 1
if ! flock -n 9; then echo "another apply is launching vllm serve here (it holds $1/launch.lock)" >&2; exit 75; fi
echo locked
cat >/dev/null`

// SettledScript removes the start marker of the deployment keyed $1
// once its launch answered; $2 as in UnfinishedScript.
const SettledScript = `private=$2
` + transport.PrivateDir + `owned && rm -f -- "$private/vllm-$1/starting"; true`

// FindScript prints the identity and NUL-separated command line of the
// process listening on port $1 (for import), or exits 4 when none does.
const FindScript = `pid=$(ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1)
[ -n "$pid" ] || { echo "nothing listens on port $1" >&2; exit 4; }
echo "$pid:$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f20)"
tr '\0' '\n' < "/proc/$pid/environ" | grep -E '^(VLLM_HOST_IP|RAY_ADDRESS|VLLM_USE_RAY_V2_EXECUTOR_BACKEND)=' || true
echo @@cmdline
cat "/proc/$pid/cmdline"`

// StatusFindScript is a deployment's status in one round trip:
// StatusScript's answer for identity $1 and, when it is "alive", a line
// "@@find" and FindScript's for port $2 (nothing after it when no process
// listens there). Each runs in a subshell of its own, so FindScript's exit
// ends only its part.
const StatusFindScript = `alive() (
` + StatusScript + `
)
listener() (
` + FindScript + `
)
state=$(alive "$1"); echo "$state"
[ "$state" = alive ] || exit 0
echo @@find
listener "$2" 2>/dev/null || true`

// LogTailScript prints the last $2 lines of the server log in $1.
const LogTailScript = `tail -n "$2" "$1/server.log" 2>/dev/null`
