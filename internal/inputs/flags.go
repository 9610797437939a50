package inputs

import (
	"fmt"
	"regexp"
	"strings"
)

// Flag is one command-line flag the provider sets itself, and the attribute
// that sets it instead.
type Flag struct {
	Names []string // every spelling the program accepts, e.g. "--tensor-parallel-size", "-tp"
	Attr  string   // what to use instead, e.g. "tensor_parallel_size"
}

// RayStartFlags are the `ray start` flags the cluster sets, or whose effect
// would break what the provider knows about the node. Ray's CLI is click
// (ray/scripts/scripts.py, Ray 2.52.1, `start`): no short aliases for these,
// no abbreviations, "--flag value" or "--flag=value".
var RayStartFlags = []Flag{
	{[]string{"--head"}, "the head block (the provider starts the head itself)"},
	{[]string{"--address"}, "workers (the provider joins them to the head's head_address)"},
	{[]string{"--port"}, "gcs_port"},
	{[]string{"--node-ip-address"}, "node_ip"},
	{[]string{"--num-gpus"}, "num_gpus (the plan counts on it)"},
	{[]string{"--resources"}, "resources"},
	{[]string{"--labels"}, "labels"},
	{[]string{"--dashboard-host"}, "dashboard_host"},
	{[]string{"--block"}, "nothing: ray start would never return and the apply would wait until its timeout"},
}

// VLLMServeFlags are the `vllm serve` flags the deployment sets (vllm 0.32.0:
// vllm/engine/arg_utils.py, --model 944, --served-model-name 1006,
// --distributed-executor-backend 1135, --pipeline-parallel-size/-pp 1138,
// --tensor-parallel-size/-tp 1177; vllm/entrypoints/launchers/cli_args.py,
// FrontendArgs host, port, uds, api_key, and --config 450, a YAML file that
// can set any of them).
var VLLMServeFlags = []Flag{
	{[]string{"--model"}, "model"},
	{[]string{"--served-model-name"}, "served_model_name"},
	{[]string{"--tensor-parallel-size", "-tp"}, "tensor_parallel_size"},
	{[]string{"--pipeline-parallel-size", "-pp"}, "pipeline_parallel_size"},
	{[]string{"--distributed-executor-backend"}, "nothing: the provider runs vLLM on Ray"},
	{[]string{"--host"}, "nothing: the provider sets it"},
	{[]string{"--port"}, "port"},
	{[]string{"--uds"}, "port (a Unix socket would take the server off its port and readiness could never pass)"},
	{[]string{"--api-key"}, "api_key_wo or api_key_file (a key in argv is readable in ps, and in state)"},
	{[]string{"--config"}, "the attributes and extra_args (a config file can set what the provider manages)"},
}

// DockerRunFlags are the `docker run` flags the container runtime sets
// (docker CLI run flags: --network has the alias --net).
var DockerRunFlags = []Flag{
	{[]string{"--name"}, "runtime.container.name"},
	{[]string{"--network", "--net"}, "nothing: Ray needs the host's network, which the provider sets"},
	{[]string{"--ipc"}, "nothing: the provider sets --ipc host"},
	{[]string{"--shm-size"}, "runtime.container.shm_size"},
	{[]string{"--gpus"}, "runtime.container.gpus"},
}

// ManagedArg checks one element of an extra-arguments list against flags
// the provider manages. "--flag value" and "--flag=value" are both seen.
func ManagedArg(flags []Flag, attr, arg string) error {
	name, _, _ := strings.Cut(arg, "=")
	for _, f := range flags {
		for _, n := range f.Names {
			if name == n {
				return managedErr(attr, arg, n, f)
			}
		}
	}
	return nil
}

// shortWithValue is a single-dash flag with its value glued on ("-tp2"),
// which argparse reads as "-tp 2".
var shortWithValue = regexp.MustCompile(`^(-[a-zA-Z]+?)[0-9]`)

// VLLMArg checks one element of extra_args as vLLM's parser would read it.
// vLLM's FlexibleArgumentParser turns '_' into '-' in a "--" flag's name up
// to the first '.' (vllm/utils/argparse_utils.py, v0.32.0, parse_args), and
// argparse accepts any unambiguous prefix of an option (allow_abbrev is left
// on; "-t" is a prefix of "-tp"), so "--tensor_parallel_size",
// "--tensor-parallel" and "-tp2" all set tensor_parallel_size. A prefix of a
// managed flag is refused: vLLM would read it as that flag, or refuse it as
// ambiguous. No vLLM 0.32.0 option is itself a proper prefix of a managed
// one, so nothing vLLM would run with another meaning is refused.
func VLLMArg(arg string) error {
	name, _, _ := strings.Cut(arg, "=")
	switch {
	case strings.HasPrefix(name, "--"):
		key, _, dotted := strings.Cut(name[2:], ".")
		if dotted || key == "" {
			return nil // "--json-arg.key": a field of another option; "--": the end of options
		}
		name = "--" + strings.ReplaceAll(key, "_", "-")
	case strings.HasPrefix(name, "-"):
		if m := shortWithValue.FindStringSubmatch(name); m != nil {
			name = m[1]
		}
	default:
		return nil
	}
	for _, f := range VLLMServeFlags {
		for _, n := range f.Names {
			if len(name) >= 2 && strings.HasPrefix(n, name) {
				return managedErr("extra_args", arg, n, f)
			}
		}
	}
	// vLLM's --hf-token (vllm/engine/arg_utils.py, v0.32.0) takes a token
	// in argv, which ps shows every user and state keeps.
	if len(name) >= len("--hf-t") && strings.HasPrefix("--hf-token", name) {
		return fmt.Errorf("%q in extra_args is vLLM's --hf-token: a token there is readable in ps by every user of the head and is "+
			"stored in state. Give it as secret_env_wo = { HF_TOKEN = ... }, or log the nodes in with `hf auth login`: vLLM reads "+
			"either without the flag (which, given no value, only asks for that login token)", arg)
	}
	return nil
}

func managedErr(attr, arg, flag string, f Flag) error {
	return fmt.Errorf("%q in %s is read as %s, which the provider sets itself: use %s, and remove it from %s", arg, attr, flag, f.Attr, attr)
}
