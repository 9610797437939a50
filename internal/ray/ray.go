// Package ray builds the commands that start and stop Ray on a node and
// reads Ray's registered node table. Everything here is pure: argv in,
// argv out; output in, structs out. Running them is the caller's business.
package ray

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// AuthEnv is the shell line that turns Ray's token authentication on for a
// client when a token is there where Ray looks for one (TokenRead's order):
// readers of the node table and vLLM's driver then pass the cluster's
// check. (No single quote in it: vLLM's launch script quotes it so.)
const AuthEnv = `if [ -n "${RAY_AUTH_TOKEN:-}" ] || [ -s "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}" ]; then export RAY_AUTH_MODE=token; fi`

// TokenRead prints Ray's auth token as Ray itself finds it: the
// RAY_AUTH_TOKEN variable, else the file RAY_AUTH_TOKEN_PATH names (set
// but unreadable or empty is no token: Ray refuses it, "RAY_AUTH_TOKEN_PATH
// is set but file cannot be opened or is empty"), else ~/.ray/auth_token
// (the token loader in Ray 2.52.1's _raylet.so, whose messages name the
// three in this order; Ray's docs say the same of 2.59-2.60). Nothing when
// there is none. The variables are those the command inherits where Ray
// runs: the SSH user's session, or the runtime's container.
const TokenRead = `if [ -n "${RAY_AUTH_TOKEN:-}" ]; then printf "%s\n" "$RAY_AUTH_TOKEN"; else cat -- "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}" 2>/dev/null; fi; true`

// PythonOfRay is the shell lines that set $py to the interpreter on the #!
// line of the ray command in $ray (the Python Ray is installed in), else
// python3: how the provider finds the Python to ask Ray's questions with.
// The #! line is read by the shell itself (read, then pattern removal):
// every plan runs this on every node, and each program started costs a
// fork and an exec.
const PythonOfRay = `rp=$(command -v -- "$ray" 2>/dev/null) && {
  IFS= read -r py < "$rp" 2>/dev/null || :
  case "$py" in
  '#!'*) py=${py#??}; py=${py#"${py%%[![:space:]]*}"}; py=${py%%[[:space:]]*} ;;
  *) py= ;;
  esac
}
case "$py" in */env|"") py=python3 ;; esac`

// StartOptions describe one `ray start`.
type StartOptions struct {
	RayCommand    string // default "ray"
	Head          bool
	HeadAddress   string // workers: <head registered ip>:<gcs port>
	GCSPort       int    // head
	NodeIP        string // --node-ip-address; "" lets Ray detect it
	NumGPUs       *int64
	Resources     map[string]float64
	Labels        map[string]string
	DashboardHost string // head
	Env           map[string]string
	ExtraArgs     []string
}

// startScript exports the environment it reads on stdin, then runs "$@":
// the values reach the Ray processes' environment (vLLM's worker actors read
// VLLM_HOST_IP and the *_SOCKET_IFNAME variables there) without ever being
// in an argv, which every user of the node can read in ps.
const startScript = `set -a; . /dev/stdin; set +a; exec "$@"`

// StartCommand is one `ray start`: its argv, and the environment file to
// give it on stdin (keys sorted, values quoted).
func StartCommand(o StartOptions) (argv []string, stdin []byte, err error) {
	ray := o.RayCommand
	if ray == "" {
		ray = "ray"
	}
	stdin, err = transport.EnvFile(o.Env)
	if err != nil {
		return nil, nil, err
	}
	argv = []string{"sh", "-c", startScript, "sh", ray, "start"}
	if o.Head {
		argv = append(argv, "--head", "--port", strconv.Itoa(o.GCSPort))
		if o.DashboardHost != "" {
			argv = append(argv, "--dashboard-host", o.DashboardHost)
		}
	} else {
		if o.HeadAddress == "" {
			return nil, nil, fmt.Errorf("a worker needs the head address")
		}
		argv = append(argv, "--address", o.HeadAddress)
	}
	if o.NodeIP != "" {
		argv = append(argv, "--node-ip-address", o.NodeIP)
	}
	if o.NumGPUs != nil {
		argv = append(argv, "--num-gpus", strconv.FormatInt(*o.NumGPUs, 10))
	}
	if len(o.Resources) > 0 {
		b, err := json.Marshal(o.Resources)
		if err != nil {
			return nil, nil, err
		}
		argv = append(argv, "--resources", string(b))
	}
	if len(o.Labels) > 0 {
		b, err := json.Marshal(o.Labels)
		if err != nil {
			return nil, nil, err
		}
		argv = append(argv, "--labels", string(b))
	}
	argv = append(argv, "--disable-usage-stats")
	return append(argv, o.ExtraArgs...), stdin, nil
}

