package vllmdeploy

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

func TestLaunchEnvLayers(t *testing.T) {
	s := Spec{RayAddress: "10.0.0.1:6379", HostIP: "10.0.0.1",
		Env: map[string]string{"A": "spec", "B": "spec", "RAY_ADDRESS": "ignored"}}
	sec := Secrets{APIKey: "k", Env: map[string]string{"B": "secret", "VLLM_API_KEY": "ignored"}}
	want := map[string]string{"A": "spec", "B": "secret", "RAY_ADDRESS": "10.0.0.1:6379", "VLLM_HOST_IP": "10.0.0.1", "VLLM_API_KEY": "k"}
	if got := launchEnv(s, sec); !maps.Equal(got, want) {
		t.Fatalf("launchEnv = %v, want %v", got, want)
	}
	// Unset values are not set to "": vLLM would read them as given.
	got := launchEnv(Spec{RayAddress: "10.0.0.1:6379"}, Secrets{})
	if len(got) != 1 || got["RAY_ADDRESS"] != "10.0.0.1:6379" {
		t.Fatalf("launchEnv without host IP or key = %v", got)
	}
}

func TestHasError(t *testing.T) {
	warn := finding.Finding{Warning: true, Summary: "w"}
	if hasError(nil) || hasError([]finding.Finding{warn}) {
		t.Fatal("warnings alone counted as an error")
	}
	if !hasError([]finding.Finding{warn, {Summary: "e"}}) {
		t.Fatal("an error among warnings was missed")
	}
}

func TestUnfinishedLaunchDiagnostics(t *testing.T) {
	s := Spec{Port: 8000}
	if d := anotherLaunch(s, "12:34", "ops@laptop"); d.Warning || d.Path.String() != "port" {
		t.Fatalf("a launch under way must refuse the plan on port: %+v", d)
	}
	if d := leftRunning(s, "12:34", "ops@laptop"); !d.Warning || d.Path.String() != "port" {
		t.Fatalf("a server left running must only warn, on port: %+v", d)
	}
}

// The paths of stopLeftover and apiKey that need no server.
func TestLaunchStepsWithNothingToDo(t *testing.T) {
	ctx := context.Background()
	if d := stopLeftover(ctx, vllm.Server{}, leftover{}); d != nil {
		t.Fatalf("nothing left, yet %v", d)
	}
	if d := stopLeftover(ctx, vllm.Server{}, leftover{err: errors.New("no marker")}); len(d) != 1 || d[0].Summary != "Cannot read the vLLM start marker" {
		t.Fatalf("an unread marker gave %v", d)
	}
	if key, d := apiKey(ctx, vllm.Server{}, Spec{APIKeyFile: "/k"}, Secrets{APIKey: "given"}, "1:2"); key != "given" || d != nil {
		t.Fatalf("api_key wins over api_key_file: got %q %v", key, d)
	}
	if key, d := apiKey(ctx, vllm.Server{}, Spec{}, Secrets{}, "1:2"); key != "" || d != nil {
		t.Fatalf("no key at all: got %q %v", key, d)
	}
}
