package inputs

import (
	"math"
	"net/netip"
	"strings"
	"testing"
)

// check runs one table: each value either passes (want "") or fails with an
// error that holds want.
func check(t *testing.T, fn func(string) error, cases map[string]string) {
	t.Helper()
	for v, want := range cases {
		err := fn(v)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", v, err)
		case want != "" && err == nil:
			t.Errorf("%q: accepted, want an error with %q", v, want)
		case want != "" && !strings.Contains(err.Error(), want):
			t.Errorf("%q: error %q does not say %q", v, err, want)
		}
	}
}

func TestEnvKey(t *testing.T) {
	check(t, EnvKey, map[string]string{
		"NCCL_SOCKET_IFNAME": "", "_x": "", "a1": "",
		"":                "not an environment variable name",
		"1A":              "not starting with a digit",
		"-S/bin/sh -c id": "not an environment variable name",
		"A=B":             "not an environment variable name",
		"A B":             "not an environment variable name",
		"ÄNDERUNG":        "not an environment variable name",
	})
}

func TestPlainEnvKey(t *testing.T) {
	check(t, PlainEnvKey, map[string]string{
		"NCCL_SOCKET_IFNAME": "", "TOKENIZERS_PARALLELISM": "", "HF_HUB_OFFLINE": "", "HF_HOME": "", "SSH_KEY_PATH": "",
		"MAX_TOKENS": "", "VLLM_CPU_KVCACHE_SPACE": "",
		"HF_TOKEN":               "secret_env_wo",
		"HUGGING_FACE_HUB_TOKEN": "hf auth login",
		"WANDB_API_KEY":          "secret_env_wo",
		"OPENAI_APIKEY":          "secret_env_wo",
		"AWS_SECRET_ACCESS_KEY":  "secret_env_wo",
		"db_password":            "secret_env_wo",
		"GOOGLE_CREDENTIALS":     "secret_env_wo",
		"TOKEN":                  "secret_env_wo",
		"VLLM_API_KEY":           "api_key_wo",
		"WANDB_KEY":              "secret_env_wo",
		"-S/bin/sh":              "not an environment variable name",
	})
}

func TestEnvValue(t *testing.T) {
	if err := EnvValue("K", "a b=c;$(x)"); err != nil {
		t.Errorf("a value with shell characters is carried quoted: %v", err)
	}
	if err := EnvValue("K", "a\x00b"); err == nil || !strings.Contains(err.Error(), `"K"`) {
		t.Errorf("NUL: got %v, want an error naming the key", err)
	}
}

func TestWorkerName(t *testing.T) {
	check(t, WorkerName, map[string]string{
		"spark2": "", "gpu-01": "", "a.b_c": "", strings.Repeat("w", 63): "",
		"head":                  "the name the provider gives the head",
		"HEAD":                  "the name the provider gives the head",
		"":                      "1 to 63",
		"a/b":                   "1 to 63",
		"two words":             "1 to 63",
		"-x":                    "starting with a letter or digit",
		strings.Repeat("w", 64): "1 to 63",
	})
}

func TestNotBlank(t *testing.T) {
	check(t, NotBlank("an SSH user"), map[string]string{"ubuntu": "", "": "give an SSH user", "  ": "give an SSH user"})
}

func TestPath(t *testing.T) {
	check(t, Path, map[string]string{
		"/opt/ray/bin/ray": "", "ray": "", "/path with space/ray": "",
		"":           "is empty",
		"/a\nrm -rf": "line break",
		"-rf":        "reads as an option",
	})
}

func TestAddress(t *testing.T) {
	check(t, Address, map[string]string{
		"127.0.0.1": "", "0.0.0.0": "", "::": "", "10.0.0.5": "", "localhost": "",
		"":           "not an IP address",
		"head.local": "not an IP address",
		"0.0.0.0 ":   "not an IP address",
	})
}

func TestTargetAddress(t *testing.T) {
	check(t, TargetAddress, map[string]string{
		"192.168.200.13": "", "127.0.0.1": "", "fd00::13": "",
		"0.0.0.0":      "every interface",
		"::":           "every interface",
		"localhost":    "not an IP address",
		"spark2.local": "not an IP address",
	})
}

func TestHostPort(t *testing.T) {
	check(t, func(v string) error { _, err := HostPort(v); return err }, map[string]string{
		"192.168.200.11:6379": "", "[fd00::1]:6379": "",
		"192.168.200.11": "not <ip>:<port>",
		"head:6379":      "not <ip>:<port>",
		"10.0.0.1:0":     "not <ip>:<port>",
		"10.0.0.1:70000": "not <ip>:<port>",
	})
}

