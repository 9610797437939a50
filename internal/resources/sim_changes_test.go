package resources_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/resources"
	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// absent, as a step's value, leaves the attribute out of the configuration.
const absent = "<absent>"

// restartStep is one configuration a change applies, and how to see on
// the node that the server runs with it.
type restartStep struct {
	set map[string]any
	// before changes the nodes before the step is applied; nil: nothing.
	before func(l *simLab)
	// runsWith says what of the step the new server lacks ("" when it has
	// it all), from its command line and environment.
	runsWith func(cmdline string, env map[string]string) string
}

// flagStep sets attribute a to v and expects want on the command line,
// and gone nowhere on it ("": not checked).
func flagStep(a string, v any, gone, want string) restartStep {
	return restartStep{set: map[string]any{a: v}, runsWith: func(cmd string, _ map[string]string) string {
		switch {
		case gone != "" && strings.Contains(cmd, gone):
			return "still has " + gone
		case want != "" && !strings.Contains(cmd, want):
			return "lacks " + want
		}
		return ""
	}}
}

// envStep sets attrs and expects env var k to be want ("" absent).
func envStep(attrs map[string]any, k, want string) restartStep {
	return restartStep{set: attrs, runsWith: func(_ string, env map[string]string) string {
		if env[k] != want {
			return k + " = " + env[k] + ", want " + want
		}
		return ""
	}}
}

// moved is step, after the cluster moved to GCS port 6380.
func moved(step restartStep) restartStep {
	step.before = func(l *simLab) {
		_, l.cluster = l.converge(clusterType, simCluster{workers: map[string]int{"w1": 1}, extra: map[string]any{"gcs_port": 6380}}.config(l), l.cluster)
	}
	return step
}

