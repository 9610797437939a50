package transport

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-log/tflogtest"
)

// With TF_LOG=debug an operator follows every connection and remote step by
// node, step, duration and exit status, and finds no secret: not the
// command line, not stdin, not the output.
func TestDebugLogNamesEachStepAndNoSecret(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	var buf bytes.Buffer
	ctx := tflogtest.RootLogger(context.Background(), &buf)
	c, err := f.pool(t, nil).Get(ctx, endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	const canary = "CANARY-5e1f0c"
	_, err = c.Run(ctx, Cmd{Step: "write the env file", Argv: []string{"sh", "-c", "cat >/dev/null; echo " + canary + "; exit 3"},
		Stdin: []byte("VLLM_API_KEY=" + canary + "\n")})
	if ExitStatus(err) != 3 {
		t.Fatalf("want exit status 3, got %v", err)
	}
	if strings.Contains(buf.String(), canary) {
		t.Fatalf("the log holds the secret:\n%s", buf.String())
	}
	entries, err := tflogtest.MultilineJSONDecode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]map[string]any{}
	for _, e := range entries {
		byMsg[e["@message"].(string)] = e
	}
	conn, ok := byMsg["ssh connected"]
	if !ok || conn["node"] != endpointOf(f.srv).addr() || conn["host_key"] != c.HostKeyFingerprint() {
		t.Errorf("want an \"ssh connected\" line with the node and its host key, got %v", conn)
	}
	step, ok := byMsg["remote step"]
	if !ok {
		t.Fatalf("no \"remote step\" line in %v", entries)
	}
	for k, want := range map[string]any{"node": c.Addr(), "step": "write the env file", "exit_status": float64(3),
		"stdin_bytes": float64(len("VLLM_API_KEY=" + canary + "\n")), "@level": "debug"} {
		if step[k] != want {
			t.Errorf("remote step %s = %v, want %v", k, step[k], want)
		}
	}
	if _, ok := step["duration_ms"].(float64); !ok {
		t.Errorf("remote step has no duration_ms: %v", step)
	}
}