func TestShmSize(t *testing.T) {
	check(t, ShmSize, map[string]string{
		"10g": "", "512m": "", "16GiB": "", "1.5g": "", "1024": "", "64 MB": "", "100b": "",
		"":     "not a size",
		"ten":  "not a size",
		"10x":  "not a size",
		"-1g":  "not a size",
		"10gg": "not a size",
	})
}

func TestContainerName(t *testing.T) {
	check(t, ContainerName, map[string]string{
		"ray-node": "", "r.1_x": "",
		"":      "not a container name",
		"-rf":   "not a container name",
		"a b":   "not a container name",
		"a/b":   "not a container name",
		"_lead": "not a container name",
	})
}

func TestImage(t *testing.T) {
	check(t, Image, map[string]string{
		"nvcr.io/nvidia/vllm:25.09-py3": "", "spark-lab/node@sha256:abc": "",
		"":             "is empty",
		"--privileged": "reads as an option",
		"img --rm":     "whitespace",
	})
}

func TestGPUs(t *testing.T) {
	check(t, GPUs, map[string]string{
		"": "", "all": "", "2": "", "device=0,1": "",
		"--privileged": "not a --gpus value",
		"all x":        "not a --gpus value",
	})
}

func TestAPIKey(t *testing.T) {
	check(t, APIKey, map[string]string{
		"s3cr3t": "",
		"":       "serves without authentication",
		"   ":    "serves without authentication",
		"a\nb":   "line break",
	})
	if err := APIKey("top-secret\n"); err == nil || strings.Contains(err.Error(), "top-secret") {
		t.Errorf("the error must not echo the key: %v", err)
	}
}

func TestResourceQuantity(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		want string
	}{
		{0, ""}, {1, ""}, {8, ""}, {100e12, ""},
		{-1, "nonnegative"},
		{0.5, "whole numbers"},
		{1.5, "whole numbers"},
		{100e12 + 1, "largest quantity"},
		{math.NaN(), "nonnegative"},
		{math.Inf(1), "nonnegative"},
	} {
		err := ResourceQuantity("fabric", tc.q)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: got %v, want %q", tc.q, err, tc.want)
		}
	}
}

func TestResourceName(t *testing.T) {
	check(t, ResourceName, map[string]string{
		"spark.head": "", "fabric": "", "cpu": "",
		"node:10.0.0.1":          "vLLM pins its",
		"":                       "empty name",
		"CPU":                    "one of Ray's own",
		"GPU":                    "num_gpus",
		"memory":                 "one of Ray's own",
		"object_store_memory":    "one of Ray's own",
		"node:__internal_head__": "the head itself",
	})
}

func TestLabelKey(t *testing.T) {
	check(t, LabelKey, map[string]string{
		"rack": "", "lab.example/rack": "", "A_b.c-d": "", "Example.COM/x": "", strings.Repeat("k", 63): "",
		"":                              "not one Ray accepts",
		"-rack":                         "not one Ray accepts",
		"rack-":                         "not one Ray accepts",
		"two words":                     "not one Ray accepts",
		strings.Repeat("k", 64):         "not one Ray accepts",
		"ray.io/node-id":                "reserved",
		"bad prefix!/rack":              "its prefix",
		strings.Repeat("p", 254) + "/x": "its prefix",
		"a/b/c":                         "its prefix",
	})
}

func TestLabelValue(t *testing.T) {
	check(t, func(v string) error { return LabelValue("rack", v) }, map[string]string{
		"": "", "r1": "", "us-east.1": "",
		"a,b": "not a value Ray accepts",
		"a=b": "not a value Ray accepts",
		" a":  "not a value Ray accepts",
		"-a":  "not a value Ray accepts",
	})
}

func TestRayStartArgs(t *testing.T) {
	check(t, func(v string) error { return ManagedArg(RayStartFlags, "start_args", v) }, map[string]string{
		"--object-store-memory=1000000000": "", "--num-cpus": "", "4": "", "--include-dashboard=false": "",
		"--head":                    "--head",
		"--node-ip-address":         "use node_ip",
		"--node-ip-address=1.2.3.4": "use node_ip",
		"--port=6380":               "use gcs_port",
		"--dashboard-host=0.0.0.0":  "use dashboard_host",
		"--num-gpus=2":              "use num_gpus",
		"--block":                   "never return",
	})
}

func TestModel(t *testing.T) {
	check(t, Model, map[string]string{
		"Qwen/Qwen3-8B": "", "/opt/models/tiny": "", "./-odd": "",
		"--port=9000": "read it as a flag",
		"-x":          "read it as a flag",
		" ":           "give a model name or path",
	})
}