// StopArgv stops this cluster's Ray on the node, and only it: `ray stop`
// would end every Ray on the node, other users' too when run as root (it
// walks psutil.process_iter() with no owner or cluster filter, Ray 2.52.1
// python/ray/scripts/scripts.py L1257).
//
// This cluster's processes are found by their command lines: every Ray
// daemon of a node carries its cluster's GCS address (`--gcs-address=<a>`,
// the client server `--address=<a>`), the head's GCS server its port
// (`--gcs_server_port=<p>`), and an unfinished `ray start` the flags the
// provider gave it. Ray's worker processes do not carry the address; they
// are found by their Unix session: `ray start` runs under setsid, so every
// process it and its raylet spawn shares its session (Ray names the session
// after that process, python/ray/_private/node.py L185 in 2.52.1). A session
// is taken whole only when its leader is gone or is this cluster's own `ray
// start`; Ray started by hand from a login shell loses only its matching
// processes, never the shell. An unfinished `ray start` (an apply
// interrupted while it ran: detached by setsid, it outlives the SSH session)
// goes with the rest, or it would go on spawning. Everything gets SIGTERM,
// what is left after the grace period SIGKILL, and the stop fails when a
// matching process survives. The node lock keeps another apply's ray start
// off this node meanwhile.
//
// gcsAddr is the cluster's GCS address (head registered IP:port); head adds
// the matches only the head has.
func StopArgv(gcsAddr string, gcsPort int, head bool) []string {
	h := "0"
	if head {
		h = "1"
	}
	return []string{"sh", "-c", StopScript, "sh", gcsAddr, strconv.Itoa(gcsPort), h, "10"}
}

// StopScript is StopArgv's script: $1 GCS address, $2 GCS port, $3 1 on
// the head, $4 grace period in seconds.
const StopScript = `a=$1 port=$2 head=$3 grace=$4
self=$(ps -o sid= -p $$ | tr -d ' ')
# ours: the pids of this SSH user whose command line names this cluster.
# Zombies and kernel threads have an empty command line and never match;
# another user's processes never do, whatever they name (a co-tenant's
# decoy would fail the stop, or, run as root, be killed).
ours() {
  for d in /proc/[0-9]*; do
    [ -O "$d" ] || continue
    c=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null) || continue
    case " $c" in
      *"-address=$a "*|*" start --address $a "*) echo "${d#/proc/}" ;;
      *" --gcs_server_port=$port "*|*" start --head --port $port "*) [ "$head" = 1 ] && echo "${d#/proc/}" ;;
    esac
  done
}
# sessions: the sessions of the matching pids that are this cluster's alone.
sessions() {
  for p in $1; do
    s=$(ps -o sid= -p "$p" 2>/dev/null | tr -d ' ')
    [ -n "$s" ] && [ "$s" != "$self" ] && [ "$s" != 1 ] || continue
    case " $1 " in *" $s "*) echo "$s"; continue ;; esac
    [ -n "$(tr -d '\0' < "/proc/$s/cmdline" 2>/dev/null)" ] || echo "$s"
  done | sort -u
}
# targets: matching pids, and every live member of their sessions.
targets() {
  m=$(echo $(ours))
  s=$(echo $(sessions "$m"))
  { echo "$m"
    [ -n "$s" ] && ps -eo pid=,sid= | while read -r p sid; do
      case " $s " in *" $sid "*) [ -O "/proc/$p" ] && [ -n "$(tr -d '\0' < "/proc/$p/cmdline" 2>/dev/null)" ] && echo "$p" ;; esac
    done
  } | grep -v -x -e '' -e "$$" | sort -u
}
t=$(targets)
[ -z "$t" ] && exit 0
kill -TERM $t 2>/dev/null
i=0
while [ "$i" -lt "$grace" ]; do
  sleep 1; i=$((i+1))
  t=$(targets); [ -z "$t" ] && exit 0
done
kill -KILL $t 2>/dev/null
sleep 1
left=$(for p in $(ours); do printf '%s: %s\n' "$p" "$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"; done)
[ -z "$left" ] && exit 0
echo "Ray processes of $a still running after SIGKILL: $left" >&2
exit 1`
