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
// client when the node holds a token at Ray's default path: readers of the
// node table and vLLM's driver then pass the cluster's check.
const AuthEnv = `[ -s "$HOME/.ray/auth_token" ] && export RAY_AUTH_MODE=token`

// PythonOfRay is the shell lines that set $py to the interpreter on the #!
// line of the ray command in $ray (the Python Ray is installed in), else
// python3: how the provider finds the Python to ask Ray's questions with.
const PythonOfRay = `rp=$(command -v -- "$ray" 2>/dev/null) &&
  py=$(head -n 1 -- "$rp" 2>/dev/null | sed -n 's/^#![[:space:]]*\([^[:space:]]*\).*/\1/p')
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

// StopArgv stops every Ray process on the node and then checks none is left.
// A `ray start` still running (an apply interrupted while it ran: it is
// detached from the SSH session by setsid, so cancelling the session does
// not end it) is ended first, or it would go on spawning what ray stop just
// stopped. The node lock keeps another apply's ray start off this node.
func StopArgv(rayCommand string) []string {
	if rayCommand == "" {
		rayCommand = "ray"
	}
	return []string{"sh", "-c", `starting='(^|/)ray start( |$)'
if pkill -TERM -f -- "$starting" 2>/dev/null; then
  for i in 1 2 3 4 5 6 7 8 9 10; do pgrep -f -- "$starting" >/dev/null || break; sleep 1; done
  pkill -KILL -f -- "$starting" 2>/dev/null
fi
"$1" stop --grace-period 10 >/dev/null 2>&1
for i in 1 2 3 4 5 6 7 8 9 10; do
  pgrep -x raylet >/dev/null || pgrep -x gcs_server >/dev/null || exit 0
  sleep 1
done
"$1" stop --force >/dev/null 2>&1
sleep 1
left=$(pgrep -a -x raylet; pgrep -a -x gcs_server)
[ -z "$left" ] && exit 0
echo "Ray processes still running after ray stop --force: $left" >&2
exit 1`, "sh", rayCommand}
}