func TestVLLMArg(t *testing.T) {
	check(t, VLLMArg, map[string]string{
		"--enforce-eager": "", "--max-model-len": "", "2048": "", "--dtype=bfloat16": "", "-O3": "",
		"--compilation-config.mode": "", "--": "", "-": "", "--data-parallel-size": "", "-dp": "",
		"--tensor-parallel-size":            "use tensor_parallel_size",
		"--tensor_parallel_size=2":          "use tensor_parallel_size",
		"--tensor-parallel":                 "use tensor_parallel_size",
		"-tp":                               "use tensor_parallel_size",
		"-tp2":                              "use tensor_parallel_size",
		"-tp=2":                             "use tensor_parallel_size",
		"-t":                                "use tensor_parallel_size",
		"-pp":                               "use pipeline_parallel_size",
		"--port=9000":                       "use port",
		"--host":                            "--host",
		"--api-key=abc":                     "api_key_wo",
		"--api_key":                         "api_key_wo",
		"--served-model-name":               "use served_model_name",
		"--distributed-executor-backend=mp": "on Ray",
		"--uds=/tmp/s":                      "Unix socket",
		"--config=c.yaml":                   "config file",
		"--hf-token=hf_abc":                 "secret_env_wo = { HF_TOKEN",
		"--hf-token":                        "readable in ps",
		"--hf-tok":                          "readable in ps",
		"--hf-config-path":                  "",
		"--model=x":                         "use model",
	})
}

func TestDockerRunArgs(t *testing.T) {
	check(t, func(v string) error { return ManagedArg(DockerRunFlags, "run_args", v) }, map[string]string{
		"-v": "", "/opt/x:/opt/x:ro": "", "--env=A=B": "",
		"--name=x":      "runtime.container.name",
		"--net=bridge":  "host's network",
		"--network":     "host's network",
		"--shm-size=1g": "shm_size",
		"--gpus":        "runtime.container.gpus",
		"--ipc=private": "--ipc host",
	})
}

func FuzzVLLMArgNeverPanics(f *testing.F) {
	for _, s := range []string{"--tensor-parallel-size=2", "-tp2", "--a_b.c", "--", "-", "", "=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := VLLMArg(s)
		// Whatever vLLM reads as --port must be refused.
		if strings.HasPrefix(s, "--port=") && err == nil {
			t.Errorf("%q accepted", s)
		}
	})
}

func TestServePort(t *testing.T) {
	for _, tc := range []struct {
		port int64
		addr string
		want string
	}{
		{8000, "10.0.0.1:6379", ""},
		{6379, "10.0.0.1:6379", "is the GCS port"},
		{6380, "10.0.0.1:6380", "is the GCS port"},
		{6379, "not an address", ""},
	} {
		err := ServePort(tc.port, tc.addr)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%d %s: got %v, want %q", tc.port, tc.addr, err, tc.want)
		}
	}
}

func TestNodeIP(t *testing.T) {
	for v, want := range map[string]string{
		"192.168.200.12": "", "10.1.230.180": "", "fd00::1": "",
		"127.0.0.1": "loopback", "::1": "loopback", "localhost": "localhost", "LOCALHOST": "localhost",
		"spark1.lab": "not an IP", "192.168.200.12/24": "not an IP", "0.0.0.0": "unspecified", "": "not an IP",
	} {
		err := NodeIP(v)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", v, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: want an error about %q, got %v", v, want, err)
		}
	}
}

func FuzzNodeIP(f *testing.F) {
	for _, s := range []string{"192.168.200.12", "127.0.0.1", "localhost", "::1", "", "1.2.3.4%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := NodeIP(s)
		if err == nil {
			ip, perr := netip.ParseAddr(s)
			if perr != nil || ip.IsLoopback() || ip.IsUnspecified() {
				t.Fatalf("accepted %q", s)
			}
		} else if !strings.Contains(err.Error(), "node_ip") {
			t.Fatalf("error does not name the attribute: %v", err)
		}
	})
}

func TestHostIP(t *testing.T) {
	for v, ok := range map[string]bool{"10.1.230.180": true, "192.168.200.12": true,
		"spark1": false, "ec2-1-2-3-4.compute.amazonaws.com": false, "10.1.230.180/": false, "127.0.0.1": false, "0.0.0.0": false, "": false} {
		err := HostIP(v)
		if (err == nil) != ok {
			t.Errorf("%q: err = %v", v, err)
		}
		if err != nil && !strings.Contains(err.Error(), "host_ip") {
			t.Errorf("%q: error does not name host_ip: %v", v, err)
		}
	}
}

func TestInterfaceName(t *testing.T) {
	check(t, InterfaceName, map[string]string{
		"enp1s0f1np1": "", "eth1": "", "fab1": "", "ib0.8001": "",
		"":                 "1 to 15 characters",
		"enp1s0f1np1xxxxx": "1 to 15 characters",
		"..":               "Linux accepts",
		"eth 1":            "Linux accepts",
		"a/b":              "Linux accepts",
		"eth0:1":           "Linux accepts",
		"eth0,eth1":        "not one interface",
		"^docker":          "not one interface",
		"=eth1":            "not one interface",
	})
}