// Every change the attribute-change table (attribute_changes_test.go) says
// restarts a deployment's server does so on the nodes: the deployment is
// created with a row's first step, and each next step (null to a value, a
// value to another, a value to null, where the attribute allows them) is
// planned as a restart, stops the server and starts a new one that runs
// with the new setting. A restart row without steps here fails the test.
func TestSimVLLMDeployment_everyRestartRowRestarts(t *testing.T) {
	keyA, keyB := "/home/sim/a.key", "/home/sim/b.key"
	rows := map[string][]restartStep{
		// Required, and the head's own cluster: the cluster moves to GCS
		// port 6380 (a replace), then the deployment follows it.
		"ray_address": {envStep(map[string]any{"ray_address": fabricIP(0) + ":6379"}, "RAY_ADDRESS", fabricIP(0)+":6379"),
			moved(envStep(map[string]any{"ray_address": fabricIP(0) + ":6380"}, "RAY_ADDRESS", fabricIP(0)+":6380"))},
		"model": {flagStep("model", "tiny-llama", "", "serve tiny-llama"), flagStep("model", "tiny-llama-b", "", "serve tiny-llama-b")},
		"served_model_name": {flagStep("served_model_name", absent, "", "--served-model-name tiny-llama "),
			flagStep("served_model_name", "a", "", "--served-model-name a"), flagStep("served_model_name", "b", "", "--served-model-name b"),
			flagStep("served_model_name", absent, "", "--served-model-name tiny-llama ")},
		"tensor_parallel_size": {flagStep("tensor_parallel_size", absent, "", "--tensor-parallel-size 1"),
			flagStep("tensor_parallel_size", 2, "", "--tensor-parallel-size 2"), flagStep("tensor_parallel_size", absent, "", "--tensor-parallel-size 1")},
		"pipeline_parallel_size": {flagStep("pipeline_parallel_size", absent, "", "--pipeline-parallel-size 1"),
			flagStep("pipeline_parallel_size", 2, "", "--pipeline-parallel-size 2"), flagStep("pipeline_parallel_size", absent, "", "--pipeline-parallel-size 1")},
		"host_ip": {envStep(map[string]any{"host_ip": absent}, "VLLM_HOST_IP", ""),
			envStep(map[string]any{"host_ip": fabricIP(0)}, "VLLM_HOST_IP", fabricIP(0)), envStep(map[string]any{"host_ip": absent}, "VLLM_HOST_IP", "")},
		"host": {flagStep("host", absent, "", "--host 0.0.0.0"), flagStep("host", "127.0.0.1", "", "--host 127.0.0.1"),
			flagStep("host", absent, "", "--host 0.0.0.0")},
		"api_key_wo_version": {envStep(map[string]any{"api_key_wo": "sk-1", "api_key_wo_version": 1}, "VLLM_API_KEY", "sk-1"),
			envStep(map[string]any{"api_key_wo": "sk-2", "api_key_wo_version": 2}, "VLLM_API_KEY", "sk-2"),
			envStep(map[string]any{"api_key_wo": absent, "api_key_wo_version": absent}, "VLLM_API_KEY", "")},
		"api_key_file": {envStep(map[string]any{"api_key_file": absent}, "VLLM_API_KEY", ""),
			envStep(map[string]any{"api_key_file": keyA}, "VLLM_API_KEY", "sk-a"), envStep(map[string]any{"api_key_file": keyB}, "VLLM_API_KEY", "sk-b"),
			envStep(map[string]any{"api_key_file": absent}, "VLLM_API_KEY", "")},
		"secret_env_wo_version": {
			envStep(map[string]any{"secret_env_wo": map[string]any{"HF_TOKEN": "hf-1"}, "secret_env_wo_version": 1}, "HF_TOKEN", "hf-1"),
			envStep(map[string]any{"secret_env_wo": map[string]any{"HF_TOKEN": "hf-2"}, "secret_env_wo_version": 2}, "HF_TOKEN", "hf-2"),
			envStep(map[string]any{"secret_env_wo": absent, "secret_env_wo_version": absent}, "HF_TOKEN", "")},
		"env": {envStep(map[string]any{"env": absent}, "SIM_CHANGE", ""), envStep(map[string]any{"env": map[string]any{"SIM_CHANGE": "1"}}, "SIM_CHANGE", "1"),
			envStep(map[string]any{"env": map[string]any{"SIM_CHANGE": "2"}}, "SIM_CHANGE", "2"), envStep(map[string]any{"env": absent}, "SIM_CHANGE", "")},
		"extra_args": {flagStep("extra_args", absent, "--max-model-len", ""),
			flagStep("extra_args", []any{"--max-model-len", "128"}, "", "--max-model-len 128"),
			flagStep("extra_args", []any{"--max-model-len", "256"}, "", "--max-model-len 256"),
			flagStep("extra_args", absent, "--max-model-len", "")},
		// Both run the same script (vllm is on the SSH user's PATH there):
		// the restart is what this row shows.
		"vllm_command": {flagStep("vllm_command", vllmCommand, "", "serve"), flagStep("vllm_command", "vllm", "", "serve")},
	}
	for _, path := range resources.DeploymentRestartRows() {
		steps, ok := rows[path]
		if !ok {
			t.Errorf("%s restarts the server by the table, and has no steps here to show it on the nodes", path)
			continue
		}
		t.Run(path, func(t *testing.T) {
			l := newSimLab(t, 2)
			_, l.cluster = l.converge(clusterType, simCluster{workers: map[string]int{"w1": 1}}.config(l), sim.State{})
			l.model.WriteFile(0, keyA, "sk-a\n")
			l.model.WriteFile(0, keyB, "sk-b\n")
			var st sim.State
			identity := ""
			for i, step := range steps {
				if step.before != nil {
					step.before(l)
				}
				cfg := simDeploy{}.config(l)
				for k, v := range step.set {
					if v == absent {
						delete(cfg, k)
					} else {
						cfg[k] = v
					}
				}
				var p sim.Plan
				p, st = l.converge(deploymentType, cfg, st)
				next, _, env, ok := l.model.VLLM(0, 8000)
				cmd := strings.Join(l.model.VLLMCmdline(0, 8000), " ") + " "
				switch {
				case !ok:
					t.Fatalf("step %d (%v): no server runs", i, step.set)
				case i > 0 && show(t, p.Planned, "process_identity") != "<unknown>":
					t.Errorf("step %d (%v) is not planned as a restart: %s", i, step.set, p.Changes())
				case i > 0 && next == identity:
					t.Errorf("step %d (%v): the server %s was not restarted", i, step.set, identity)
				}
				if missing := step.runsWith(cmd, env); missing != "" {
					t.Errorf("step %d (%v): the server %s: %s\n  %s\n  env %v", i, step.set, missing, next, cmd, slices.Sorted(maps.Keys(env)))
				}
				identity = next
			}
		})
	}
}
