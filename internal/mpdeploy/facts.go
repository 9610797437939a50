package mpdeploy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/mpplan"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

// FactsScript reads one node for the plan in one round trip: what
// nodefacts.Script reads (interfaces, vLLM's version, the route to the
// master address and to the other nodes), the listeners on the ports vLLM will bind, the free space in
// /dev/shm, and whether the model, when it is a path, is a directory here.
// $1 the vllm command, $2 the master address, $3 the model, $4 the ports
// (comma-separated; may be empty), $5 the other nodes' addresses whose
// routes to read (space-separated), $6 the deployment's directory key,
// (the model's config.json and weight files, for the memory estimate, are
// read where the model is a path),
// whose unfinished launch (vllm.UnfinishedScript) it reads too, in the
// private directory $7 names ("" or "home", vllm.Server.Private); and what
// a systemd unit needs (supervise.HostScript). vLLM's version is read by the Python
// on the vllm command's #! line, without importing vLLM.
const FactsScript = `vllm=${1:-vllm} master=$2 model=$3 ports=$4 peers=$5 key=$6 private_arg=$7
path=$(command -v "$vllm" 2>/dev/null) || path=
py=
if [ -n "$path" ]; then py=$(sed -n '1s/^#![[:space:]]*//p' "$path" 2>/dev/null | cut -d' ' -f1); fi
[ -n "$py" ] && [ -x "$py" ] || py=python3
facts() {
` + nodefacts.Script + `
}
facts ray "$py" "$master" "" "" "$vllm" "" "" "$peers"
echo @@listening
if [ -n "$ports" ]; then ss -Hltnp 2>/dev/null; fi
echo @@shm
if grep -qs ' /dev/shm ' /proc/mounts; then df -B1 --output=avail /dev/shm 2>/dev/null | tail -n 1; else echo 0; fi
echo @@model
case $model in
/*|./*|../*) if [ -d "$model" ]; then echo dir; elif [ -e "$model" ]; then echo "not a directory"; else echo "no such directory"; fi ;;
esac
echo @@model_config
case $model in
/*|./*|../*) if [ -f "$model/config.json" ]; then head -c 1000000 "$model/config.json"; fi ;;
esac
echo @@model_weights
case $model in
/*|./*|../*) find -L "$model" -maxdepth 1 -type f \( -name '*.safetensors' -o -name '*.bin' -o -name '*.pt' -o -name '*.pth' \) -printf '%s\t%P\n' 2>/dev/null ;;
esac
echo @@supervisor
` + supervise.HostScript + `
echo @@unfinished
unfinished() (
` + vllm.UnfinishedScript + `
)
unfinished "$key" "$private_arg"
echo @@done
`

func portsArg(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// leftover is a rank an apply started and never saw ready on a node
// (vllm.UnfinishedScript): identity "" when there is none.
type leftover struct {
	identity, holder string
	launching        bool // its apply still runs and holds the launch lock
}

// ParseFacts reads FactsScript's output; ports are those whose listeners
// it keeps.
func ParseFacts(out string, ports []int) (mpplan.Seen, leftover, error) {
	base, extra, ok := strings.Cut(out, "@@listening\n")
	if !ok {
		return mpplan.Seen{}, leftover{}, fmt.Errorf("unexpected output while reading the node: %q", out)
	}
	facts, err := nodefacts.Parse(base)
	if err != nil {
		return mpplan.Seen{}, leftover{}, err
	}
	listening, rest, _ := strings.Cut(extra, "@@shm\n")
	shm, rest, _ := strings.Cut(rest, "@@model\n")
	model, rest, _ := strings.Cut(rest, "@@model_config\n")
	config, rest, _ := strings.Cut(rest, "@@model_weights\n")
	weights, rest, _ := strings.Cut(rest, "@@unfinished\n")
	weights, host, _ := strings.Cut(weights, "@@supervisor\n")
	unfinished, _, ok := strings.Cut(rest, "@@done")
	if !ok {
		return mpplan.Seen{}, leftover{}, fmt.Errorf("the node's facts end early: %q", extra)
	}
	var left leftover
	if strings.TrimSpace(unfinished) != "" {
		left.identity, left.holder, left.launching = vllm.ParseUnfinished(unfinished)
	}
	seen := mpplan.Seen{Facts: facts, Listening: parseListening(listening, ports), Routes: facts.PeerRoutes}
	seen.ShmFree, _ = strconv.ParseInt(strings.TrimSpace(shm), 10, 64)
	seen.Supervisor = supervise.ParseHost(host)
	if m := strings.TrimSpace(model); m != "" && m != "dir" {
		seen.ModelMissing = m
	}
	if c := strings.TrimSpace(config); c != "" {
		seen.ModelConfig = []byte(c)
	}
	seen.ModelWeights = map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(weights), "\n") {
		size, name, ok := strings.Cut(line, "\t")
		if n, err := strconv.ParseInt(size, 10, 64); ok && err == nil {
			seen.ModelWeights[name] = n
		}
	}
	return seen, left, nil
}

// parseListening reads `ss -Hltnp` lines: for each of ports that something
// listens on, where and (for the SSH user's own processes) what.
func parseListening(out string, ports []int) map[int]string {
	held := map[int]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		local := f[3]
		p, err := strconv.Atoi(local[strings.LastIndexByte(local, ':')+1:])
		if err != nil || !slices.Contains(ports, p) {
			continue
		}
		who := "listening on " + local
		if len(f) > 5 {
			who += " (" + f[5] + ")"
		}
		held[p] = who
	}
	return held
}
